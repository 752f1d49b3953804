"""The floor's loop binds every parameter of jobq's statement, and nothing else."""

from __future__ import annotations

from jobq.backends.postgresql.claims import complete_and_claim_statement

from .floor import parameters
from .limit import PARAM


def test_the_floor_binds_exactly_the_parameters_of_jobqs_statement() -> None:
    statement = complete_and_claim_statement(False)
    bound = parameters(7, "old", "new")
    assert set(bound) == set(PARAM.findall(statement))
    assert bound["result"] is None, "a no-op job's acknowledgement carries no result"
    assert (bound["id"], bound["token"], bound["new_token"]) == (7, "old", "new")
