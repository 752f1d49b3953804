"""A DSN's password, whatever it holds, never shown by the command line's errors: each
connection is refused on loopback port 1, or the DSN refused before connecting."""

from __future__ import annotations

import pytest

from jobq.cli import commands
from tests.unit.test_dsn import PASSWORD_CHARACTERS


@pytest.mark.parametrize("scheme", ["postgresql", "mysql"])
@pytest.mark.parametrize("character", PASSWORD_CHARACTERS)
def test_a_cli_error_shows_no_part_of_a_password_whatever_it_holds(
    scheme: str, character: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = f"{scheme}://jobq:Zx9{character}k+Qa8w==@127.0.0.1:1/db"
    assert commands.main(["stats", "--dsn", dsn]) in (1, 2)
    err = capsys.readouterr().err
    assert f"{scheme}://jobq:***@127.0.0.1:1/db" in err, err
    assert "Zx9" not in err, err
    assert "k+Qa8w==" not in err, err
