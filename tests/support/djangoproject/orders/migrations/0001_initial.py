from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    operations = [  # noqa: RUF012 - Django's own declaration style
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.AutoField(primary_key=True, serialize=False)),
                ("number", models.IntegerField()),
                ("receipt", models.TextField(blank=True, default="")),
            ],
        ),
    ]
