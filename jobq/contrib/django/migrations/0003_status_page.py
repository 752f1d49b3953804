"""Brings a database that 0002 upgraded to this jobq's schema: the status page's indexes (and
PostgreSQL's oldest-ready function), and PostgreSQL's claim probes without JIT. install()
applies only the versions the database lacks, so on a database 0001 has just created it does
nothing."""

from __future__ import annotations

from importlib import import_module

from django.db import migrations

# A module name that starts with a digit cannot be imported with an import statement. The
# operation is 0002's: install() again, which now has one more version to apply.
upgrade = import_module("jobq.contrib.django.migrations.0002_upgrade").Migration


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("jobq", "0002_upgrade")]  # noqa: RUF012 - Django's own declaration style
    operations = upgrade.operations
