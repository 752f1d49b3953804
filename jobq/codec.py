"""Codecs turn a Job into stored text and back. Decoding only ever yields registered classes."""

from __future__ import annotations

import json
from typing import Any, Protocol

from .errors import DecodeError
from .job import Job, registered

# One encoder for every job: json.dumps with options builds a new one per call.
COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class Codec(Protocol):
    def encode(self, job: Job) -> tuple[str, str]:
        """Return (class name, payload text)."""
        ...

    def decode(self, class_name: str, payload: str) -> Job: ...


class JsonCodec:
    """The default: a job's state as a JSON object.

    It never imports a module or builds anything but a registered Job subclass, so a payload
    written by someone else cannot make a worker run code it did not already have.
    """

    def encode(self, job: Job) -> tuple[str, str]:
        if not isinstance(job, Job):
            raise TypeError(f"can only enqueue jobq.Job instances, got {type(job).__name__}")
        state = job.to_state()
        if not isinstance(state, dict) or not all(isinstance(key, str) for key in state):
            raise TypeError(
                f"{job.job_name}.to_state() must return a dict with str keys, got {state!r:.200}"
            )
        try:
            payload = COMPACT.encode(state)
        except (TypeError, ValueError) as error:
            bad = [key for key, value in state.items() if not _json_ok(value)]
            raise TypeError(
                f"{job.job_name}: attribute(s) {', '.join(bad) or '?'} cannot be stored as JSON "
                f"({error}); keep job state to str, int, float, bool, None, lists and dicts"
            ) from error
        # json.dumps quietly turns {1: "a"} into {"1": "a"}: the job would get back different
        # state than it was given, so such keys are refused. (dumps has ruled out cycles.)
        bad = [key for key, value in state.items() if not _str_keys(value)]
        if bad:
            raise TypeError(
                f"{job.job_name}: attribute(s) {', '.join(bad)} hold a dict with non-str keys, "
                "which JSON would turn into strings; use str keys"
            )
        if not payload.isascii():
            try:
                payload.encode("utf-8")
            except UnicodeEncodeError:
                # A lone surrogate cannot be stored as UTF-8 text; \u escapes keep it exactly.
                payload = json.dumps(state, allow_nan=False, separators=(",", ":"))
        return job.job_name, payload

    def decode(self, class_name: str, payload: str) -> Job:
        cls = registered(class_name)
        if cls is None:
            raise DecodeError(
                f"unknown job class {class_name!r}: no such jobq.Job subclass is registered in "
                "this worker (import the module that defines it, e.g. with --app)"
            )
        try:
            state = json.loads(payload)
        except (ValueError, RecursionError) as error:
            raise DecodeError(f"payload of {class_name} is not valid JSON: {error}") from error
        if not isinstance(state, dict):
            raise DecodeError(
                f"payload of {class_name} must be a JSON object, got {type(state).__name__}"
            )
        try:
            return cls.from_state(state)
        except Exception as error:
            raise DecodeError(f"payload does not fit {class_name}: {error!r}") from error


def _str_keys(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(key, str) and _str_keys(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return all(_str_keys(item) for item in value)
    return True


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True
