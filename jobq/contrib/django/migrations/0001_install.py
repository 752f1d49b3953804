"""jobq's tables, on the database of JOBQ["DATABASE"] only.

Not atomic: jobq's install takes its own lock and transactions, and SQLite refuses a
transaction within Django's ("cannot start a transaction within a transaction").
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

from ....queue import Queue
from .. import settings


def install(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    if connection.alias == settings.alias():
        Queue.from_connection(connection).install()


class Migration(migrations.Migration):
    atomic = False
    initial = True
    # Reversing leaves the tables: they may hold jobs, and jobq has no uninstall.
    operations = [  # noqa: RUF012 - Django's own declaration style
        migrations.RunPython(install, migrations.RunPython.noop, atomic=False)
    ]
