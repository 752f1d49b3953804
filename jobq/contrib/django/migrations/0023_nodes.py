"""Brings a database that 0022 upgraded to this jobq's schema: the table jobq_nodes, where
each running jobq-supervise records its heartbeat for `jobq nodes` and the status page's
/nodes (backends/nodes.py). install() applies only the versions the database lacks."""

from __future__ import annotations

from importlib import import_module

from django.db import migrations

# A module name that starts with a digit cannot be imported with an import statement. The
# operation is 0002's: install() again, which now has one more version to apply.
upgrade = import_module("jobq.contrib.django.migrations.0002_upgrade").Migration


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("jobq", "0022_limit_floors")]  # noqa: RUF012 - Django's own declaration style
    operations = upgrade.operations
