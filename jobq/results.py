"""A job's result and checkpoint as stored, and the bounds that keep them small; the class
path of a failed attempt's exception (its traceback is the row's last_error, as ever).

Results are encoded by the queue's codec when it implements ResultCodec; with any other
codec (JsonCodec included) they are compact JSON, as checkpoints always are.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from .codec import COMPACT
from .errors import JobqError

# A result or checkpoint, encoded, is at most this many bytes of UTF-8: it lives on the job's
# row, which every list of jobs reads, and a batch acknowledges up to ten in one statement.
# Larger values belong in the application's own storage, with a reference returned.
RESULT_LIMIT = 64 * 1024
CHECKPOINT_LIMIT = 64 * 1024


class ResultError(JobqError, ValueError):
    """A result or checkpoint that cannot be stored: it fails the attempt (a result) or the
    call (a checkpoint), and nothing of it is stored."""


@runtime_checkable
class ResultCodec(Protocol):
    """What a codec implements to encode results its own way."""

    def encode_result(self, value: Any) -> str: ...

    def decode_result(self, text: str) -> Any: ...


class JsonValues:
    """Results as compact JSON: the encoding of every codec without its own."""

    def encode_result(self, value: Any) -> str:
        return to_json(value, "the result")

    def decode_result(self, text: str) -> Any:
        return json.loads(text)


JSON_VALUES = JsonValues()


def to_json(value: Any, what: str) -> str:
    try:
        text = COMPACT.encode(value)
    except (TypeError, ValueError, RecursionError) as error:
        raise ResultError(
            f"{what} cannot be stored as JSON ({error}); use str, int, float, bool, None, "
            "lists and dicts with str keys"
        ) from None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate cannot be stored as UTF-8 text; \u escapes keep it exactly.
        return json.dumps(value, allow_nan=False, separators=(",", ":"))
    return text


def bounded(text: str, limit: int, what: str) -> str:
    size = len(text.encode("utf-8", "surrogatepass"))  # a custom codec's text may hold one
    if size > limit:
        raise ResultError(
            f"{what} is {size} bytes encoded, over the limit of {limit}; store large values "
            "in your own storage and keep a reference here"
        )
    return text


def encode_result(codec: object, value: Any) -> str | None:
    """The stored text of what handle() returned (None stores nothing), by the job's codec
    when it encodes results; ResultError when it cannot be encoded or is too large."""
    return None if value is None else encoded(codec, value, "the result")


def encode_step(codec: object, value: Any, name: str) -> str:
    """A step's value as recorded (None included: a step that returned None is done), by
    the job's codec when it encodes results, under the bound of a result."""
    return encoded(codec, value, f"the value of step {name!r}")


def encoded(codec: object, value: Any, what: str) -> str:
    values = codec if isinstance(codec, ResultCodec) else JSON_VALUES
    try:
        text = values.encode_result(value)
    except ResultError:
        raise
    except Exception as error:
        raise ResultError(f"{what} cannot be encoded: {error!r}") from None
    return bounded(text, RESULT_LIMIT, what)


def decode_result(codec: object, text: str | None) -> Any:
    if text is None:
        return None
    values = codec if isinstance(codec, ResultCodec) else JSON_VALUES
    return values.decode_result(text)


def encode_checkpoint(state: Any) -> str:
    return bounded(to_json(state, "the checkpoint"), CHECKPOINT_LIMIT, "the checkpoint")


def error_class(error: BaseException | str) -> str | None:
    """A failed attempt's exception class, as a path ("builtins.ValueError"); None for a
    failure that was no exception (a lease that ran out, a worker that died)."""
    if isinstance(error, str):
        return None
    kind = type(error)
    return f"{kind.__module__}.{kind.__qualname__}"
