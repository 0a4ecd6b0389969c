"""When each key-encryption key was made and destroyed, and the rotation lease (issue 33). Like
DataKey, the router creates these tables in the `keyring` database only."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp", "0012_access_surface_labels"),
    ]

    operations = [
        migrations.CreateModel(
            name="KekRecord",
            fields=[
                ("kek_id", models.CharField(max_length=16, primary_key=True, serialize=False)),
                (
                    "created_at",
                    models.DateTimeField(
                        help_text="When a rotation made it (or when first seen, for a KEK made before records existed)."
                    ),
                ),
                (
                    "destroyed_at",
                    models.DateTimeField(
                        blank=True,
                        help_text="When a rotation destroyed it: from then on nothing it wrapped can be unwrapped.",
                        null=True,
                    ),
                ),
                ("origin", models.CharField(blank=True, default="", max_length=200)),
            ],
        ),
        migrations.CreateModel(
            name="KekRotationLease",
            fields=[
                ("name", models.CharField(max_length=40, primary_key=True, serialize=False)),
                ("holder", models.CharField(blank=True, default="", max_length=120)),
                ("until", models.DateTimeField(blank=True, null=True)),
            ],
        ),
    ]
