"""Brings a database that 0017 upgraded to this jobq's schema: on MySQL and MariaDB, job
types, keys and the other identifiers take the server's binary collation without padding, so
that types apart in case or trailing spaces stay apart, as on PostgreSQL and SQLite.
install() applies only the versions the database lacks."""

from __future__ import annotations

from importlib import import_module

from django.db import migrations

# A module name that starts with a digit cannot be imported with an import statement. The
# operation is 0002's: install() again, which now has one more version to apply.
upgrade = import_module("jobq.contrib.django.migrations.0002_upgrade").Migration


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("jobq", "0017_leaner_endings")]  # noqa: RUF012 - Django's own declaration style
    operations = upgrade.operations
