"""Job state through the codec alone: what round-trips, what is refused, and what is never
imported (tests/integration/test_codec.py takes it through the queue)."""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

import jobq
from jobq import DecodeError, JsonCodec
from tests.support.codec_jobs import Keep, Named, Strict
from tests.support.strategies import states


class Opaque:
    pass


class NeedsTwo(jobq.Job):
    job_name = "tests.NeedsTwo"

    def __init__(self, first: int, second: int, third: int = 3) -> None:
        self.first, self.second, self.third = first, second, third


@settings(max_examples=200, deadline=None, database=None)
@given(state=states)
def test_any_json_state_round_trips(state: dict[str, Any]) -> None:
    codec = JsonCodec()
    class_name, payload = codec.encode(Keep(**state))
    # What every database stores as text: UTF-8 without surrogates.
    payload.encode("utf-8")
    decoded = codec.decode(class_name, payload)
    assert type(decoded) is Keep
    assert json.dumps(vars(decoded), sort_keys=True) == json.dumps(state, sort_keys=True)


def test_custom_job_name_is_what_is_stored() -> None:
    assert JsonCodec().encode(Named()) == ("codec-tests/named", "{}")
    assert type(JsonCodec().decode("codec-tests/named", "{}")) is Named


@pytest.mark.parametrize("class_name", ["os.system", "builtins.eval", "subprocess.Popen", ""])
def test_unknown_class_is_refused_by_name(class_name: str) -> None:
    with pytest.raises(DecodeError, match="unknown job class") as caught:
        JsonCodec().decode(class_name, "{}")
    assert repr(class_name) in str(caught.value)


def test_unknown_class_is_never_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real, importable module whose import would leave a trace: a decoder that imported
    # modules named in payloads would both load it and create the marker file.
    module = f"jobq_canary_{uuid.uuid4().hex}"
    marker = tmp_path / "imported"
    (tmp_path / f"{module}.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('imported')\n"
        "import jobq\n"
        "class Canary(jobq.Job):\n"
        "    def handle(self): pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)

    for class_name in (f"{module}.Canary", module, f"{module}:Canary"):
        with pytest.raises(DecodeError, match=module):
            JsonCodec().decode(class_name, "{}")

    assert module not in sys.modules
    assert not marker.exists()
    assert set(sys.modules) - before == set()


@pytest.mark.parametrize(
    "payload",
    [
        "",
        "{",
        "{'single': 'quotes'}",
        '{"a": 1} trailing',
        # Deep enough to exhaust the parser's recursion: still a decode error, not a crash.
        pytest.param("[" * 100_000, id="deeply-nested"),
    ],
)
def test_invalid_json_is_a_decode_error(payload: str) -> None:
    with pytest.raises(
        DecodeError, match=re.escape(f"payload of {Keep.job_name} is not valid JSON")
    ):
        JsonCodec().decode(Keep.job_name, payload)


@pytest.mark.parametrize("payload", ["[]", '["a"]', '"text"', "3", "null", "true"])
def test_json_that_is_not_an_object_is_a_decode_error(payload: str) -> None:
    kind = type(json.loads(payload)).__name__
    with pytest.raises(DecodeError, match=f"must be a JSON object, got {kind}"):
        JsonCodec().decode(Keep.job_name, payload)


@pytest.mark.parametrize("payload", ["{}", '{"name": "x", "extra": 1}', '{"other": "x"}'])
def test_state_that_does_not_fit_the_class_is_a_decode_error(payload: str) -> None:
    with pytest.raises(DecodeError, match=re.escape(f"does not fit {Strict.job_name}")):
        JsonCodec().decode(Strict.job_name, payload)
    # The same class does decode a payload that fits, so the errors above come from the fit.
    job = JsonCodec().decode(Strict.job_name, '{"name": "x"}')
    assert isinstance(job, Strict)
    assert job.name == "x"


@pytest.mark.parametrize(
    ("bad_name", "bad_value"),
    [
        ("when", dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),
        ("tags", {"a", "b"}),
        ("blob", b"bytes"),
        ("thing", Opaque()),
        ("deep", {"ok": [1, {"bad": Opaque()}]}),
        ("ratio", float("nan")),
        ("limit", float("inf")),
        # JSON would quietly turn these keys into strings: the job would get back other state.
        ("by_id", {1: "one"}),
        ("nested_keys", [{"x": {None: 1}}]),
    ],
)
def test_attributes_that_are_not_json_are_refused_by_name(bad_name: str, bad_value: Any) -> None:
    job = Keep(fine="yes", **{bad_name: bad_value})
    with pytest.raises(TypeError) as caught:
        JsonCodec().encode(job)
    message = str(caught.value)
    assert bad_name in message
    assert "fine" not in message


def test_a_circular_state_is_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(TypeError, match="loop"):
        JsonCodec().encode(Keep(loop=loop))


def test_only_jobs_are_encoded() -> None:
    with pytest.raises(TypeError, match=r"jobq\.Job"):
        JsonCodec().encode({"not": "a job"})  # type: ignore[arg-type]


def test_job_classes_inside_functions_are_refused_at_definition() -> None:
    with pytest.raises(TypeError, match=r"<locals>.*module level"):

        class Local(jobq.Job):
            pass

    # An explicit job_name is a name a worker can find, wherever the class is defined.
    class LocalNamed(jobq.Job):
        job_name = f"codec-tests/local-{uuid.uuid4().hex}"

    assert jobq.JsonCodec().decode(LocalNamed.job_name, "{}").__class__ is LocalNamed


def test_state_missing_a_required_field_does_not_fit() -> None:
    codec = jobq.JsonCodec()
    job = codec.decode("tests.NeedsTwo", '{"first": 1, "second": 2}')
    assert isinstance(job, NeedsTwo)
    assert (job.first, job.second) == (1, 2)
    with pytest.raises(jobq.DecodeError, match=r"NeedsTwo.*missing field\(s\) second"):
        codec.decode("tests.NeedsTwo", '{"first": 1, "extra": 2}')
