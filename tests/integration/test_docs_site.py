"""The documentation site builds in strict mode: a link to a missing page, an anchor no heading
makes or a page left out of the nav fails the suite. An integration test because the build
renders the schema reference from a freshly migrated SQLite database (docs/hooks.py)."""

from __future__ import annotations

from pathlib import Path

from mkdocs.commands.build import build
from mkdocs.config import load_config

from tests.support.paths import REPO


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    # Offline: nothing the build renders is fetched.
    build(load_config(str(REPO / "mkdocs.yml"), strict=True, site_dir=str(tmp_path)))
    assert (tmp_path / "index.html").exists()
