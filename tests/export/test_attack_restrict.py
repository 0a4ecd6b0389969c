"""Attacks on the export after it moved to `restrict()` (8d89206): an owner's export holds the
owner's own receipts, usage and credentials only (their role reads more elsewhere, never here);
assistant memories past their grace but not yet purged are withheld, not exported."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from credits.models import UsageRecord
from governance import actions as g
from governance.models import Credential
from memoryapp import assistant
from memoryapp.models import MemoryVersion
from retention.models import DeletionReceipt
from tests.export.support import exported
from tests.support import make_agent

pytestmark = pytest.mark.django_db


def _usage(member, conversation: str) -> None:
    UsageRecord.objects.create(
        workspace=member.workspace,
        member=member,
        role=member.role,
        category="reply",
        model_name="m",
        conversation_id=conversation,
        input_tokens=1,
        input_cost=Decimal("0.01"),
    )


def _forget(member, namespace: str) -> None:
    agent = make_agent(member)
    assert agent.remember(namespace=namespace, key="k", text=f"note of {namespace}").status_code == 201
    assert agent.forget(namespace=namespace, key="k").status_code == 200


def test_an_owners_export_holds_only_the_owners_receipts_usage_and_credentials(world):
    for member, name in ((world.owner, "own"), (world.editor, "editors"), (world.outsider, "outsiders")):
        _forget(member, f"ns_{name}")
        _usage(member, f"conv-{name}")
        g.create_credential(member, name=f"cred-{name}", scopes=["memory:read"])
    # the owner's role reads both receipts of the workspace (restrict "view"); their export holds their own
    assert DeletionReceipt.objects.restrict(world.owner, "view").count() == 2
    document = exported(world.owner)
    text = json.dumps(document)
    assert "editors" not in text and "outsiders" not in text
    own_receipts = set(DeletionReceipt.objects.filter(member_ref=world.owner.pk).values_list("pk", flat=True))
    assert {int(r["id"]) for r in document["receipts"]} == own_receipts
    assert [u["conversationId"] for u in document["usageRecords"]] == ["conv-own"]
    own_credentials = set(Credential.objects.filter(member=world.owner).values_list("pk", flat=True))
    assert {int(c["id"]) for c in document["credentials"]} == own_credentials
    assert {c["name"] for c in document["credentials"]} >= {"cred-own"}


def test_a_members_export_holds_none_of_the_owners_rows_either(world):
    _forget(world.owner, "ns_owner")
    _usage(world.owner, "conv-owner")
    g.create_credential(world.owner, name="cred-owner", scopes=["memory:read"])
    document = exported(world.viewer)
    assert document["receipts"] == [] and document["usageRecords"] == [] and document["credentials"] == []
    assert "owner" not in json.dumps(document["accessLog"])


def test_an_assistant_memory_past_its_grace_not_yet_purged_is_withheld_not_exported(world):
    within, _ = assistant.add_assistant_memory(world.editor, kind="fact", topic="within_grace", summary="Still kept")
    past, _ = assistant.add_assistant_memory(world.editor, kind="fact", topic="past_grace", summary="Purge me soon")
    now = timezone.now()
    MemoryVersion.objects.filter(pk=within.pk).update(retention_anchor=now - timedelta(days=119))  # 90 + 30 > 119
    MemoryVersion.objects.filter(pk=past.pk).update(retention_anchor=now - timedelta(days=121))
    document = exported(world.editor)
    assert {m["key"]: m["state"] for m in document["assistantMemories"]} == {"within_grace": "expired"}
    assert "Purge me soon" not in json.dumps(document)
    assert document["withheld"]["pendingErasureOrExpired"] == 1


def test_another_members_kept_memories_never_reach_an_export(world):
    assistant.add_assistant_memory(world.editor, kind="fact", topic="editors_topic", summary="Editor only")
    version, _ = assistant.add_assistant_memory(world.editor, kind="fact", topic="editors_old", summary="Editor old")
    MemoryVersion.objects.filter(pk=version.pk).update(retention_anchor=timezone.now() - timedelta(days=100))
    for member in (world.owner, world.viewer, world.outsider):
        document = exported(member)
        assert "Editor" not in json.dumps(document) and document["assistantMemories"] == []
        assert document["withheld"]["pendingErasureOrExpired"] == 0
