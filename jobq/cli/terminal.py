"""Text from the database, fit for a terminal.

A job's type, payload and error are anyone's who can write a job, and a terminal obeys the
control sequences in what it is given: `\\x1b[2J` clears the screen, `\\x1b]0;...\\x07` sets
the window's title, others answer back as if typed. jobq's text output writes every control
character escaped, as Python writes it in a string, whether to a terminal or to a pipe or
file that one may print later; --json writes them as JSON escapes.
"""

from __future__ import annotations

import unicodedata

# Where a value runs over lines (a traceback), its newlines and tabs are its layout.
LAYOUT = "\n\t"


def escaped(text: str, lines: bool = False) -> str:
    """`text` with each control character (C0, DEL, C1) written as \\xNN; with `lines`,
    newlines and tabs kept."""
    if text.isprintable():
        return text
    kept = LAYOUT if lines else ""
    return "".join(
        f"\\x{ord(c):02x}" if unicodedata.category(c) == "Cc" and c not in kept else c for c in text
    )
