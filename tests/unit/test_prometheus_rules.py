"""The Grafana dashboard's structure and metric names, and the alert rules' completeness.

Both name metrics by string, so a metric renamed in jobq/supervisor/metrics.py would leave
them silently empty; these tests compare every expression with the real registry instead.
Whether the expressions return data is the live-Prometheus test's job (tests/system).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.support.dashboards import (
    ALERT_TESTS,
    alert_queries,
    dashboard_panels,
    dashboard_queries,
    exported_families,
    exported_metric_names,
    load_alert_rules,
    load_dashboard,
    referenced_metrics,
)

DATASOURCE = "${datasource}"
# Series Prometheus makes itself for every target; alerts may use them, the dashboard not.
SCRAPE_SERIES = {"up"}
EXPECTED_ALERTS = {
    "JobqSupervisorDown",
    "JobqCleanupHorizonHeld",
    "JobqJobsPilingUp",
    "JobqFencingKills",
    "JobqRenewalErrors",
    "JobqHelperDown",
    "JobqWorkersCrashLooping",
    "JobqHighFailureRatio",
}


def datasource_uid(value: Any) -> Any:
    # Current Grafana writes {"type": ..., "uid": ...}; older dashboards used a plain string.
    return value.get("uid") if isinstance(value, dict) else value


def variable(dashboard: dict[str, Any], name: str) -> dict[str, Any]:
    found = [v for v in dashboard["templating"]["list"] if v["name"] == name]
    assert len(found) == 1, f"dashboard variable {name!r} missing or duplicated"
    result: dict[str, Any] = found[0]
    return result


def test_alert_rules_are_complete() -> None:
    rules = load_alert_rules()
    assert {rule["alert"] for rule in rules} == EXPECTED_ALERTS
    for rule in rules:
        name = rule["alert"]
        assert rule.get("labels", {}).get("severity") in {"warning", "critical"}, name
        annotations = rule.get("annotations", {})
        for key in ("summary", "description"):
            assert annotations.get(key, "").strip(), f"{name} has no {key} annotation"
        # $labels or $value, so a notification says which supervisor or type it is about.
        text = annotations["summary"] + annotations["description"]
        assert "$labels" in text or "$value" in text, name


def test_every_alert_has_firing_and_quiet_unit_tests() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    tests = yaml.safe_load(ALERT_TESTS.read_text(encoding="utf-8"))["tests"]
    for case in tests:
        assert case.get("input_series"), f"test {case.get('name')!r} has no input_series"
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    assert firing == EXPECTED_ALERTS, f"no firing case for {EXPECTED_ALERTS - firing}"
    assert quiet == EXPECTED_ALERTS, f"no not-firing case for {EXPECTED_ALERTS - quiet}"


def test_alerts_only_use_exported_metrics() -> None:
    known = exported_metric_names() | SCRAPE_SERIES
    for name, expr in alert_queries():
        used = referenced_metrics(expr)
        assert used, f"{name}: no metric found in {expr!r}"
        assert used <= known, f"{name}: unknown metrics {sorted(used - known)} in {expr!r}"


def test_referenced_metrics_scanner() -> None:
    # The scanner guards the other tests, so check it on the shapes they rely on.
    expr = (
        'histogram_quantile(0.99, sum by (le, type) (rate(a_bucket{type=~"x|y"}[1m]))) '
        '> 1e3 and on (type) b_total offset 5m or absent(up{job="jobq"}) / ignoring(le) c'
    )
    assert referenced_metrics(expr) == {"a_bucket", "b_total", "up", "c"}


def test_dashboard_is_importable_shape() -> None:
    dashboard = load_dashboard()
    # Imports as-is, with no __inputs step, into current Grafana.
    assert "__inputs" not in dashboard
    assert isinstance(dashboard["schemaVersion"], int)
    assert dashboard["schemaVersion"] >= 36
    assert dashboard["title"]
    assert dashboard["uid"]

    source = variable(dashboard, "datasource")
    assert source["type"] == "datasource"
    assert source["query"] == "prometheus"

    job_type = variable(dashboard, "type")
    assert job_type["type"] == "query"
    assert job_type["multi"]
    assert job_type["includeAll"]
    assert datasource_uid(job_type["datasource"]) == DATASOURCE
    query = job_type["query"]
    query = query["query"] if isinstance(query, dict) else query
    assert query == "label_values(jobq_jobs_claimed_total, type)"
    # "All" must be a regex that also matches types nobody has claimed yet.
    assert job_type["allValue"] == ".*"

    ids = [panel["id"] for panel in dashboard_panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_every_panel_is_complete() -> None:
    panels = [p for p in dashboard_panels() if p["type"] != "row"]
    assert panels
    for panel in panels:
        title = panel.get("title", "").strip()
        assert title, f"panel {panel.get('id')} has no title"
        assert datasource_uid(panel.get("datasource")) == DATASOURCE, title
        assert panel.get("description", "").strip(), f"{title}: no description"
        assert panel["fieldConfig"]["defaults"].get("unit"), f"{title}: no unit"
        assert "gridPos" in panel, title
        targets = panel.get("targets", [])
        assert targets, f"{title}: no query"
        for target in targets:
            assert target.get("expr", "").strip(), f"{title}: empty expression"
            if "datasource" in target:
                assert datasource_uid(target["datasource"]) == DATASOURCE, title


def test_dashboard_only_uses_exported_metrics() -> None:
    known = exported_metric_names()
    for title, expr in dashboard_queries():
        used = referenced_metrics(expr)
        assert used, f"{title}: no metric found in {expr!r}"
        assert used <= known, f"{title}: unknown metrics {sorted(used - known)} in {expr!r}"
        assert "$" not in expr, f"{title}: unsubstituted variable in {expr!r}"


def test_dashboard_windows_follow_the_scrape_interval() -> None:
    # A fixed [5m] looks fine at one zoom level and breaks at another; $__rate_interval is
    # always at least four scrapes long.
    for panel in dashboard_panels():
        for target in panel.get("targets", []):
            for window in re.findall(r"\[([^\]]*)\]", target["expr"]):
                assert window == "$__rate_interval", f"{panel['title']}: [{window}]"


def test_dashboard_shows_every_metric() -> None:
    # A metric added to the supervisor without a panel is invisible to operators.
    used = {name for _, expr in dashboard_queries() for name in referenced_metrics(expr)}
    shown = {
        family
        for family in exported_families()
        if any(name == family or name.startswith(family + "_") for name in used)
    }
    assert shown == exported_families(), f"no panel for {sorted(exported_families() - shown)}"
