"""`manage.py place_orders N`: N orders, each with its receipt job, in its own transaction."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from jobq.contrib.django import enqueue
from orders.jobs import MakeReceipt
from orders.models import Order


class Command(BaseCommand):
    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("count", type=int)

    def handle(self, *args: Any, count: int, **options: Any) -> None:
        for number in range(count):
            with transaction.atomic():
                order = Order.objects.create(number=number)
                enqueue(MakeReceipt(order.pk))
