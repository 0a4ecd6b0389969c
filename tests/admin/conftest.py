"""Fixtures of the admin-console tests: memories whose text and details are known canaries
(`memories`), and at least one row of every model the admin shows (`everything`). The platform
staff (`staff`) is in tests/conftest.py: other areas' tests sign in as staff too."""

from __future__ import annotations

import pytest

from memoryapp.assistant import add_assistant_memory
from memoryapp.models import Citation, MemoryVersion, RateLimitSlot
from tests.admin.support import CANARY_DETAIL, CANARY_TEXT, CANARY_WORDS, CONVERSATION_WORD, Memories
from tests.support import make_agent


@pytest.fixture
def memories(world) -> Memories:
    agent = make_agent(world.editor)
    response = agent.remember(namespace="prefs", key="umbrella", text=CANARY_TEXT)
    assert response.status_code in (200, 201), response.content
    agent_version = MemoryVersion.objects.get(
        member=world.editor, namespace="prefs", key="umbrella", valid_to__isnull=True
    )
    Citation.objects.create(
        memory=agent_version, position=0, passage_id=1, document_id=1, document_version_id=1, sha256="0" * 64
    )
    assistant_version, _ = add_assistant_memory(
        world.editor,
        kind="preference",
        topic="umbrella_colour",
        summary=CANARY_TEXT + " indoors",
        details=[CANARY_DETAIL],
    )
    assistant_version.refresh_from_db()
    for text in (agent_version.text, assistant_version.text, assistant_version.details):
        assert any(word in text for word in CANARY_WORDS), "masking must keep the canary words"
    return Memories(agent_version, assistant_version)


@pytest.fixture
def everything(world, memories):
    """At least one row of every model the admin shows, so every change page can be opened."""
    from decimal import Decimal

    from django.utils import timezone

    from credits import charging, quotas
    from credits.models import Consolidation, ModelPrice, UsageRecord, UsageRollup
    from governance import actions
    from governance.models import Agent
    from retention.erasure import erase_memories

    collection = actions.create_collection(world.workspace, name="Handbook")
    document = actions.create_document(
        collection, title="Travel policy", text="Umbrellas are provided at reception.\n\nTaxis need approval."
    )
    actions.create_entity(world.workspace, name="Reception", aliases=["front desk"])
    actions.create_context_set(world.workspace, name="Travel", collections=[collection], documents=[document])
    actions.issue_personal_token(world.owner.user)
    agent = Agent.objects.create(workspace=world.workspace, name="Helpdesk")
    make_agent(world.viewer, scopes=("memory:read",))
    assert make_agent(world.editor, scopes=("memory:read",)).list().status_code == 200  # an access entry
    RateLimitSlot.objects.get_or_create(credential_id=0)  # the Redis rate limiter writes none
    spare = MemoryVersion.objects.create(
        workspace=world.workspace, member=world.owner, namespace="scratch", key="tmp", text="nothing personal"
    )
    erase_memories(
        [spare.pk], operation="forget", workspace_id=world.workspace.pk, member_id=world.owner.pk, actor_label="test"
    )
    record = UsageRecord.objects.create(
        workspace=world.workspace,
        member=world.editor,
        role="editor",
        category="ai_memory",
        model_name="offline-rules-v1",
        input_tokens=100,
        output_tokens=20,
        input_cost=Decimal("0.5"),
        output_cost=Decimal("0.25"),
    )
    charging.grant_credits(world.workspace, Decimal("100"), note="welcome")
    quotas.set_member_quota(world.editor, limit=Decimal("10"), period="month", actor=world.owner.user)
    quotas.set_role_quota(world.workspace, "editor", limit=Decimal("50"), period="month", actor=world.owner.user)
    ModelPrice.objects.get_or_create(
        model_name="admin-test-model", defaults={"input_per_1k": Decimal("0.01"), "output_per_1k": Decimal("0.02")}
    )
    UsageRollup.objects.create(
        workspace=world.workspace,
        day=timezone.localdate(),
        member_ref=world.editor.pk,
        role="editor",
        category="ai_memory",
        records=1,
    )
    Consolidation.objects.create(
        workspace=world.workspace,
        member=world.editor,
        agent=agent,
        conversation_id="conv-1",
        messages=[{"role": "user", "content": f"My favourite ride is the {CONVERSATION_WORD}"}],
        message_count=1,
        usage_record=record,
    )
    return world
