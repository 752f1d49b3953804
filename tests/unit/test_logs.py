"""jobq's log output: one filter keeps a DSN's password out of every line, and the
supervisor's handler never waits for a stalled reader."""

from __future__ import annotations

import contextlib
import logging
import os

import pytest

from jobq import logs

DSN = "postgresql://app:s3cret@db.internal/app"


@pytest.mark.parametrize("format", logs.FORMATS)
def test_no_log_line_carries_the_dsn_password(
    capsys: pytest.CaptureFixture[str], format: str
) -> None:
    # Configured here, not in a fixture: the handler keeps the stderr of its configuration,
    # and pytest captures each phase of a test on a stream of its own.
    logs.configure("INFO", format, dsn=DSN)
    log = logging.getLogger("jobq.worker")
    try:
        log.error("Worker cannot start: %s", f'connection to "{DSN}" failed')
        try:
            raise RuntimeError(f"invalid password in {DSN}")
        except RuntimeError:
            log.exception("Worker crashed")
    finally:
        logging.getLogger("jobq").handlers.clear()

    err = capsys.readouterr().err
    assert "Worker cannot start" in err
    assert "Worker crashed" in err
    assert "RuntimeError: invalid password in postgresql://app:***@db.internal/app" in err
    assert "s3cret" not in err


def record(message: str) -> logging.LogRecord:
    return logging.makeLogRecord({"name": "jobq", "levelname": "ERROR", "msg": message})


def test_a_stalled_reader_never_blocks_the_log_and_what_is_dropped_is_counted() -> None:
    """A pipe nobody reads: writes keep returning, lines past the backlog are dropped, the
    pipe's own description stays blocking (job code shares it), and once the reader is back
    the backlog arrives whole, then a line counting the dropped ones."""
    read_end, write_end = os.pipe()
    try:
        handler = logs.NonBlockingStderr(write_end)
        handler.setFormatter(logging.Formatter("%(message)s"))
        line = "x" * 1000
        for _ in range(200):  # about three times pipe plus backlog
            handler.handle(record(line))
        assert handler.dropped > 0
        assert os.get_blocking(write_end), "O_NONBLOCK leaked into the shared description"
        taken = b""
        os.set_blocking(read_end, False)
        for _ in range(1000):  # bounded: each pass reads what the last one wrote
            if b"dropped" in taken:
                break
            with contextlib.suppress(BlockingIOError):
                taken += os.read(read_end, 1 << 16)
            handler.handle(record("after"))
        assert b"log lines were dropped" in taken
        lines = taken.decode().splitlines()
        assert all(each in (line, "after") or "log lines were dropped" in each for each in lines)
        assert handler.dropped == 0
        os.close(handler.fd)
    finally:
        os.close(read_end)
        os.close(write_end)
