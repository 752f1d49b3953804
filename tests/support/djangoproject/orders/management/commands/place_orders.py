"""`manage.py place_orders N`: N orders, each with its receipt job, in its own transaction."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from jobq.contrib.django import enqueue
from orders.jobs import MakeReceipt, MakeReceiptAsync, SlowReceiptAsync
from orders.models import Order


class Command(BaseCommand):
    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("count", type=int)
        parser.add_argument("--coroutines", action="store_true", help="async def receipt jobs")
        parser.add_argument(
            "--slow", type=float, help="SlowReceiptAsync jobs whose first attempt takes this long"
        )

    def handle(
        self, *args: Any, count: int, coroutines: bool, slow: float | None, **options: Any
    ) -> None:
        kind = MakeReceiptAsync if coroutines else MakeReceipt
        for number in range(count):
            with transaction.atomic():
                order = Order.objects.create(number=number)
                enqueue(kind(order.pk) if slow is None else SlowReceiptAsync(order.pk, slow))
