"""The Grafana dashboard's and the alert rules' PromQL, in a form tests can evaluate.

The live-Prometheus test evaluates every one of these against a real supervisor; the static
tests in test_prometheus_rules.py check that they only name metrics the supervisor exports.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import yaml

from jobq.supervisor.metrics import Metrics
from tests.support.paths import REPO

REPO_DIR = REPO
DASHBOARD = REPO_DIR / "grafana" / "jobq.json"
ALERT_RULES = REPO_DIR / "deploy" / "prometheus" / "jobq-alerts.yml"
ALERT_TESTS = REPO_DIR / "deploy" / "prometheus" / "jobq-alerts.test.yml"

# What Grafana would put in for the dashboard's variables: 1m is four 15 s scrapes, the
# smallest window $__rate_interval gives with the default scrape interval, and ".*" is the
# `type` and `pool` variables' "All" value.
VARIABLES = {"__rate_interval": "1m", "__interval": "1m", "type": ".*", "pool": ".*"}

# The samples a family of each type exposes. Families with labels have no samples until a
# label value is first used, so the names cannot all come from collect()'s samples.
SAMPLE_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
    "stateset": ("",),
    "enum": ("",),
    "unknown": ("",),
}

# PromQL words that look like identifiers but are not metric names.
KEYWORDS = {"and", "or", "unless", "bool", "atan2", "inf", "nan", "offset"}
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_OFFSETS = re.compile(r"\boffset\s+-?[0-9a-z]+")
# Not preceded by a word character or a dot, so the "e3" of "1e3" or "99" of "0.99" is skipped.
_IDENTIFIER = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*)(\s*\()?")
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def exported_metric_names() -> set[str]:
    """Every sample name a supervisor's registry can expose, from the real Metrics class."""
    names: set[str] = set()
    for family in Metrics("sqlite", 600, 10).registry.collect():
        names.update(sample.name for sample in family.samples)
        names.update(family.name + suffix for suffix in SAMPLE_SUFFIXES[family.type])
    return names


def exported_families() -> set[str]:
    return {family.name for family in Metrics("sqlite", 600, 10).registry.collect()}


def referenced_metrics(expr: str) -> set[str]:
    """The metric names a PromQL expression selects.

    A deliberately small scanner, not a parser: it drops strings, label matchers, ranges and
    grouping clauses, then takes every identifier that is not a function call or a keyword.
    That is exact for the kind of expressions dashboards and alerts use.
    """
    text = _STRINGS.sub(" ", expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    text = _OFFSETS.sub(" ", text)
    return {
        match.group(1)
        for match in _IDENTIFIER.finditer(text)
        if match.group(2) is None and match.group(1) not in KEYWORDS
    }


def substitute(expr: str) -> str:
    """Replace Grafana variables the way Grafana would; an unknown one is an error, since
    Prometheus would reject the literal `$name`."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in VARIABLES:
            raise ValueError(f"unknown dashboard variable ${name} in {expr!r}")
        return VARIABLES[name]

    return _VARIABLE.sub(value, expr)


def load_dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def dashboard_panels(dashboard: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Every panel, including those inside collapsed rows (which nest their panels)."""
    for panel in (dashboard or load_dashboard())["panels"]:
        yield panel
        yield from panel.get("panels", [])


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expression) for every query of every panel, variables substituted."""
    return [
        (panel["title"], substitute(target["expr"]))
        for panel in dashboard_panels()
        for target in panel.get("targets", [])
    ]


def load_alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERT_RULES.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def alert_queries() -> list[tuple[str, str]]:
    """(alert name, expression) for every alerting rule. Most of them return nothing while
    the system is healthy: they are conditions, not signals."""
    return [(rule["alert"], rule["expr"].strip()) for rule in load_alert_rules()]
