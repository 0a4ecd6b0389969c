"""The key store's one model (SPEC §8.2). The router (memoryapp.routers) creates its table in the
`keyring` database only: on the data's database this migration is recorded and creates nothing."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp", "0008_rename_remember_hit_rate_limit_slot"),
    ]

    operations = [
        migrations.CreateModel(
            name="DataKey",
            fields=[
                (
                    "key_id",
                    models.UUIDField(
                        help_text="The `key_id` of the row (memory version, consolidation) it encrypts.",
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                (
                    "owner",
                    models.CharField(
                        help_text="The model whose row it encrypts (memoryapp.memoryversion, retention.consolidation).",
                        max_length=40,
                    ),
                ),
                (
                    "wrapped_by",
                    models.CharField(help_text="Id of the key-encryption key that wrapped it.", max_length=16),
                ),
                ("wrapped", models.BinaryField()),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "indexes": [
                    models.Index(fields=["owner", "created_at"], name="datakey_sweep"),
                    models.Index(fields=["wrapped_by"], name="datakey_rewrap"),
                ],
            },
        ),
    ]
