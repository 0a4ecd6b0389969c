"""The cap (SPEC §2 row 12, §4.7): 5,000 stored versions per member, of every source, at its real value."""

from __future__ import annotations

import pytest
from django.utils import timezone

from governance.models import Member
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion
from tests.support import error_code, make_agent

pytestmark = pytest.mark.django_db


def _plant_versions(member: Member, count: int) -> None:
    """Stored versions of every kind: agent and assistant, current and superseded."""
    now = timezone.now()
    rows = []
    for i in range(count):
        assistant = i % 5 == 0
        rows.append(
            MemoryVersion(
                workspace=member.workspace,
                member=member,
                namespace=ASSISTANT_NAMESPACE if assistant else "bulk",
                key=f"k{i // 2}" if not assistant else f"topic_{i}",
                version=1 + i % 2 if not assistant else 1,
                valid_to=now if (not assistant and i % 2 == 0) else None,
                source="manual" if assistant else "agent",
                text=f"planted {i}",
                text_length=9,
            )
        )
    MemoryVersion.objects.bulk_create(rows, batch_size=1000)


def test_the_cap_is_5000_stored_versions_of_every_source(world):
    from django.conf import settings

    assert settings.MAX_VERSIONS_PER_MEMBER == 5000
    _plant_versions(world.editor, 4999)
    agent = make_agent(world.editor)
    assert agent.remember(namespace="n", text="the 5,000th").status_code == 201
    full = agent.remember(namespace="n", text="one too many")
    assert full.status_code == 409 and error_code(full) == "AGENT_MEMORY_FULL"
    assert MemoryVersion.objects.filter(member=world.editor).count() == 5000
    assert make_agent(world.viewer, scopes=("memory:read",)).list().status_code == 200  # another member is not affected
