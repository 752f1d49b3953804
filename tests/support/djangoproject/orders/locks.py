"""A unique key held by another producer's open transaction, for the tests of what an
enqueue that must wait for it raises."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

import jobq
from jobq.contrib.django import dsn

from .jobs import MakeReceipt
from .models import Order


@contextmanager
def key_held(key: str) -> Iterator[None]:
    """Inside, another connection's uncommitted job holds `key`, and Django's connection
    waits about a second at most for a lock. Not on SQLite: the project's IMMEDIATE
    transactions take the write lock at Django's BEGIN, so nothing inside atomic() waits."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET lock_timeout = '300ms'")
        else:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
    with jobq.Queue.connect(dsn()) as holder:
        if connection.vendor == "postgresql":
            holder.connection.execute("BEGIN")
        else:
            holder.connection.begin()
        job = MakeReceipt(Order.objects.create(number=1).pk)
        holder.enqueue(job, unique_key=key, connection=holder.connection)
        try:
            yield
        finally:
            holder.connection.rollback()
