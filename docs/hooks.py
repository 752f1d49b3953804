"""MkDocs hooks: the pages served from files kept outside docs/, and guides the nav leaves out.

The references made from the code are written into their pages by `python -m docs.generate`
(docs/generate.py), not here, so that they read the same on a code host as on the site.

The README (the home page), the changelog, the architecture notes and the benchmark results
stay where their writers keep them and are served as pages of the site, not copied into docs/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
# Served as pages of the site, from where they live: site path -> repository path.
OUTSIDE = {
    "changelog.md": "CHANGELOG.md",
    "architecture.md": "ARCHITECTURE.md",
    "benchmarks.md": "bench/RESULTS.md",
    "throughput.png": "bench/throughput.png",  # RESULTS.md's chart, beside it as there
}
# The README is the site's home page: its links into docs/ and to the files above become the
# site's own.
HOME_LINKS = {"](docs/": "](", **{f"]({source})": f"]({page})" for page, source in OUTSIDE.items()}}


def home_page() -> str:
    """The README, with its links made the site's."""
    text = (ROOT / "README.md").read_text()
    for link, site_link in HOME_LINKS.items():
        text = text.replace(link, site_link)
    return text


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for site_path, source in OUTSIDE.items():
        files.append(File.generated(config, site_path, abs_src_path=str(ROOT / source)))
    files.append(File.generated(config, "index.md", content=home_page()))
    return files


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Guides left out of the nav join its Guides section, after those listed: a guide
    added beside the others is on the site without an edit to mkdocs.yml."""
    guides: list[Any] = next(item["Guides"] for item in config.nav or () if "Guides" in item)
    # An entry is `Title: path`, or a bare path whose page names itself.
    listed = {entry if isinstance(entry, str) else next(iter(entry.values())) for entry in guides}
    for path in sorted(Path(config.docs_dir, "guides").glob("*.md")):
        if f"guides/{path.name}" not in listed:
            guides.append(f"guides/{path.name}")
    return config
