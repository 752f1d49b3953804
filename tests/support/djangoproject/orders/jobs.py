"""The orders app's jobs, found by jobq.contrib.django's autodiscovery."""

from __future__ import annotations

import os
import time

from asgiref.sync import sync_to_async
from django.db.models import F, TextField, Value
from django.db.models.functions import Concat

import jobq

from .models import Order


class MakeReceipt(jobq.Job):
    type = "receipts"

    def __init__(self, order_id: int) -> None:
        self.order_id = order_id

    def handle(self) -> None:
        order = Order.objects.get(pk=self.order_id)
        if order.pk != self.order_id:
            raise AssertionError(f"asked for order {self.order_id}, read {order.pk}")
        order.receipt = f"receipt for order {order.pk} number {order.number} by {os.getpid()}"
        order.save(update_fields=["receipt"])


class MakeReceiptAsync(MakeReceipt):
    """MakeReceipt as a coroutine job (a worker with --concurrency runs it on its event
    loop), reaching the ORM through sync_to_async as async Django code does."""

    async def handle(self) -> None:  # type: ignore[override]
        await sync_to_async(MakeReceipt.handle)(self)


class SlowReceiptAsync(MakeReceipt):
    """A coroutine job whose first attempt's ORM work, through sync_to_async, takes `seconds`:
    each attempt appends what it does to the order's receipt, so a test can tell whether the
    first attempt wrote anything after its retry began."""

    def __init__(self, order_id: int, seconds: float) -> None:
        super().__init__(order_id)
        self.seconds = seconds

    async def handle(self) -> None:  # type: ignore[override]
        claim = jobq.current_claim()
        assert claim is not None
        await sync_to_async(self.write)(f"{claim.attempt}:began")
        if claim.attempt == 1:
            await sync_to_async(self.slow)(f"{claim.attempt}:late")
        await sync_to_async(self.write)(f"{claim.attempt}:ended")

    def write(self, what: str) -> None:
        receipt = Concat(F("receipt"), Value(f"{what};"), output_field=TextField())
        Order.objects.filter(pk=self.order_id).update(receipt=receipt)

    def slow(self, what: str) -> None:
        time.sleep(self.seconds)
        self.write(what)
