"""The admin shows a keyed digest of a memory's text instead of its plain SHA-256 (issue 22 row 2,
SPEC §8.2): `text_hmac` is computed for every stored version under the key derived for its
workspace and member, then `text_sha256` is dropped, so no row, export or backup taken afterwards
holds a plain hash that would confirm a guessed text offline."""

from django.db import migrations, models

from governance.content import member_digest

BATCH = 2000


def fill_keyed_digests(apps, schema_editor):
    MemoryVersion = apps.get_model("memoryapp", "MemoryVersion")
    last = 0
    while True:
        batch = list(
            MemoryVersion.objects.filter(pk__gt=last)
            .order_by("pk")
            .only("pk", "workspace_id", "member_id", "text")[:BATCH]
        )
        if not batch:
            return
        for version in batch:
            version.text_hmac = member_digest(
                version.text, workspace_id=version.workspace_id, member_id=version.member_id
            )
        MemoryVersion.objects.bulk_update(batch, ["text_hmac"])
        last = batch[-1].pk


class Migration(migrations.Migration):
    dependencies = [("memoryapp", "0006_access_log")]

    operations = [
        migrations.AddField(
            model_name="memoryversion",
            name="text_hmac",
            field=models.CharField(default="", editable=False, max_length=64),
        ),
        migrations.RunPython(fill_keyed_digests, migrations.RunPython.noop, elidable=True),
        migrations.RemoveField(model_name="memoryversion", name="text_sha256"),
    ]
