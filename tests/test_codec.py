"""Job state through the codec: what round-trips, what is refused, and what is never imported."""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jobq
from jobq import DecodeError, JsonCodec, Status

# The jobs below record what they ran with in this list (the test process runs them).
RAN: list[dict[str, Any]] = []


class Keep(jobq.Job):
    type = "codec"

    def __init__(self, **state: Any) -> None:
        self.__dict__.update(state)

    def handle(self) -> None:
        RAN.append(dict(vars(self)))


class Strict(jobq.Job):
    """A class whose from_state insists on exactly the fields its __init__ takes."""

    type = "codec"

    def __init__(self, name: str) -> None:
        self.name = name

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> jobq.Job:
        return cls(**state)

    def handle(self) -> None:
        RAN.append({"name": self.name})


class Named(jobq.Job):
    job_name = "codec-tests/named"

    def handle(self) -> None:
        pass


RICH_STATE: dict[str, Any] = {
    "text": "plain",
    "unicode": "héllo wörld — ünïcödé, 日本語, emoji 🎉",
    "quotes": 'a "quoted" \\ backslash\nnewline\ttab',
    "nul": "before\x00after",
    "lone_surrogate": "\ud800",
    "empty": "",
    "zero": 0,
    "negative": -42,
    "big": 2**70,
    "float": 0.1,
    "tiny": 5e-324,
    "huge": 1.7976931348623157e308,
    "negative_zero": -0.0,
    "true": True,
    "false": False,
    "none": None,
    "list": [1, "two", 3.0, None, [False]],
    "nested": {"a": {"b": {"c": [1, 2, {"d": "e"}]}}, "": "empty key"},
}


@pytest.fixture(autouse=True)
def forget_runs() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


@pytest.fixture
def queue(dsn: str) -> Iterator[jobq.Queue]:
    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        yield queue


def same(a: Any, b: Any) -> bool:
    """Equality that also tells 0.0 from -0.0 and True from 1, which == does not."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) and type(a) is type(b)


@pytest.mark.databases("sqlite")
def test_state_round_trips_through_the_queue(queue: jobq.Queue) -> None:
    job_id = queue.enqueue(Keep(**RICH_STATE))

    record = queue.get(job_id)
    assert record is not None
    assert record.class_name == Keep.job_name == f"{__name__}.Keep"
    decoded = JsonCodec().decode(record.class_name, record.payload)
    assert type(decoded) is Keep
    assert vars(decoded) == RICH_STATE
    assert all(same(vars(decoded)[key], value) for key, value in RICH_STATE.items())

    claim = queue.claim()
    assert claim is not None
    assert (claim.class_name, claim.payload) == (record.class_name, record.payload)
    queue.run(claim)
    assert RAN == [RICH_STATE]
    after = queue.get(job_id)
    assert after is not None and after.status is Status.COMPLETED


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    # Lone surrogates included: they are valid in Python strings and JSON, but not in UTF-8.
    | st.text(st.characters(codec=None)),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
attribute_names = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)


@settings(max_examples=200, deadline=None, database=None)
@given(state=st.dictionaries(attribute_names, json_values, max_size=6))
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


# -- what decoding refuses -----------------------------------------------------------------


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
    assert isinstance(job, Strict) and job.name == "x"


# -- what encoding refuses -----------------------------------------------------------------


class Opaque:
    pass


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


@pytest.mark.databases("sqlite")
def test_refused_state_stores_nothing(queue: jobq.Queue) -> None:
    with pytest.raises(TypeError, match="when"):
        queue.enqueue(Keep(when=dt.date(2024, 1, 1)))
    assert queue.counts() == {}


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


# -- pluggable codecs ----------------------------------------------------------------------


class Base64Codec:
    """Stores state as base64 of JSON, under a name of its own, and counts its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def encode(self, job: jobq.Job) -> tuple[str, str]:
        self.calls.append("encode")
        text = json.dumps(job.to_state()).encode()
        return "b64:" + job.job_name, base64.b64encode(text).decode()

    def decode(self, class_name: str, payload: str) -> jobq.Job:
        self.calls.append("decode")
        return JsonCodec().decode(
            class_name.removeprefix("b64:"), base64.b64decode(payload).decode()
        )


@pytest.mark.databases("sqlite")
def test_a_custom_codec_is_used_both_ways(dsn: str) -> None:
    codec = Base64Codec()
    with jobq.Queue.connect(dsn, codec=codec) as queue:
        queue.install()
        job_id = queue.enqueue(Keep(word="bonjour", n=3))
        assert codec.calls == ["encode"]

        record = queue.get(job_id)
        assert record is not None
        assert record.class_name == "b64:" + Keep.job_name
        assert json.loads(base64.b64decode(record.payload)) == {"word": "bonjour", "n": 3}

        assert queue.process_jobs(5) == 1
        assert codec.calls == ["encode", "decode"]
        assert RAN == [{"word": "bonjour", "n": 3}]
        done = queue.get(job_id)
        assert done is not None and done.status is Status.COMPLETED


# -- undecodable jobs in a running queue (every database) ---------------------------------


class UnknownClassCodec(JsonCodec):
    """Writes rows naming a class that no worker has, as another application might."""

    def encode(self, job: jobq.Job) -> tuple[str, str]:
        return "no.such.Class", "{}"


@pytest.mark.parametrize(
    ("max_attempts", "status"), [(3, Status.PENDING), (1, Status.FAILED)], ids=["retry", "last"]
)
def test_an_unknown_class_fails_the_attempt(
    dsn: str, queue: jobq.Queue, max_attempts: int, status: Status
) -> None:
    with jobq.Queue.connect(dsn, codec=UnknownClassCodec()) as producer:
        job_id = producer.enqueue(Keep(), retry=jobq.RetryPolicy(max_attempts, backoff=3600))
    good_id = queue.enqueue(Keep(fine=True))

    # The bad job fails its attempt without stopping the worker: the good one still runs.
    assert queue.process_jobs(10) == 2
    record = queue.get(job_id)
    assert record is not None
    assert (record.status, record.attempts) == (status, 1)
    assert record.last_error is not None
    assert "DecodeError" in record.last_error
    assert "'no.such.Class'" in record.last_error
    assert record.lease_until is None
    good = queue.get(good_id)
    assert good is not None and good.status is Status.COMPLETED
    assert RAN == [{"fine": True}]


@pytest.mark.databases("sqlite")
def test_a_payload_that_does_not_fit_fails_the_attempt(dsn: str, queue: jobq.Queue) -> None:
    class MisfitCodec(JsonCodec):
        def encode(self, job: jobq.Job) -> tuple[str, str]:
            return Strict.job_name, '{"unexpected": 1}'

    with jobq.Queue.connect(dsn, codec=MisfitCodec()) as producer:
        job_id = producer.enqueue(Strict("x"), retry=jobq.RetryPolicy(max_attempts=1))

    assert queue.process_jobs(1) == 1
    record = queue.get(job_id)
    assert record is not None and record.status is Status.FAILED
    assert record.last_error is not None
    assert f"does not fit {Strict.job_name}" in record.last_error
    assert RAN == []


class NeedsTwo(jobq.Job):
    job_name = "tests.NeedsTwo"

    def __init__(self, first: int, second: int, third: int = 3) -> None:
        self.first, self.second, self.third = first, second, third


def test_state_missing_a_required_field_does_not_fit() -> None:
    codec = jobq.JsonCodec()
    job = codec.decode("tests.NeedsTwo", '{"first": 1, "second": 2}')
    assert isinstance(job, NeedsTwo) and (job.first, job.second) == (1, 2)
    with pytest.raises(jobq.DecodeError, match=r"NeedsTwo.*missing field\(s\) second"):
        codec.decode("tests.NeedsTwo", '{"first": 1, "extra": 2}')


@pytest.mark.databases("sqlite")
def test_a_payload_over_the_limit_is_refused_at_enqueue(dsn: str) -> None:
    from jobq.queue import MAX_PAYLOAD_BYTES

    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        with pytest.raises(ValueError, match="over jobq's limit of 8 MiB"):
            queue.enqueue(NeedsTwo("x" * MAX_PAYLOAD_BYTES, 2))
        assert queue.counts() == {}
        queue.enqueue(NeedsTwo("x" * (MAX_PAYLOAD_BYTES - 100), 2))
        assert queue.counts() == {"pending": 1}
