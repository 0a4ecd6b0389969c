"""Helpers of the lifecycle tests (no tests here): expired memories planted in bulk."""

from __future__ import annotations

from datetime import timedelta

from memoryapp.models import MemoryEmbedding, MemoryVersion


def plant_expired(member, count: int, *, namespace: str = "bulk", days_old: int = 200) -> list[int]:
    from django.utils import timezone

    anchor = timezone.now() - timedelta(days=days_old)
    rows = MemoryVersion.objects.bulk_create(
        MemoryVersion(
            workspace_id=member.workspace_id,
            member=member,
            namespace=namespace,
            text=f"bulk note {i}",
            text_length=11,
            created_at=anchor + timedelta(seconds=i),
            valid_from=anchor,
            retention_anchor=anchor + timedelta(seconds=i),
        )
        for i in range(count)
    )
    ids = (
        [r.pk for r in rows]
        if rows and rows[0].pk
        else list(MemoryVersion.objects.filter(member=member, namespace=namespace).values_list("pk", flat=True))
    )
    MemoryEmbedding.objects.bulk_create(
        MemoryEmbedding(memory_id=pk, embedder_id="test", dim=1, vector=b"\0\0\0\0") for pk in ids
    )
    return ids
