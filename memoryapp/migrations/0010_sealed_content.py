"""Memory content becomes sealed (SPEC §8.2): the content columns hold AES-256-GCM ciphertext
(memoryapp.sealing), each version names its data key (`key_id`). Rows stored
before stay readable as plaintext until `manage.py encrypt_memories` seals them."""

from django.db import migrations

import memoryapp.sealing


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp", "0009_keyring"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="memoryembedding",
            options={"base_manager_name": "objects"},
        ),
        migrations.AlterModelOptions(
            name="memoryversion",
            options={"base_manager_name": "objects", "ordering": ["-created_at", "-id"]},
        ),
        migrations.AddField(
            model_name="memoryversion",
            name="key_id",
            field=memoryapp.sealing.RowKeyField(blank=True, editable=False, null=True, unique=True),
        ),
        memoryapp.sealing.SealColumn(
            model_name="memoryembedding",
            name="terms",
            field=memoryapp.sealing.SealedField(
                codec="text", default="", help_text="Space-separated recall tokens of the masked text, sealed."
            ),
        ),
        migrations.AlterField(
            model_name="memoryembedding",
            name="vector",
            field=memoryapp.sealing.SealedField(codec="bytes"),
        ),
        memoryapp.sealing.SealColumn(
            model_name="memoryversion",
            name="details",
            field=memoryapp.sealing.SealedField(
                blank=True, codec="text", default="", help_text="Masked, sealed; one item per line."
            ),
        ),
        memoryapp.sealing.SealColumn(
            model_name="memoryversion",
            name="kind",
            field=memoryapp.sealing.SealedField(blank=True, codec="text", default=""),
        ),
        memoryapp.sealing.SealColumn(
            model_name="memoryversion",
            name="text",
            field=memoryapp.sealing.SealedField(
                codec="text", help_text="Masked text, sealed; the original is never stored."
            ),
        ),
    ]
