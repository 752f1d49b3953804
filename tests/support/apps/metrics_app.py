"""supervised_app's jobs, and one periodic job that never comes due while a test runs: the
live metrics test needs a schedule's series, which start at zero once the app declares it."""

from __future__ import annotations

import importlib

import jobq

# Workers load this app in place of supervised_app, so it registers that app's jobs too.
importlib.import_module("supervised_app")


class NewYearReport(jobq.Job):
    job_name = "metrics_app.NewYearReport"

    def handle(self) -> None:
        pass


jobq.schedule("new-year-report", NewYearReport(), cron="0 0 1 1 *")
