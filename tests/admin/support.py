"""Fixtures shared by the admin-console tests (no tests here): the three staff roles, a browser
client per user, and memories whose text and details are known canaries."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import pytest
from django.apps import apps as django_apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from governance.admin_roles import AUDITOR, OPERATOR, sync_staff_groups
from memoryapp.assistant import add_assistant_memory
from memoryapp.models import Citation, MemoryVersion, RateLimitSlot
from tests.support import make_agent

User = get_user_model()

CANARY_TEXT = "Canary zebrafinch prefers periwinkle umbrellas"
CANARY_DETAIL = "Canary detail marmalade quokka"
CANARY_WORDS = ("zebrafinch", "periwinkle", "marmalade", "quokka")

PRODUCT_APPS = ("governance", "memoryapp", "retention", "credits")


@dataclass
class Staff:
    auditor: object
    operator: object
    superuser: object

    def all(self):
        return [("auditor", self.auditor), ("operator", self.operator), ("superuser", self.superuser)]


@pytest.fixture
def staff(db) -> Staff:
    # Idempotent: a transactional test elsewhere may have flushed the migration's rows.
    sync_staff_groups(django_apps)
    auditor = User.objects.create_user("auditor@platform.test", "auditor@platform.test", "pw-auditor-123", is_staff=True)
    auditor.groups.add(Group.objects.get(name=AUDITOR))
    operator = User.objects.create_user("operator@platform.test", "operator@platform.test", "pw-operator-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATOR))
    superuser = User.objects.create_superuser("root@platform.test", "root@platform.test", "pw-root-123")
    return Staff(auditor, operator, superuser)


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@dataclass
class Memories:
    agent_version: MemoryVersion
    assistant_version: MemoryVersion

    @property
    def texts(self) -> list[str]:
        return [self.agent_version.text, self.assistant_version.text, self.assistant_version.details]


@pytest.fixture
def memories(world) -> Memories:
    agent = make_agent(world.editor)
    response = agent.remember(namespace="prefs", key="umbrella", text=CANARY_TEXT)
    assert response.status_code in (200, 201), response.content
    agent_version = MemoryVersion.objects.get(member=world.editor, namespace="prefs", key="umbrella", valid_to__isnull=True)
    Citation.objects.create(memory=agent_version, position=0, passage_id=1, document_id=1, document_version_id=1, sha256="0" * 64)
    assistant_version, _ = add_assistant_memory(world.editor, kind="preference", topic="umbrella_colour", summary=CANARY_TEXT + " indoors", details=[CANARY_DETAIL])
    assistant_version.refresh_from_db()
    for text in (agent_version.text, assistant_version.text, assistant_version.details):
        assert any(word in text for word in CANARY_WORDS), "masking must keep the canary words"
    return Memories(agent_version, assistant_version)


def assert_no_content(body: bytes | str, memories: Memories | None = None) -> None:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    for word in CANARY_WORDS:
        assert word not in text, f"memory content leaked: {word!r}"
    if memories is not None:
        for content in memories.texts:
            assert content not in text


def product_admins():
    """(model, model admin) for every model of the product registered in the admin."""
    return [(model, model_admin) for model, model_admin in admin.site._registry.items() if model._meta.app_label in PRODUCT_APPS]


def admin_url(model, view: str, *args) -> str:
    from django.urls import reverse

    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


CONVERSATION_WORD = "wombatcarousel"


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
    document = actions.create_document(collection, title="Travel policy", text="Umbrellas are provided at reception.\n\nTaxis need approval.")
    actions.create_entity(world.workspace, name="Reception", aliases=["front desk"])
    actions.create_context_set(world.workspace, name="Travel", collections=[collection], documents=[document])
    actions.issue_personal_token(world.owner.user)
    agent = Agent.objects.create(workspace=world.workspace, name="Helpdesk")
    make_agent(world.viewer, scopes=("memory:read",))
    assert make_agent(world.editor, scopes=("memory:read",)).list().status_code == 200  # an access entry
    RateLimitSlot.objects.get_or_create(credential_id=0)  # the Redis rate limiter writes none
    spare = MemoryVersion.objects.create(workspace=world.workspace, member=world.owner, namespace="scratch", key="tmp", text="nothing personal")
    erase_memories([spare.pk], operation="forget", workspace_id=world.workspace.pk, member_id=world.owner.pk, actor_label="test")
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
    ModelPrice.objects.get_or_create(model_name="admin-test-model", defaults={"input_per_1k": Decimal("0.01"), "output_per_1k": Decimal("0.02")})
    UsageRollup.objects.create(workspace=world.workspace, day=timezone.localdate(), member_ref=world.editor.pk, role="editor", category="ai_memory", records=1)
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


def body_of(response) -> str:
    if hasattr(response, "streaming_content"):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def exported_digests(client) -> dict[int, str]:
    body = body_of(client.get(admin_url(MemoryVersion, "export_csv")))
    rows = list(csv.DictReader(io.StringIO(body)))
    assert rows and "text_hmac" in rows[0] and "text_sha256" not in rows[0]
    return {int(row["id"]): row["text_hmac"] for row in rows}
