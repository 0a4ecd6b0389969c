"""Rules live in actions, not in the views that call them (issue 23 step 3, Zulip's `do_*`).

Each rule that used to sit in a view, a page or a command is called here directly, the way the
next interface would call it, and tried the way an attacker would: a reader id of another
workspace, a removed member, a turn whose recording fails, an owner reading a member's receipt.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import ApiError
from credits import charging, pricing, usage
from credits.models import ModelPrice
from governance import actions as governance
from governance.models import AuditEvent, Collection
from memoryapp import actions as memory_actions
from memoryapp import consolidation, gates
from memoryapp.models import MemoryVersion
from memoryapp.ratelimit import get_limiter
from retention import lifecycle, previews, receipt_access
from tests.support import make_agent


# --- the reader check lives in create_collection ---------------------------------------------------
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)  # nothing is created on refusal
@given(
    strangers=st.lists(st.sampled_from(["outsider", "removed", "unknown"]), min_size=1, max_size=3),
    friends=st.lists(st.sampled_from(["owner", "viewer"]), max_size=2),
)
def test_create_collection_refuses_any_reader_who_is_not_an_active_member_here(removed_world, strangers, friends):
    world, removed = removed_world
    ids = {
        "outsider": world.outsider.pk,
        "removed": removed.pk,
        "unknown": 10**9,
        "owner": world.owner.pk,
        "viewer": world.viewer.pk,
    }
    before = Collection.objects.count()
    with pytest.raises(ApiError) as refused:
        governance.create_collection(
            world.workspace,
            name="Board",
            restricted=True,
            reader_ids=[ids[n] for n in strangers + friends],
            creator=world.editor,
        )
    assert refused.value.status == 400 and "memberIds" in refused.value.details["fields"]
    assert Collection.objects.count() == before


@pytest.fixture
def removed_world(world, django_user_model):
    removed = governance.add_member(world.workspace, "gone@acme.test", role="viewer", password="pw-gone-1234")
    governance.remove_member(removed, actor=world.owner.user)
    return world, removed


def test_create_collection_adds_the_named_readers_and_keeps_the_creator_reading(world):
    collection = governance.create_collection(
        world.workspace,
        name="Board",
        restricted=True,
        reader_ids=[world.viewer.pk, world.viewer.pk],
        creator=world.editor,
    )
    assert set(collection.readers.all()) == {world.viewer, world.editor}


# --- the readability checks live in the knowledge actions ------------------------------------------
@pytest.fixture
def closed_world(world):
    """A restricted collection only the owner reads, with a document, and an expired document in
    an open collection: neither is readable by the editor."""
    from datetime import timedelta

    from django.utils import timezone

    board = governance.create_collection(world.workspace, name="Board", restricted=True, creator=world.owner)
    open_collection = governance.create_collection(world.workspace, name="Open")
    minutes = governance.create_document(board, title="Minutes", text="secret")
    expired = governance.create_document(
        open_collection, title="Old", text="gone", expires_at=timezone.now() - timedelta(seconds=1)
    )
    foreign = governance.create_collection(world.other_workspace, name="Foreign")
    return world, board, open_collection, minutes, expired, foreign


def test_create_document_refuses_a_collection_the_member_cannot_read(closed_world):
    from governance.models import Document

    world, board, open_collection, _, _, foreign = closed_world
    before = Document.objects.count()
    for refused_call in (
        lambda: governance.create_document(board, title="T", text="x", by=world.editor),
        lambda: governance.create_document(collection_id=board.pk, title="T", text="x", by=world.editor),
        lambda: governance.create_document(collection_id=foreign.pk, title="T", text="x", by=world.editor),
        lambda: governance.create_document(collection_id=10**9, title="T", text="x", by=world.editor),
    ):
        with pytest.raises(ApiError) as refused:
            refused_call()
        assert (refused.value.status, refused.value.code, refused.value.details) == (
            400,
            "VALIDATION_ERROR",
            {"fields": {"collectionId": ["No such collection."]}},
        )
    assert Document.objects.count() == before
    assert governance.create_document(collection_id=board.pk, title="T", text="x", by=world.owner).collection == board
    assert (
        governance.create_document(collection_id=open_collection.pk, title="T", text="x", by=world.editor).collection
        == open_collection
    )


def test_delete_collection_refuses_one_the_member_cannot_read_as_not_found(closed_world):
    world, board, open_collection, _, _, foreign = closed_world
    for collection, collection_id in ((board, None), (None, board.pk), (None, foreign.pk), (None, 10**9)):
        with pytest.raises(ApiError) as refused:
            governance.delete_collection(
                collection, collection_id=collection_id, by=world.editor, actor=world.editor.user
            )
        assert (refused.value.status, refused.value.code, refused.value.message) == (
            404,
            "NOT_FOUND",
            "No such collection.",
        )
    assert Collection.objects.filter(pk__in=[board.pk, foreign.pk]).count() == 2
    governance.delete_collection(collection_id=open_collection.pk, by=world.editor, actor=world.editor.user)
    assert not Collection.objects.filter(pk=open_collection.pk).exists()


def test_create_context_set_refuses_a_collection_or_document_the_member_cannot_read(closed_world):
    from governance.models import ContextSet

    world, board, open_collection, minutes, expired, foreign = closed_world
    no_collection = {"fields": {"collectionIds": ["No such collection."]}}
    no_document = {"fields": {"documentIds": ["No such document."]}}
    cases = [
        ({"collections": [open_collection, board]}, no_collection),
        ({"collection_ids": [open_collection.pk, foreign.pk]}, no_collection),
        ({"collection_ids": [board.pk], "document_ids": [minutes.pk]}, no_collection),  # collections first
        ({"documents": [minutes]}, no_document),
        ({"document_ids": [expired.pk]}, no_document),
        ({"collection_ids": [open_collection.pk], "document_ids": [10**9]}, no_document),
    ]
    for named, details in cases:
        with pytest.raises(ApiError) as refused:
            governance.create_context_set(world.workspace, name="S", by=world.editor, **named)
        assert (refused.value.status, refused.value.code, refused.value.details) == (
            400,
            "VALIDATION_ERROR",
            details,
        ), named
    assert not ContextSet.objects.exists()
    mine = governance.create_context_set(
        world.workspace, name="S", collection_ids=[open_collection.pk, open_collection.pk], by=world.editor
    )
    assert list(mine.collections.all()) == [open_collection]
    owners = governance.create_context_set(
        world.workspace, name="B", collections=[board], documents=[minutes], by=world.owner
    )
    assert (list(owners.collections.all()), list(owners.documents.all())) == ([board], [minutes])
    with pytest.raises(ApiError):  # another workspace's member reads nothing here
        governance.create_context_set(world.workspace, name="X", collection_ids=[open_collection.pk], by=world.outsider)


def test_an_id_from_outside_is_never_trusted_without_the_member_who_reads_it(closed_world):
    """Only rows may be trusted (seeding, the forgetting check): an id names nothing without `by`."""
    world, board, *_ = closed_world
    with pytest.raises(TypeError):
        governance.create_document(collection_id=board.pk, title="T", text="x")
    with pytest.raises(TypeError):
        governance.delete_collection(collection_id=board.pk, actor=None)
    with pytest.raises(TypeError):
        governance.create_context_set(world.workspace, name="S", collection_ids=[board.pk])
    assert Collection.objects.filter(pk=board.pk).exists()


# --- the turn's rate limit lives in consolidation's action ------------------------------------------
def _ctx(world):
    make_agent(world.editor)  # a credential for the editor
    credential = world.editor.credentials.get()
    return gates.AgentContext(
        credential=credential,
        member=world.editor,
        workspace=world.workspace,
        ask_history=world.workspace.ask_history,
        context_set=None,
    )


def test_a_turn_that_fails_to_record_hands_its_slot_back_and_a_spent_budget_answers_429(world, monkeypatch, settings):
    settings.AGENT_TURNS_PER_HOUR = 1
    agent = consolidation.create_agent(world.workspace, name="helper", vector_memory=True, actor=world.owner.user)
    ctx = _ctx(world)
    turn = {
        "agent_id": agent.pk,
        "conversation_id": "c1",
        "anonymous": False,
        "messages": [{"role": "user", "content": "I like tea."}],
    }

    def broken(**kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(consolidation, "submit_turn", broken)
    with pytest.raises(RuntimeError):
        consolidation.submit_agent_turn(ctx, **turn)
    monkeypatch.undo()
    submitted, slot = consolidation.submit_agent_turn(ctx, **turn)  # the failed one gave its slot back
    assert slot.allowed and submitted.consolidation.pk
    with pytest.raises(ApiError) as limited:
        consolidation.submit_agent_turn(ctx, **turn)
    assert (
        limited.value.status == 429
        and limited.value.code == "AGENT_MEMORY_RATE_LIMITED"
        and "Retry-After" in limited.value.headers
    )
    assert get_limiter().acquire(ctx.credential.pk, 10).allowed  # remembers keep a budget of their own


def test_a_turn_for_an_agent_of_another_workspace_is_not_found_and_spends_nothing(world, settings):
    settings.AGENT_TURNS_PER_HOUR = 1
    foreign = consolidation.create_agent(
        world.other_workspace, name="theirs", vector_memory=True, actor=world.outsider.user
    )
    ctx = _ctx(world)
    with pytest.raises(ApiError) as missing:
        consolidation.submit_agent_turn(
            ctx, agent_id=foreign.pk, conversation_id="c", anonymous=False, messages=[{"role": "user", "content": "hi"}]
        )
    assert missing.value.code == "AGENT_NOT_FOUND"
    assert get_limiter().acquire(ctx.credential.pk, 1, bucket="turn").allowed


# --- the admin's content step is an action that audits first ----------------------------------------
def test_the_admin_content_step_records_who_and_why_but_never_the_content(world, admin_user):
    make_agent(world.editor).remember(namespace="notes", text="Prefers the window seat on long flights.")
    version = MemoryVersion.objects.get(member=world.editor)
    content = memory_actions.view_content_as_admin(version, actor=admin_user, reason="support ticket 42")
    assert content["text"] == version.text
    event = AuditEvent.objects.get(action="memory.content_viewed")
    assert event.reason == "support ticket 42" and event.actor == admin_user
    assert "window seat" not in str(event.changes) and "window seat" not in event.target


# --- receipts: who sees which, and how much -----------------------------------------------------------
def test_an_owner_sees_every_receipt_with_counts_only_and_a_member_only_their_own(world):
    editor, viewer = make_agent(world.editor), make_agent(world.viewer, scopes=("memory:read",))
    memory_id = editor.remember(namespace="notes", text="Likes green tea.").json()["memory"]["id"]
    editor.forget(memoryId=memory_id)
    from retention.models import DeletionReceipt

    (receipt,) = DeletionReceipt.objects.restrict(world.owner, "view")
    assert list(DeletionReceipt.objects.restrict(world.editor, "view")) == [receipt]
    assert list(DeletionReceipt.objects.restrict(world.viewer, "view")) == []
    owner_view, own_view = (
        receipt_access.receipt_json(receipt, viewer=world.owner),
        receipt_access.receipt_json(receipt, viewer=world.editor),
    )
    assert "memoryVersionIds" not in owner_view and "salt" not in owner_view and "filters" not in owner_view["manifest"]
    assert own_view["memoryVersionIds"] == [memory_id] and own_view["manifest"]["filters"] == {"memoryId": memory_id}
    assert owner_view["operationLabel"] == "Forgotten by an agent"
    assert receipt_access.chain_report_for(world.owner)["scope"] == "workspace"
    assert (
        "scope" not in receipt_access.chain_report_for(world.viewer)
        or receipt_access.chain_report_for(world.viewer)["scope"] != "workspace"
    )
    del viewer


# --- usage and lifecycle counts: one rule of who sees what ---------------------------------------------
def test_usage_and_lifecycle_counts_are_the_workspaces_for_owners_and_ones_own_otherwise(world):
    ModelPrice.objects.create(model_name="agent-model", input_per_1k="2", output_per_1k="4")
    charging.record_reply_usage(
        world.editor, conversation_id="c", model_name="agent-model", input_tokens=10, output_tokens=5, memory_tokens=0
    )
    from credits.models import UsageRecord

    assert usage.usage_totals(UsageRecord.objects.restrict(world.owner, "view"))["records"] == 1
    assert usage.usage_totals(UsageRecord.objects.restrict(world.viewer, "view")) == {
        "records": 0,
        "inputTokens": 0,
        "outputTokens": 0,
        "memoryTokens": 0,
        "inputCost": pricing.ZERO,
        "outputCost": pricing.ZERO,
        "total": pricing.ZERO,
    }
    assert lifecycle.counts_for(world.owner)[0] == "workspace" and "auditEvents" in lifecycle.counts_for(world.owner)[1]
    scope, counts = lifecycle.counts_for(world.viewer)
    assert scope == "member" and counts["usageRecords"] == 0 and "auditEvents" not in counts


# --- the settings page's confirm-or-not lives in previews -----------------------------------------------
def test_a_retention_change_that_erases_needs_confirmation_and_saves_nothing_until_confirmed(world):
    make_agent(world.editor).remember(namespace="notes", text="Likes green tea.")
    MemoryVersion.objects.update(retention_anchor=MemoryVersion.objects.get().retention_anchor.replace(year=2000))
    change = {"agentMemoryRetentionDays": 30}
    asked = previews.save_settings_or_ask_confirmation(
        world.workspace, change, actor=world.owner.user, confirmed=None, confirmed_plan=None
    )
    assert asked["needsConfirmation"] is True and asked["manifest"]["agentMemories"]["memories"] == 1
    world.workspace.ask_history.refresh_from_db()
    assert world.workspace.ask_history.agent_memory_retention_days == 90 and MemoryVersion.objects.exists()
    seen = previews.preview_summary(asked["manifest"])
    saved = previews.save_settings_or_ask_confirmation(
        world.workspace, change, actor=world.owner.user, confirmed=seen, confirmed_plan=asked["planToken"]
    )
    assert saved["needsConfirmation"] is False and saved["applied"]["agentVersionsErased"] == 1
    assert not MemoryVersion.objects.exists()


def test_a_change_that_moves_nothing_is_saved_at_once(world):
    saved = previews.save_settings_or_ask_confirmation(
        world.workspace, {"expiredGraceDays": 5}, actor=world.owner.user, confirmed=None, confirmed_plan=None
    )
    assert saved["needsConfirmation"] is False and saved["settings"]["expiredGraceDays"] == 5


def test_the_ai_memory_page_asks_the_gate_whether_assistant_memories_are_writable(world):
    """`assistant.assistant_memories_writable` runs the rows `add_assistant_memory` runs (the page
    used to restate them): writable unless the workspace keeps no history or AI memory is off."""
    from governance.models import Workspace
    from memoryapp.assistant import assistant_memories_writable

    assert assistant_memories_writable(world.editor)
    for flags in ({"retains_history": False}, {"ai_memory_available": False}):
        Workspace.objects.filter(pk=world.workspace.pk).update(**flags)
        world.editor.workspace.refresh_from_db()
        assert not assistant_memories_writable(world.editor), flags
        Workspace.objects.filter(pk=world.workspace.pk).update(retains_history=True, ai_memory_available=True)
        world.editor.workspace.refresh_from_db()
    world.editor.remember_me = False  # the member's own switch binds agents, not the member
    assert assistant_memories_writable(world.editor)
