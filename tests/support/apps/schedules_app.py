"""An application with a periodic job, for tests that run real supervisors and `jobq work`:
loaded as `--app schedules_app` (the tests put this folder on PYTHONPATH)."""

from __future__ import annotations

import os

import jobq


class Tick(jobq.Job):
    job_name = "schedules_app.Tick"
    type = "tick"

    def handle(self) -> None:
        pass


# overlap=True: every slot gets its job even while an earlier one waits for a worker.
jobq.schedule("every-second", Tick(), every=1, overlap=True)
jobq.schedule("nightly", Tick(), cron="30 2 * * *", timezone="Europe/Berlin")

# A schedule of its own type for the tests that run two versions of this app side by side (a
# deploy) or freeze a housekeeper: its interval in seconds from the environment, and slots
# missed while nobody watched are skipped.
if every := os.environ.get("SCHEDULES_APP_EXTRA_EVERY"):
    jobq.schedule("extra", Tick(), every=float(every), type="extra", overlap=True, catch_up=False)
