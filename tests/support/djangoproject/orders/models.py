from __future__ import annotations

from django.db import models


class Order(models.Model):
    number = models.IntegerField()
    receipt = models.TextField(blank=True, default="")
