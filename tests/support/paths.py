"""Where the repository is, for tests that read its files (README, deploy/, grafana/)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
