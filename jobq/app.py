"""Importing the application whose Job classes a worker runs."""

from __future__ import annotations

import importlib
import os
import sys

from .errors import ConfigurationError


def import_app(module: str | None) -> None:
    if not module:
        return
    # An application usually lives in the working directory, as it does for `python -m`.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        importlib.import_module(module)
    except ImportError as error:
        raise ConfigurationError(f"cannot import --app {module!r}: {error}") from error


def reload_app(module: str | None) -> None:
    """Import the application afresh, with its submodules, so new code takes effect."""
    if not module:
        return
    for name in [n for n in sys.modules if n == module or n.startswith(module + ".")]:
        del sys.modules[name]
    import_app(module)
