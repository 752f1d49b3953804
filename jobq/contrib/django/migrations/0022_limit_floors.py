"""Brings a database that 0021 upgraded to this jobq's schema: on PostgreSQL, a
concurrency key's attempts are counted from the key's oldest live one, so that a snapshot held
open elsewhere no longer makes every admission step over every attempt of the key run since.
install() applies only the versions the database lacks."""

from __future__ import annotations

from importlib import import_module

from django.db import migrations

# A module name that starts with a digit cannot be imported with an import statement. The
# operation is 0002's: install() again, which now has one more version to apply.
upgrade = import_module("jobq.contrib.django.migrations.0002_upgrade").Migration


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("jobq", "0021_durable_steps")]  # noqa: RUF012 - Django's own declaration style
    operations = upgrade.operations
