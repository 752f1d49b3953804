"""The documentation site builds in strict mode: a link to a missing page, an anchor no heading
makes or a page left out of the nav fails the suite. Here too, the schema reference is checked
against a freshly migrated SQLite database (docs/generate.py), which a unit test may not open."""

from __future__ import annotations

from pathlib import Path

from mkdocs.commands.build import build
from mkdocs.config import load_config

from docs import generate
from tests.support.paths import REPO


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    # Offline: nothing the build renders is fetched.
    build(load_config(str(REPO / "mkdocs.yml"), strict=True, site_dir=str(tmp_path)))
    assert (tmp_path / "index.html").exists()


def test_the_schema_page_is_what_a_fresh_database_holds() -> None:
    page = (REPO / "docs" / "reference" / "schema.md").read_text()
    assert generate.regenerate(page) == page, "schema.md is stale: run python -m docs.generate"
