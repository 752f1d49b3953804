"""Results, progress, checkpoints and the attempt history as `jobq show`, `jobq jobs` and the
status page show them. The database layer is test_results.py's: one database will do."""

from __future__ import annotations

import json

import pytest
from werkzeug.test import Client

import jobq
from jobq.cli.commands import main
from jobq.web import Credentials, make_app
from tests.support.result_jobs import Answer, Resume

pytestmark = pytest.mark.databases("sqlite")


def test_show_jobs_and_the_status_page_show_results_and_progress(
    queue: jobq.Queue, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    answered = queue.enqueue(Answer({"total": "ünïcode", "rows": [1, 2]}))
    resumed = queue.enqueue(Resume(rows=4, fail_at=2), retry=jobq.RetryPolicy(backoff=0))
    assert queue.process_jobs(2) == 2  # the answer, and the first attempt that fails
    running = queue.enqueue(Answer(None), type="slow")
    claim = queue.claim("slow")
    assert claim is not None
    assert queue.backend.attempt_write(
        "progress", running, claim.token, '{"done":7,"total":9,"note":"rows"}'
    )

    assert main(["show", str(answered), "--json", "--dsn", dsn]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["result"] == {"total": "ünïcode", "rows": [1, 2]}
    assert [entry["attempt"] for entry in shown["history"]] == [1]
    assert shown["history"][0]["error"] is None
    assert main(["show", str(resumed), "--json", "--dsn", dsn]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["checkpoint"] == {"row": 2}
    assert shown["progress"] == {"done": 2, "total": 4, "note": "rows"}
    assert shown["error_class"] == "builtins.RuntimeError"
    assert shown["history"][0]["error_class"] == "builtins.RuntimeError"

    assert main(["show", str(answered), "--dsn", dsn]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:2] == ["result", '{"total":'] for line in lines), lines
    assert main(["show", str(resumed), "--dsn", dsn]) == 0
    text = capsys.readouterr().out
    assert "builtins.RuntimeError" in text
    assert "2/4 rows" in text
    assert main(["jobs", "--dsn", dsn]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split()[-1] == "progress"
    assert rows[0].split()[0] == str(running)
    assert rows[0].endswith("7/9 rows")

    client = Client(make_app(queue, credentials=Credentials()))
    html = client.get(f"/jobs/{answered}").get_data(as_text=True)
    assert "&#34;total&#34;: &#34;ünïcode&#34;" in html, "the result, indented JSON"
    assert 'http-equiv="refresh"' not in html
    html = client.get(f"/jobs/{running}").get_data(as_text=True)
    assert '<dd id="progress">7/9 rows</dd>' in html
    assert 'http-equiv="refresh"' in html, "a running job's page reloads itself"
    html = client.get(f"/jobs/{resumed}").get_data(as_text=True)
    assert '<p id="error-class">builtins.RuntimeError</p>' in html
    assert "&#34;row&#34;: 2" in html, "the checkpoint"
    html = client.get("/jobs").get_data(as_text=True)
    assert "<td>7/9 rows</td>" in html
