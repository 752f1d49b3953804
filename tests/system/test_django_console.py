"""The console mounted in a Django project behind the admin's staff login: Django's own test
runner runs project/console_tests.py on a test database (tests/support/djangoproject)."""

from __future__ import annotations

import pytest

from tests.system.test_django import manage, ok


@pytest.mark.databases("postgresql", "sqlite", "mariadb")
def test_the_console_in_django_is_for_staff_with_roles_and_djangos_csrf(dsn: str) -> None:
    output = ok(
        manage(
            dsn,
            "test",
            "project.console_tests",
            "--settings=project.console_settings",
            "--noinput",
        )
    )
    assert "Ran 7 tests" in output, output
    assert "\nOK" in output, output
