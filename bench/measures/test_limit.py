"""The SQL limit's pgbench scripts hold jobq's own statements, read at run time."""

from __future__ import annotations

import pytest

from jobq.backends.postgresql import PostgresBackend
from jobq.backends.postgresql.claims import claim_statement, complete_and_claim_statement

from . import limit


def test_the_pgbench_script_holds_jobqs_own_statements() -> None:
    script = limit.script(600.0).splitlines()
    claim = " ".join(claim_statement(False).split()).replace("%(token)s", ":token")
    for name in ("lease", "host", "pid", "worker"):
        claim = claim.replace(f"%({name})s", f":{name}")
    ack = " ".join(PostgresBackend.sql_complete.split())
    ack = ack.replace("%(id)s", ":id").replace("%(token)s", ":token")
    ack = ack.replace("%(result)s", "NULL")
    assert script[0].startswith("\\set token random(")
    assert script[1] == "\\set lease 600.0"
    assert script[2] == claim + " \\gset"
    assert script[3] == ack + ";"


def test_the_fused_pgbench_script_holds_jobqs_own_statement() -> None:
    script = limit.fused_script(600.0).splitlines()
    fused = " ".join(complete_and_claim_statement(False).split())
    for name in ("id", "token", "new_token", "lease", "host", "pid", "worker"):
        fused = fused.replace(f"%({name})s", f":{name}")
    fused = fused.replace("%(result)s", "NULL")
    assert script[0].startswith("\\set new_token random(")
    assert script[1] == "\\set lease 600.0"
    assert script[2] == fused + " \\gset"
    assert script[3] == "\\set token :new_token", "the next run acknowledges this claim"


def test_an_unknown_parameter_is_refused() -> None:
    with pytest.raises(ValueError, match="does not set"):
        limit.to_pgbench("SELECT %(nope)s", {"id"})


def test_whitespace_inside_a_literal_is_refused() -> None:
    with pytest.raises(ValueError, match="literal"):
        limit.to_pgbench("SELECT 'a  b' WHERE id = %(id)s", {"id"})
