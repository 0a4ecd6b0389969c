"""Conversation turns → consolidation into AI-extracted assistant memories (SPEC §9)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from credits import charging, quotas, usage
from credits.models import Consolidation, RoleQuota, UsageCategory, UsageRecord
from governance import actions
from governance.models import AskHistorySettings
from memoryapp.consolidation import run_consolidation, submit_turn
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion, Source
from memoryapp.system_models import ExtractedMemory
from tests.credits.support import STUB_COST, StubModel, ai_agent, balance, post_turn, use_stub, user_says
from tests.support import client_for, error_code, make_agent

LANGUAGE = ExtractedMemory("preference", "preferred_language", "Prefers answers in Japanese")


def _assert_nothing_charged_or_stored(world, before: Decimal):
    assert UsageRecord.objects.count() == 0
    assert balance(world.workspace) == before
    assert not MemoryVersion.objects.filter(namespace=ASSISTANT_NAMESPACE).exists()
    assert all(c.messages is None for c in Consolidation.objects.all())


# --- the happy path -----------------------------------------------------------------------------
def test_turn_is_consolidated_into_ai_extracted_memories_and_charged(world, ready, django_capture_on_commit_callbacks):
    agent, client = ready
    response = post_turn(
        client, agent, user_says("Please answer in Japanese from now on."), capture=django_capture_on_commit_callbacks
    )
    assert response.status_code == 202, response.json()
    body = response.json()["consolidation"]
    assert body["status"] == "queued" and body["reason"] is None

    consolidation = Consolidation.objects.get(pk=body["id"])
    assert consolidation.status == "done"
    assert consolidation.messages is None and consolidation.input_purged_at is not None
    memory = MemoryVersion.objects.get(member=world.editor, namespace=ASSISTANT_NAMESPACE, key="preferred_language")
    assert memory.source == Source.AI_EXTRACTED
    assert memory.text == "Prefers answers in Japanese"

    record = UsageRecord.objects.get()
    assert record.member == world.editor and record.category == UsageCategory.AI_MEMORY
    assert record.input_tokens > 0 and record.total_cost > 0
    assert [line["label"] for line in usage.usage_lines(record)] == ["AI memory (input)", "AI memory (output)"]
    assert balance(world.workspace) == Decimal("100") - record.total_cost
    assert consolidation.usage_record_id == record.pk

    listed = client_for(world.editor).get(f"/api/w/{world.workspace.pk}/ai-memory/memories").json()["memories"]
    assert [(m["topic"], m["source"]) for m in listed] == [("preferred_language", "ai_extracted")]


def test_same_topic_becomes_a_new_version(world, ready, monkeypatch, django_capture_on_commit_callbacks):
    agent, client = ready
    stub = use_stub(monkeypatch, StubModel(memories=[LANGUAGE]))
    post_turn(client, agent, user_says("answer in Japanese"), capture=django_capture_on_commit_callbacks)
    stub.memories = [ExtractedMemory("preference", "preferred_language", "Prefers answers in English")]
    post_turn(client, agent, user_says("actually English"), capture=django_capture_on_commit_callbacks)
    versions = MemoryVersion.objects.filter(member=world.editor, key="preferred_language").order_by("version")
    assert [(v.version, v.valid_to is None, v.text) for v in versions] == [
        (1, False, "Prefers answers in Japanese"),
        (2, True, "Prefers answers in English"),
    ]


def test_japanese_remember_request_is_extracted_offline(world, ready, django_capture_on_commit_callbacks):
    agent, client = ready
    text = (
        "覚えてください。デモ製品のコードネームは Aurora です。"
        "今後、製品紹介を書くときはこのコードネームを使ってください"
    )
    post_turn(client, agent, user_says(text), capture=django_capture_on_commit_callbacks)
    memory = MemoryVersion.objects.get(member=world.editor, namespace=ASSISTANT_NAMESPACE)
    assert memory.source == Source.AI_EXTRACTED
    assert "Aurora" in memory.text and memory.kind == "instruction"


def test_consolidation_that_finds_nothing_is_still_charged(world, ready, django_capture_on_commit_callbacks):
    agent, client = ready
    response = post_turn(
        client, agent, user_says("What is the weather like today?"), capture=django_capture_on_commit_callbacks
    )
    consolidation = Consolidation.objects.get(pk=response.json()["consolidation"]["id"])
    assert consolidation.status == "done" and consolidation.memories_found == 0
    record = UsageRecord.objects.get()
    assert record.input_tokens > 0 and record.total_cost > 0
    assert balance(world.workspace) == Decimal("100") - record.total_cost
    assert not MemoryVersion.objects.exists()


def test_owner_agent_memory_switch_does_not_govern_consolidation(world, ready, django_capture_on_commit_callbacks):
    """Documented decision: "Let agents keep memories" governs credential-written agent memories;
    consolidation writes assistant memories, governed by seed 002's switches."""
    AskHistorySettings.objects.filter(workspace=world.workspace).update(agent_memories_enabled=False)
    agent, client = ready
    response = post_turn(
        client, agent, user_says("Please answer in Japanese."), capture=django_capture_on_commit_callbacks
    )
    assert response.status_code == 202
    assert Consolidation.objects.get().status == "done"


# --- every skip rule on its own -----------------------------------------------------------------
def _member_switch_off(world, agent):
    actions.set_remember_me(world.editor, False)


def _platform_flag_off(world, agent):
    world.workspace.ai_memory_available = False
    world.workspace.save()


def _vector_memory_off(world, agent):
    agent.vector_memory = False
    agent.save()


def _no_credits(world, agent):
    charging.grant_credits(world.workspace, -charging.balance_of(world.workspace))


def _member_quota_used_up(world, agent):
    quota = quotas.set_member_quota(world.editor, limit=Decimal("5"), period="month", actor=None)
    quota.used = Decimal("5")
    quota.save()


def _role_quota_used_up(world, agent):
    quota = quotas.set_role_quota(world.workspace, "editor", limit=Decimal("0"), period="month", actor=None)
    assert quota.used == 0


@pytest.mark.parametrize(
    "arrange, reason",
    [
        (_member_switch_off, "member"),
        (_platform_flag_off, "organization"),
        (_vector_memory_off, "vector_memory"),
        (_no_credits, "credits"),
        (_member_quota_used_up, "member_quota"),
        (_role_quota_used_up, "role_quota"),
    ],
)
def test_each_skip_rule_skips_and_charges_nothing(
    world, ready, monkeypatch, django_capture_on_commit_callbacks, arrange, reason
):
    agent, client = ready
    stub = use_stub(monkeypatch, StubModel(memories=[LANGUAGE]))
    arrange(world, agent)
    before = balance(world.workspace)
    response = post_turn(
        client, agent, user_says("Please answer in Japanese."), capture=django_capture_on_commit_callbacks
    )
    assert response.status_code == 200, response.json()
    body = response.json()["consolidation"]
    assert (body["status"], body["reason"]) == ("skipped", reason)
    assert body["message"]
    assert Consolidation.objects.get().reason == reason
    assert stub.received == []
    _assert_nothing_charged_or_stored(world, before)


def test_anonymous_partner_is_skipped(world, ready, monkeypatch, django_capture_on_commit_callbacks):
    agent, client = ready
    stub = use_stub(monkeypatch, StubModel(memories=[LANGUAGE]))
    response = post_turn(
        client,
        agent,
        user_says("Please answer in Japanese."),
        anonymous=True,
        capture=django_capture_on_commit_callbacks,
    )
    assert response.json()["consolidation"]["reason"] == "anonymous"
    consolidation = Consolidation.objects.get()
    assert consolidation.member is None and consolidation.anonymous
    assert stub.received == []
    _assert_nothing_charged_or_stored(world, Decimal("100"))


@pytest.mark.parametrize(
    "secret",
    [
        "write to jane.doe@example.com",
        "my card is 4111 1111 1111 1111",
        "call me at +972-54-123-4567",
        "password: hunter2hunter2",
        "口座番号は 1234567 です",
    ],
)
def test_message_with_personal_data_is_never_sent_nor_stored(
    world, ready, monkeypatch, django_capture_on_commit_callbacks, secret
):
    agent, client = ready
    stub = use_stub(monkeypatch, StubModel(memories=[LANGUAGE]))
    messages = [{"role": "user", "content": "Please answer in Japanese."}, {"role": "user", "content": secret}]
    response = post_turn(client, agent, messages, capture=django_capture_on_commit_callbacks)
    body = response.json()["consolidation"]
    assert (response.status_code, body["status"], body["reason"]) == (200, "skipped", "personal_data")
    assert body["personalData"][0]["index"] == 1 and body["personalData"][0]["kinds"]
    assert secret not in json.dumps(response.json())
    assert stub.received == []
    assert Consolidation.objects.get().messages is None
    _assert_nothing_charged_or_stored(world, Decimal("100"))


def test_member_turning_switch_off_while_queued_skips_in_the_task(world, ready, monkeypatch):
    agent, _ = ready
    stub = use_stub(monkeypatch, StubModel(memories=[LANGUAGE]))
    submitted = submit_turn(
        workspace=world.workspace,
        member=world.editor,
        agent=agent,
        credential_id=None,
        conversation_id="c",
        anonymous=False,
        messages=user_says("hi"),
    )
    actions.set_remember_me(world.editor, False)
    result = run_consolidation(submitted.consolidation.pk)
    assert result["status"] == "skipped" and result["reason"] == "member"
    assert stub.received == []
    _assert_nothing_charged_or_stored(world, Decimal("100"))


# --- failures -----------------------------------------------------------------------------------
def test_model_failure_charges_nothing_and_purges_input(world, ready, monkeypatch, django_capture_on_commit_callbacks):
    agent, client = ready
    stub = use_stub(monkeypatch, StubModel(fail=True))
    response = post_turn(
        client, agent, user_says("Please answer in Japanese."), capture=django_capture_on_commit_callbacks
    )
    assert response.status_code == 202
    consolidation = Consolidation.objects.get()
    assert (consolidation.status, consolidation.reason) == ("failed", "model_error")
    assert len(stub.received) == 1
    _assert_nothing_charged_or_stored(world, Decimal("100"))


def test_store_refusal_rolls_back_the_charge(world, ready, monkeypatch, settings):
    agent, _ = ready
    use_stub(monkeypatch, StubModel(memories=[LANGUAGE]))
    settings.MAX_VERSIONS_PER_MEMBER = 1
    actions_memory = ExtractedMemory("fact", "job_role", "Works as an engineer")
    from memoryapp.assistant import add_assistant_memory

    add_assistant_memory(
        world.editor, kind=actions_memory.kind, topic=actions_memory.topic, summary=actions_memory.summary
    )
    submitted = submit_turn(
        workspace=world.workspace,
        member=world.editor,
        agent=agent,
        credential_id=None,
        conversation_id="c",
        anonymous=False,
        messages=user_says("hi"),
    )
    result = run_consolidation(submitted.consolidation.pk)
    assert (result["status"], result["reason"]) == ("failed", "store_error")
    assert UsageRecord.objects.count() == 0 and balance(world.workspace) == Decimal("100")


def test_a_consolidation_runs_once_even_if_delivered_twice(world, ready, monkeypatch):
    agent, _ = ready
    stub = use_stub(monkeypatch, StubModel(memories=[LANGUAGE]))
    submitted = submit_turn(
        workspace=world.workspace,
        member=world.editor,
        agent=agent,
        credential_id=None,
        conversation_id="c",
        anonymous=False,
        messages=user_says("hi"),
    )
    assert run_consolidation(submitted.consolidation.pk)["status"] == "done"
    assert run_consolidation(submitted.consolidation.pk)["status"] == "not_queued"
    assert len(stub.received) == 1
    assert UsageRecord.objects.count() == 1 and balance(world.workspace) == Decimal("100") - STUB_COST


def test_task_is_queued_with_the_consolidation_id_only(world, ready, monkeypatch, django_capture_on_commit_callbacks):
    agent, client = ready
    sent = []
    monkeypatch.setattr("memoryapp.tasks.consolidate_turn.delay", lambda *args, **kwargs: sent.append((args, kwargs)))
    response = post_turn(
        client, agent, user_says("I speak English and Hebrew."), capture=django_capture_on_commit_callbacks
    )
    assert sent == [((int(response.json()["consolidation"]["id"]),), {})]


# --- authentication and validation --------------------------------------------------------------
def test_turn_needs_memory_write_scope(world, ready):
    agent, _ = ready
    reader = make_agent(world.editor, scopes=("memory:read",))
    assert error_code(post_turn(reader, agent, user_says("hi"))) == "INSUFFICIENT_SCOPE"


def test_viewer_cannot_submit_turns(world, ready):
    agent, _ = ready
    viewer = make_agent(world.viewer, scopes=("memory:read",))
    response = post_turn(viewer, agent, user_says("hi"))
    assert response.status_code == 403


def test_unknown_token_is_unauthenticated(world, ready):
    agent, client = ready
    client.token = "gam_000000000000_nope"
    assert post_turn(client, agent, user_says("hi")).status_code == 401


def test_agent_of_another_workspace_is_not_found(world, ready):
    _, client = ready
    foreign = ai_agent(type("W", (), {"workspace": world.other_workspace, "owner": world.outsider})())
    response = post_turn(client, foreign, user_says("hi"))
    assert (response.status_code, error_code(response)) == (404, "AGENT_NOT_FOUND")


def test_non_retaining_workspace_refuses_turns(world, ready):
    agent, client = ready
    world.workspace.retains_history = False
    world.workspace.save()
    assert error_code(post_turn(client, agent, user_says("hi"))) == "NON_RETAINING_WORKSPACE"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"agentId": "1", "conversationId": "c", "messages": []},
        {"agentId": "1", "conversationId": "c", "messages": [{"role": "robot", "content": "x"}]},
        {"agentId": "1", "conversationId": "c", "messages": [{"role": "user", "content": ""}]},
        {"agentId": "1", "conversationId": "c", "messages": "hello"},
        {"agentId": "x", "conversationId": "c", "messages": [{"role": "user", "content": "x"}]},
        {"agentId": "1", "conversationId": "jane@example.com", "messages": [{"role": "user", "content": "x"}]},
        {"agentId": "1", "conversationId": "c", "messages": [{"role": "user", "content": "x"}], "extra": 1},
        [],
    ],
)
def test_malformed_turns_are_validation_errors(world, ready, body):
    _, client = ready
    response = client.client.generic(
        "POST",
        "/api/agent/v1/conversations/turns",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {client.token}",
    )
    assert (response.status_code, error_code(response)) == (400, "VALIDATION_ERROR")
    assert "jane@example.com" not in response.content.decode()


def test_invalid_json_is_a_validation_error(world, ready):
    _, client = ready
    response = client.client.generic(
        "POST",
        "/api/agent/v1/conversations/turns",
        b"{nope",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {client.token}",
    )
    assert (response.status_code, error_code(response)) == (400, "VALIDATION_ERROR")


# --- agents API ---------------------------------------------------------------------------------
def test_admin_or_owner_manages_agents_members_only_read(world):
    url = f"/api/w/{world.workspace.pk}/agents"
    created = client_for(world.owner).post(url, {"name": "Support bot", "vectorMemory": True}, format="json")
    assert created.status_code == 201
    agent_id = created.json()["id"]
    assert client_for(world.editor).post(url, {"name": "x"}, format="json").status_code == 403
    assert client_for(world.outsider).get(url).status_code == 404
    assert [a["name"] for a in client_for(world.viewer).get(url).json()["agents"]] == ["Support bot"]

    patched = client_for(world.owner).patch(f"{url}/{agent_id}", {"vectorMemory": False}, format="json")
    assert patched.status_code == 200 and patched.json()["vectorMemory"] is False
    assert client_for(world.editor).patch(f"{url}/{agent_id}", {"vectorMemory": True}, format="json").status_code == 403
    assert (
        client_for(world.outsider)
        .patch(f"/api/w/{world.other_workspace.pk}/agents/{agent_id}", {"name": "y"}, format="json")
        .status_code
        == 404
    )


def test_vector_memory_is_off_unless_asked_for(world):
    created = client_for(world.owner).post(f"/api/w/{world.workspace.pk}/agents", {"name": "Plain"}, format="json")
    assert created.json()["vectorMemory"] is False


def test_role_quota_is_shared_by_the_role(world, ready, monkeypatch, django_capture_on_commit_callbacks):
    """(Also in tests/credits/test_charging.py: here via the turn endpoint.) A second editor finds the role's quota used
    up."""
    agent, client = ready
    use_stub(monkeypatch, StubModel(memories=[LANGUAGE]))
    quotas.set_role_quota(world.workspace, "editor", limit=STUB_COST, period="month", actor=None)
    assert post_turn(client, agent, user_says("a"), capture=django_capture_on_commit_callbacks).status_code == 202
    other = actions.add_member(world.workspace, "editor2@acme.test", role="editor")
    response = post_turn(make_agent(other), agent, user_says("b"), capture=django_capture_on_commit_callbacks)
    assert response.json()["consolidation"]["reason"] == "role_quota"
    assert RoleQuota.objects.get().used == STUB_COST


def test_stale_consolidations_are_given_up_and_their_input_purged(world, ready):
    from datetime import timedelta

    from django.utils import timezone

    from memoryapp.consolidation import sweep_stale_consolidations

    agent, _ = ready
    submitted = submit_turn(
        workspace=world.workspace,
        member=world.editor,
        agent=agent,
        credential_id=None,
        conversation_id="c",
        anonymous=False,
        messages=user_says("hi"),
    )
    assert sweep_stale_consolidations() == {"expired": 0}
    assert sweep_stale_consolidations(timezone.now() + timedelta(hours=7)) == {"expired": 1}
    consolidation = Consolidation.objects.get(pk=submitted.consolidation.pk)
    assert (consolidation.status, consolidation.reason, consolidation.messages) == ("failed", "expired", None)
    assert run_consolidation(consolidation.pk)["status"] == "not_queued"
    assert UsageRecord.objects.count() == 0
