"""`kind` becomes a closed vocabulary (SPEC §4.1). Kinds stored before were free text as sent, so
they may hold personal data ("ada@example.com 054-123-4567"): any stored kind outside the
vocabulary is cleared, on every version."""

from django.db import migrations

MEMORY_KINDS = ("preference", "fact", "instruction")  # frozen copy: migrations do not import app code


def clear_unknown_kinds(apps, schema_editor):
    MemoryVersion = apps.get_model("memoryapp", "MemoryVersion")
    MemoryVersion.objects.exclude(kind__in=MEMORY_KINDS).exclude(kind="").update(kind="")


class Migration(migrations.Migration):
    dependencies = [("memoryapp", "0002_recall_terms")]

    operations = [migrations.RunPython(clear_unknown_kinds, migrations.RunPython.noop)]
