"""Brings a database that 0005 upgraded to this jobq's schema: each job keeps the W3C trace
context of the enqueue that traced it, for its attempts' spans (see jobq/tracing.py).
install() applies only the versions the database lacks."""

from __future__ import annotations

from importlib import import_module

from django.db import migrations

# A module name that starts with a digit cannot be imported with an import statement. The
# operation is 0002's: install() again, which now has one more version to apply.
upgrade = import_module("jobq.contrib.django.migrations.0002_upgrade").Migration


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("jobq", "0005_schedule_declared_at")]  # noqa: RUF012 - Django's own declaration style
    operations = upgrade.operations
