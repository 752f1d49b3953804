"""Brings a database that 0016 upgraded to this jobq's schema: on PostgreSQL, the endings'
trigger finds the attempts a statement ended without joining its two transition tables,
passes over the keys whose next jobs the statement claimed, and stops early when no key has
a free slot; a function admits the claims of blocked jobs that a batched acknowledgement
makes, for all its keys at once. install() applies only the versions the database lacks."""

from __future__ import annotations

from importlib import import_module

from django.db import migrations

# A module name that starts with a digit cannot be imported with an import statement. The
# operation is 0002's: install() again, which now has one more version to apply.
upgrade = import_module("jobq.contrib.django.migrations.0002_upgrade").Migration


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("jobq", "0016_limit_endings")]  # noqa: RUF012 - Django's own declaration style
    operations = upgrade.operations
