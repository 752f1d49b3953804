"""Brings a database that 0003 upgraded to this jobq's schema: the column naming the worker
incarnation that made each claim, which a supervisor settles a dead worker's rows by.
install() applies only the versions the database lacks, so on a database 0001 has just
created it does nothing."""

from __future__ import annotations

from importlib import import_module

from django.db import migrations

# A module name that starts with a digit cannot be imported with an import statement. The
# operation is 0002's: install() again, which now has one more version to apply.
upgrade = import_module("jobq.contrib.django.migrations.0002_upgrade").Migration


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("jobq", "0003_status_page")]  # noqa: RUF012 - Django's own declaration style
    operations = upgrade.operations
