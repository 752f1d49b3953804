"""Job state through the codec: what round-trips, what is refused, and what is never imported."""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest

import jobq
from jobq import JsonCodec, Status
from tests.support.codec_jobs import RAN, Keep, Strict

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


def same(a: Any, b: Any) -> bool:
    """Equality that also tells 0.0 from -0.0 and True from 1, which == does not."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) and type(a) is type(b)


@pytest.mark.databases("sqlite")
def test_state_round_trips_through_the_queue(queue: jobq.Queue) -> None:
    job_id = queue.enqueue(Keep(**RICH_STATE))

    record = queue.get(job_id)
    assert record is not None
    assert record.class_name == Keep.job_name == "tests.support.codec_jobs.Keep"
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


# -- what decoding refuses -----------------------------------------------------------------


# -- what encoding refuses -----------------------------------------------------------------


@pytest.mark.databases("sqlite")
def test_refused_state_stores_nothing(queue: jobq.Queue) -> None:
    with pytest.raises(TypeError, match="when"):
        queue.enqueue(Keep(when=dt.date(2024, 1, 1)))
    assert queue.counts() == {}


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


@pytest.mark.databases("sqlite")
def test_a_payload_over_the_limit_is_refused_at_enqueue(dsn: str) -> None:
    from jobq.queue.new_jobs import MAX_PAYLOAD_BYTES

    with jobq.Queue.connect(dsn) as queue:
        queue.install()
        with pytest.raises(ValueError, match="over jobq's limit of 8 MiB"):
            queue.enqueue(Keep(padding="x" * MAX_PAYLOAD_BYTES))
        assert queue.counts() == {}
        queue.enqueue(Keep(padding="x" * (MAX_PAYLOAD_BYTES - 100)))
        assert queue.counts() == {"pending": 1}
