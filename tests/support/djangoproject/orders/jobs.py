"""The orders app's jobs, found by jobq.contrib.django's autodiscovery."""

from __future__ import annotations

import os

from asgiref.sync import sync_to_async

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
