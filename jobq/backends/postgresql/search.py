"""PostgreSQL's way to read a payload's field for a search (see search.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..search import Search


class PostgresSearch(Search):
    # A payload another codec wrote may be no JSON, and a failed cast would abort the
    # statement: only an object's text is cast, which the default codec always writes.
    sql_payload_field = (
        "CASE WHEN left(payload, 1) = '{{' THEN payload::jsonb #>> {path}::text[] END"
    )

    def payload_path(self, keys: Sequence[str]) -> Any:
        return list(keys)
