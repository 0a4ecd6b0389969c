"""SPEC rules that had no test able to fail: each test states one rule, and every precedence test
sets up both conditions at once as well as each one alone (so a swapped order fails it)."""

from __future__ import annotations

import io
import json
import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from governance import actions
from governance.models import AuditEvent, Member
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion
from memoryapp.ratelimit import RedisRateLimiter, get_limiter
from tests.conftest import AgentClient, client_for, error_code, make_agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def bound(world, docs):
    """A credential bound to a set holding one collection (`Handbook`)."""
    collection, _, passages = docs
    outside = actions.create_collection(world.workspace, name="Outside")
    outside_document = actions.create_document(outside, title="o", text="outside text")
    context_set = actions.create_context_set(world.workspace, name="Shipping", collections=[collection], documents=[])
    agent = make_agent(world.editor, context_set=context_set)
    return agent, collection, passages, outside, outside_document.current_version.passages.first()


# --- §2 precedence: 7 > 8, 8 > 9, 10 > 11, 11 > 12 ---------------------------------------------
def test_personal_data_in_a_key_beats_the_context_set_scope(bound):
    agent, collection, _, outside, _ = bound
    inside, pii_key = {"collectionId": str(collection.pk)}, "mail jane@example.com"
    assert error_code(agent.remember(namespace="n", key=pii_key, text="x", **inside)) == "AGENT_MEMORY_PERSONAL_DATA"  # 7 alone
    assert error_code(agent.remember(namespace="n", key="fine", text="x", collectionId=str(outside.pk))) == "AGENT_CONTEXT_SET_SCOPE_REFUSED"  # 8 alone
    assert error_code(agent.remember(namespace="n", key=pii_key, text="x", collectionId=str(outside.pk))) == "AGENT_MEMORY_PERSONAL_DATA"  # both


def test_the_context_set_scope_beats_an_invalid_citation(world, bound):
    agent, collection, passages, _, outside_passage = bound
    unbound = make_agent(world.editor)
    secret = actions.create_collection(world.workspace, name="Secret", restricted=True, readers=[world.owner])
    unreadable_outside = actions.create_document(secret, title="s", text="secret").current_version.passages.first()
    assert error_code(unbound.remember(namespace="n", text="x", citations=["999999"])) == "AGENT_MEMORY_CITATION_INVALID"  # 9 alone
    assert error_code(agent.remember(namespace="n", text="x", citations=[str(outside_passage.pk)])) == "AGENT_CONTEXT_SET_SCOPE_REFUSED"  # 8 alone
    for invalid in ("999999", str(unreadable_outside.pk)):  # both: outside the set and not a readable passage
        assert error_code(agent.remember(namespace="n", text="x", citations=[str(passages[0].pk), invalid])) == "AGENT_CONTEXT_SET_SCOPE_REFUSED"


def test_a_bound_credential_cannot_tell_an_unreadable_passage_in_its_set_from_a_missing_one(world, docs):
    collection, _, _ = docs
    board = actions.create_collection(world.workspace, name="Board", restricted=True, readers=[world.owner])
    unreadable_inside = actions.create_document(board, title="b", text="board minutes").current_version.passages.first()
    context_set = actions.create_context_set(world.workspace, name="With board", collections=[collection, board], documents=[])
    agent = make_agent(world.editor, context_set=context_set)
    answers = [agent.remember(namespace="n", text="x", collectionId=str(collection.pk), citations=[pid]).json()["error"] for pid in (str(unreadable_inside.pk), "999999")]
    assert answers[0]["code"] == answers[1]["code"] == "AGENT_CONTEXT_SET_SCOPE_REFUSED"
    assert answers[0]["message"] == answers[1]["message"]


def _use_up_the_hour(agent: AgentClient) -> None:
    for i in range(120):
        assert agent.remember(namespace="n", text=f"note {i}").status_code == 201


def test_an_empty_text_beats_the_rate_limit(world):
    fresh = make_agent(world.editor)
    assert error_code(fresh.remember(namespace="n", text="jane@example.com")) == "AGENT_MEMORY_EMPTY"  # 10 alone
    agent = make_agent(world.editor)
    _use_up_the_hour(agent)
    assert error_code(agent.remember(namespace="n", text="still a note")) == "AGENT_MEMORY_RATE_LIMITED"  # 11 alone
    assert error_code(agent.remember(namespace="n", text="jane@example.com")) == "AGENT_MEMORY_EMPTY"  # both


@override_settings(MAX_VERSIONS_PER_MEMBER=120)
def test_the_rate_limit_beats_the_cap(world):
    agent = make_agent(world.editor)
    _use_up_the_hour(agent)  # 120 stored: the cap is reached and the hour is used up
    assert MemoryVersion.objects.filter(member=world.editor).count() == 120
    assert error_code(agent.remember(namespace="n", text="both")) == "AGENT_MEMORY_RATE_LIMITED"  # both
    fresh = make_agent(world.editor)
    assert error_code(fresh.remember(namespace="n", text="cap only")) == "AGENT_MEMORY_FULL"  # 12 alone


# --- §2 row 12 at its real value -----------------------------------------------------------------
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


# --- §3 fields ------------------------------------------------------------------------------------
def test_expires_at_is_the_retention_anchor_plus_the_current_retention(world, agent):
    created = agent.remember(namespace="n", text="a note").json()["memory"]
    assert _instant(created["expiresAt"]) - _instant(created["createdAt"]) == timedelta(days=90)
    actions.update_settings(world.workspace, {"agentMemoryRetentionDays": 30}, actor=world.owner.user)
    listed = agent.list().json()["memories"][0]
    assert _instant(listed["expiresAt"]) - _instant(listed["createdAt"]) == timedelta(days=30)  # retroactive


def test_an_assistant_memory_expires_from_its_last_edit(world, agent, time_machine):
    api = client_for(world.editor)
    base = f"/api/w/{world.workspace.pk}/ai-memory/memories"
    created = api.post(base, {"kind": "preference", "topic": "tea", "summary": "likes green tea"}, format="json")
    assert created.status_code == 201, created.content
    memory_id = created.json()["memory"]["id"] if "memory" in created.json() else created.json()["id"]
    time_machine.move_to(timezone.now() + timedelta(days=10))
    api.patch(f"{base}/{memory_id}", {"summary": "likes jasmine tea"}, format="json")
    current = next(m for m in agent.list(namespace=ASSISTANT_NAMESPACE).json()["memories"] if m["key"] == "tea")
    assert abs(_instant(current["expiresAt"]) - (timezone.now() + timedelta(days=90))) < timedelta(seconds=5)


def _instant(value: str):
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.mark.parametrize("as_of", ["2024-01-01T00:00:00", "2999-01-01T00:00:00Z", "yesterday", 5, "0001-01-01T00:00:00+14:00"])
def test_list_validates_as_of_like_recall(agent, as_of):
    response = agent.list(asOf=as_of)
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert "asOf" in response.json()["error"]["details"]["fields"]


def test_a_query_may_hold_1000_characters_and_no_more(agent):
    assert agent.recall(query="q" * 1000).status_code == 200
    response = agent.recall(query="q" * 1001)
    assert response.status_code == 400 and "query" in response.json()["error"]["details"]["fields"]


def test_details_are_masked_before_they_are_stored(world):
    agent = make_agent(world.editor)
    response = agent.remember(
        namespace=ASSISTANT_NAMESPACE,
        key="contact",
        source="user_request",
        kind="fact",
        text="How to reach the member",
        details=["mail ada@example.com", "phone +1 (212) 555-0199", "card 4111 1111 1111 1111"],
    )
    assert response.status_code == 201, response.content
    memory = response.json()["memory"]
    stored = MemoryVersion.objects.get(pk=memory["id"]).details
    for secret in ("ada@example.com", "555-0199", "4111"):
        assert secret not in stored and secret not in json.dumps(memory)
    assert {"EMAIL", "PHONE", "CARD"} <= set(memory["masked"])


# --- §4.2 the hash half of "changed" ----------------------------------------------------------------
def test_a_passage_whose_text_changed_in_place_marks_the_memory_changed(agent, docs):
    from governance.models import Passage

    _, _, passages = docs
    cited, untouched = passages
    agent.remember(namespace="n", text="ships from Osaka", citations=[str(cited.pk), str(untouched.pk)])
    assert agent.list().json()["memories"][0]["sourceState"] == "current"
    # Same document version, same passage id, other text (an in-place correction).
    Passage.objects.filter(pk=cited.pk).update(text="Orders ship from Kobe.", sha256="f" * 64)
    memory = agent.list().json()["memories"][0]
    assert memory["sourceState"] == "changed"
    states = {c["passageId"]: c["sourceState"] for c in memory["citations"]}
    assert states == {str(cited.pk): "changed", str(untouched.pk): "current"}
    recalled = agent.recall(query="Osaka").json()["memories"][0]
    assert recalled["sourceState"] == "changed"


# --- §4.4 the 800 ms budget -------------------------------------------------------------------------
def test_the_query_embedding_budget_is_800_ms_by_default(agent, monkeypatch):
    from django.conf import settings

    from memoryapp.recall.embedders import PendingQuery

    assert settings.SEMANTIC_BUDGET_SECONDS == 0.8
    started, budgets = [], []
    real_init, real_result = PendingQuery.__init__, PendingQuery.result
    monkeypatch.setattr(PendingQuery, "__init__", lambda self, embedder, text: started.append(text) or real_init(self, embedder, text))
    monkeypatch.setattr(PendingQuery, "result", lambda self, budget: budgets.append(budget) or real_result(self, budget))
    agent.remember(namespace="n", text="a note")
    assert agent.recall(query="note").status_code == 200
    assert started == ["note"] and budgets == [0.8]  # the query embedded once per request, within 800 ms


def test_a_query_embedding_past_its_budget_degrades_recall_instead_of_waiting(agent, monkeypatch, settings):
    agent.remember(namespace="n", text="apricot jam")
    release = threading.Event()

    class Stuck:
        id, dim = "stuck", 4

        def embed(self, texts):
            release.wait(30)  # never answers within the budget: no race with the clock
            raise RuntimeError("released")

    monkeypatch.setattr("memoryapp.recall.service.get_embedder", lambda name: Stuck())
    settings.SEMANTIC_BUDGET_SECONDS = 0.05
    try:
        response = agent.recall(query="apricot").json()
    finally:
        release.set()
    assert response["degraded"] == ["semantic"]
    assert [m["text"] for m in response["memories"]] == ["apricot jam"]  # BM25 still answers
    assert all(m["ranks"]["semantic"] is None for m in response["memories"])


# --- §4.5 context sets --------------------------------------------------------------------------------
def test_a_document_listed_directly_in_a_set_is_inside_it(world, docs):
    _, _, _ = docs
    loose = actions.create_collection(world.workspace, name="Loose")
    listed_document = actions.create_document(loose, title="Listed", text="Listed directly in the set.")
    other_document = actions.create_document(loose, title="Not listed", text="Same collection, not in the set.")
    context_set = actions.create_context_set(world.workspace, name="Docs", collections=[], documents=[listed_document])
    agent = make_agent(world.editor, context_set=context_set)
    inside = agent.remember(namespace="n", text="cites the listed document", citations=[str(listed_document.current_version.passages.first().pk)])
    assert inside.status_code == 201, inside.content
    outside = agent.remember(namespace="n", text="cites its neighbour", citations=[str(other_document.current_version.passages.first().pk)])
    assert error_code(outside) == "AGENT_CONTEXT_SET_SCOPE_REFUSED"
    assert [m["text"] for m in agent.list().json()["memories"]] == ["cites the listed document"]
    assert [m["text"] for m in agent.recall(query="listed document").json()["memories"]] == ["cites the listed document"]


def test_recall_with_a_collection_outside_the_set_is_refused(bound):
    agent, collection, _, outside, _ = bound
    assert agent.recall(query="x", collectionId=str(collection.pk)).status_code == 200
    refused = agent.recall(query="x", collectionId=str(outside.pk))
    assert refused.status_code == 403 and error_code(refused) == "AGENT_CONTEXT_SET_SCOPE_REFUSED"


# --- §4.6 knowledge endpoints never return memories ------------------------------------------------------
def test_knowledge_endpoints_never_return_memories(world, docs):
    from tests.isolation.test_owner_sees_counts import fill, routes

    collection, document, passages = docs
    marker = "quincunxmemory"
    agent = make_agent(world.editor)
    assert agent.remember(namespace="n", text=f"{marker} about Osaka shipping", citations=[str(passages[0].pk)], collectionId=str(collection.pk)).status_code == 201
    api = client_for(world.editor)
    knowledge = ("collections", "documents", "passages", "entities", "context-sets")
    ids = {"collection_id": str(collection.pk), "document_id": str(document.pk), "passage_id": str(passages[0].pk), "set_id": "1"}
    checked = 0
    for route, params in routes():
        tail = route.split("/", 3)[-1] if route.startswith("api/w/") else ""
        if not tail.startswith(knowledge):
            continue
        url = fill(route, {"ws_id": str(world.workspace.pk), **{p: ids.get(p, "1") for p in params if p != "ws_id"}})
        response = api.get(url)
        body = response.content.decode()
        assert marker not in body and '"type": "memory"' not in body and '"type":"memory"' not in body, url
        checked += 1
    assert checked >= 4
    assert api.get(f"/api/w/{world.workspace.pk}/passages/{passages[0].pk}").json()["text"] == passages[0].text


# --- §4.7 headers and the Redis window ----------------------------------------------------------------
def _age_redis_window(credential_id: int, seconds: float, count: int | None = None) -> None:
    """Move the oldest `count` (default all) admissions of a credential `seconds` into the past, on
    Redis' own clock (its scores are microseconds)."""
    limiter = get_limiter()
    key = limiter._key(credential_id)
    entries = limiter._client.zrange(key, 0, -1 if count is None else count - 1, withscores=True)
    limiter._client.zadd(key, {member: score - seconds * 1_000_000 for member, score in entries})


def _credential_id(agent: AgentClient) -> int:
    from governance.models import Credential

    return Credential.objects.get(prefix=agent.token.split("_")[1]).pk


def test_rate_limit_reset_says_when_the_oldest_admission_leaves_the_window(agent, time_machine):
    first = agent.remember(namespace="n", text="first")
    assert 3599 <= int(first["RateLimit-Reset"]) <= 3600
    assert first["RateLimit-Limit"] == "120" and first["RateLimit-Remaining"] == "119"
    if isinstance(get_limiter(), RedisRateLimiter):
        _age_redis_window(_credential_id(agent), 600)
    else:
        time_machine.move_to(timezone.now() + timedelta(minutes=10))
    later = agent.remember(namespace="n", text="ten minutes later")
    assert 2999 <= int(later["RateLimit-Reset"]) <= 3001
    assert later["RateLimit-Remaining"] == "118"


@pytest.mark.redis
def test_the_redis_window_rolls_over_exactly(world, settings):
    if not isinstance(get_limiter(), RedisRateLimiter):
        pytest.skip("backend: the Redis limiter runs on the PostgreSQL + Redis suite")
    agent = make_agent(world.editor)
    credential_id = _credential_id(agent)
    _use_up_the_hour(agent)
    assert error_code(agent.remember(namespace="n", text="refused")) == "AGENT_MEMORY_RATE_LIMITED"
    _age_redis_window(credential_id, 3601, count=10)  # the ten oldest leave the window
    for i in range(10):
        assert agent.remember(namespace="n", text=f"after roll {i}").status_code == 201, i
    refused = agent.remember(namespace="n", text="the eleventh")
    assert error_code(refused) == "AGENT_MEMORY_RATE_LIMITED"
    assert 1 <= int(refused["Retry-After"]) <= 3600
    limiter = get_limiter()
    assert limiter._client.zcard(limiter._key(credential_id)) == 120  # trimmed, not grown


# --- §5 workspace API ------------------------------------------------------------------------------------
def test_the_agent_memories_api_filters_and_paginates_the_members_own(world, docs):
    collection, _, _ = docs
    agent = make_agent(world.editor)
    for i in range(5):
        agent.remember(namespace="travel", key=f"trip{i}", text=f"trip {i}")
    agent.remember(namespace="travel", key="trip0", text="trip 0 again")
    agent.remember(namespace="food", text="likes ramen", collectionId=str(collection.pk))
    make_agent(world.viewer, scopes=("memory:read",))
    make_agent(world.owner).remember(namespace="travel", text="the owner's own trip")
    api = client_for(world.editor)
    url = f"/api/w/{world.workspace.pk}/ask-history/agent-memories"
    assert sorted(m["text"] for m in api.get(url, {"namespace": "food"}).json()["memories"]) == ["likes ramen"]
    assert [m["text"] for m in api.get(url, {"key": "trip0"}).json()["memories"]] == ["trip 0 again"]  # current only
    assert [m["text"] for m in api.get(url, {"collectionId": str(collection.pk)}).json()["memories"]] == ["likes ramen"]
    seen, cursor = [], None
    while True:
        page = api.get(url, {"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        assert len(page["memories"]) <= 2
        seen += [m["text"] for m in page["memories"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 6 and "the owner's own trip" not in seen
    assert api.get(url, {"limit": 101}).status_code == 400


def test_put_preference_switches_remember_me(world, agent):
    api = client_for(world.editor)
    url = f"/api/w/{world.workspace.pk}/ai-memory/preference"
    assert api.put(url, {"rememberMe": False}, format="json").status_code == 200
    world.editor.refresh_from_db()
    assert world.editor.remember_me is False
    assert agent.list().json()["error"]["details"] == {"reason": "member"}
    assert api.put(url, {"rememberMe": "sometimes"}, format="json").status_code == 400
    assert api.put(url, {"rememberMe": True}, format="json").status_code == 200
    assert agent.list().status_code == 200


def test_the_owners_bulk_delete_leaves_an_audit_event(world):
    make_agent(world.editor).remember(namespace="n", text="one")
    make_agent(world.owner).remember(namespace="n", text="two")
    response = client_for(world.owner).delete(f"/api/w/{world.workspace.pk}/ask-history/settings/agent-memories")
    assert response.status_code == 200
    event = AuditEvent.objects.get(action="memories.bulk_deleted", workspace=world.workspace)
    assert event.actor == world.owner.user
    assert event.changes["counts"]["memory_version"] == 2 and event.changes["members"] == 2
    assert "one" not in json.dumps(event.changes) and "two" not in json.dumps(event.changes)


# --- §5.1 bootstrap commands -------------------------------------------------------------------------------
def _command(*args) -> dict:
    out = io.StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_the_bootstrap_commands_print_their_json_and_work_together(db):
    created = _command("createworkspace", "Initech", "--owner", "boss@initech.test", "--password", "pw-boss-1234")
    assert set(created) == {"workspaceId", "ownerMemberId"}
    owner = Member.objects.get(pk=int(created["ownerMemberId"]))
    assert str(owner.workspace_id) == created["workspaceId"] and owner.role == "owner"
    added = _command("addmember", created["workspaceId"], "milton@initech.test", "--role", "editor")
    assert set(added) == {"memberId"} and Member.objects.get(pk=int(added["memberId"])).role == "editor"
    token = _command("issue_api_token", "milton@initech.test")["token"]
    from rest_framework.test import APIClient

    api = APIClient()
    settings_page = api.get(f"/api/w/{created['workspaceId']}/ask-history/settings", HTTP_AUTHORIZATION=f"Token {token}")
    assert settings_page.status_code == 200 and settings_page.json()["agentMemoriesEnabled"] is False
    assert api.get(f"/api/w/{created['workspaceId']}/ask-history/settings", HTTP_AUTHORIZATION="Token gpt_nope_nope").status_code in (401, 403)
    bare = _command("createworkspace", "Quiet", "--owner", "q@q.test", "--non-retaining", "--ai-memory-unavailable")
    from governance.models import Workspace

    quiet = Workspace.objects.get(pk=int(bare["workspaceId"]))
    assert quiet.retains_history is False and quiet.ai_memory_available is False
