"""jobq for Django projects: add "jobq.contrib.django" to INSTALLED_APPS.

- jobq's tables are installed by `manage.py migrate` (and so in test databases);
- every installed app's `jobs` module is imported when Django is set up;
- `enqueue()` writes a job on Django's connection, inside the current transaction, and
  `emit()` an event (jobq.wait_for);
- `manage.py jobq supervise|work|migrate|stats` runs jobq's commands on Django's database;
- in jobq's workers, Django's `close_old_connections()` runs before and after every job;
- `path("jobq/", include("jobq.contrib.django.web_urls"))` serves the status page to staff
  (web.py).

Settings, all optional:

    JOBQ = {
        "DATABASE": "default",   # the alias whose database holds jobq's tables
        "DSN": None,             # jobq's DSN; by default built from DATABASES[DATABASE]
        "WEB_OPERATORS": "jobq operators",  # the staff group that may act on the console
    }
"""

from __future__ import annotations

from .producer import emit, enqueue, queue_for
from .settings import dsn

__all__ = ["dsn", "emit", "enqueue", "queue_for"]
