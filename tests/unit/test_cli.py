"""The command line without running it: the test app's job names, how --json gives a payload.
The option tables are the documentation site's (tests/unit/test_docs.py)."""

from __future__ import annotations

import pytest

import jobq
from jobq.cli.controls import payload_value
from tests.support.apps import jobs_app
from tests.support.apps.jobs_app import AppendLine


def test_the_test_app_is_the_one_the_worker_imports() -> None:
    # The worker imports this module as `jobs_app`, these tests as
    # `tests.support.apps.jobs_app`: the names stored with jobs must not depend on which.
    assert AppendLine.job_name == "jobs_app.AppendLine"
    assert jobq.job.registered("jobs_app.AppendLine") is jobs_app.AppendLine


@pytest.mark.parametrize(
    ("stored", "given"),
    [
        ('{"customer":"acme","n":[1,2.5,null]}', {"customer": "acme", "n": [1, 2.5, None]}),
        ("gASVCwAAAAAAAAB9lC4=", "gASVCwAAAAAAAAB9lC4="),  # another codec's text: as stored
        ("[1, 2]", "[1, 2]"),  # JSON, but no codec of jobq's makes a job of a list
        ('{"n": NaN}', '{"n": NaN}'),  # not JSON to any strict reader
        ("", ""),
    ],
)
def test_json_output_decodes_a_payload_only_when_it_is_a_json_object(
    stored: str, given: object
) -> None:
    assert payload_value(stored) == given
