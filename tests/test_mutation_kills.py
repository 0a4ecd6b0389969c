"""Tests that kill surviving mutants of the rule modules (bench/mutation.sh). Each states a SPEC
rule; they are grouped by the module whose mutants they kill."""

from __future__ import annotations

import json
import math as _math
import os
import warnings
from datetime import timedelta

import numpy as np
import pytest
from django.conf import settings as django_settings
from django.db import connection, transaction
from django.utils import timezone

from governance import actions as gov_actions
from governance.models import Collection, Document
from memoryapp import masking, ratelimit
from memoryapp.access_log import ENTRY_ARTIFACT
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion, RememberHit
from memoryapp.recall import service as recall_service
from memoryapp.recall.bm25 import bm25_scores
from memoryapp.recall.fusion import rank_by_scores, rrf
from retention import erasure
from retention.models import DeletionReceipt, Operation
from tests.conftest import AgentClient, client_for, make_agent

pytestmark = pytest.mark.django_db


# --- memoryapp/ratelimit.py: SPEC §4.7 and §2 row 11 -----------------------------------------------
# Each limiter is driven directly, with a small limit; the window is aged by moving the stored
# admissions into the past (table rows, or the Redis scores on Redis' own clock), never by waiting.


def _redis_url() -> str | None:
    return django_settings.REDIS_URL or os.environ.get("MUTATION_REDIS_URL")


class _DatabaseWindow:
    def __init__(self):
        self.limiter = ratelimit.DatabaseRateLimiter()

    def age(self, credential_id: int, seconds: float, count: int | None = None, bucket: str = "remember") -> None:
        hits = list(RememberHit.objects.filter(credential_id=credential_id, bucket=bucket).order_by("at", "pk"))
        for hit in hits if count is None else hits[:count]:
            hit.at -= timedelta(seconds=seconds)
            hit.save(update_fields=["at"])

    def stored(self, credential_id: int, bucket: str = "remember") -> int:
        return RememberHit.objects.filter(credential_id=credential_id, bucket=bucket).count()


class _RedisWindow:
    def __init__(self, url: str):
        self.limiter = ratelimit.RedisRateLimiter(url)
        self.limiter._client.ping()

    def age(self, credential_id: int, seconds: float, count: int | None = None, bucket: str = "remember") -> None:
        key = self.limiter._key(credential_id, bucket)
        entries = self.limiter._client.zrange(key, 0, -1 if count is None else count - 1, withscores=True)
        self.limiter._client.zadd(key, {member: score - seconds * 1_000_000 for member, score in entries})

    def stored(self, credential_id: int, bucket: str = "remember") -> int:
        return self.limiter._client.zcard(self.limiter._key(credential_id, bucket))


_next_credential = iter(range(900_000_000, 901_000_000))


@pytest.fixture(params=["database", pytest.param("redis", marks=pytest.mark.redis)])
def window(request, db):
    if request.param == "database":
        return _DatabaseWindow()
    url = _redis_url()
    if not url:
        pytest.skip("backend: no Redis configured (REDIS_URL or MUTATION_REDIS_URL)")
    return _RedisWindow(url)


@pytest.fixture
def credential_id(window):
    cid = next(_next_credential) + os.getpid() % 1000 * 1000
    window.limiter.reset(cid)
    window.limiter.reset(cid, "turn")
    yield cid
    window.limiter.reset(cid)
    window.limiter.reset(cid, "turn")


def test_the_limit_admits_exactly_limit_per_window_and_counts_down(window, credential_id):
    slots = [window.limiter.acquire(credential_id, 3) for _ in range(4)]
    assert [s.allowed for s in slots] == [True, True, True, False]
    assert [s.remaining for s in slots] == [2, 1, 0, 0]
    assert all(s.limit == 3 for s in slots)
    assert window.stored(credential_id) == 3  # a refusal takes no slot


def test_headers_carry_limit_remaining_reset_and_retry_after_only_when_refused(window, credential_id):
    admitted = window.limiter.acquire(credential_id, 2)
    headers = admitted.headers()
    assert headers["RateLimit-Limit"] == "2" and headers["RateLimit-Remaining"] == "1"
    assert 3599 <= int(headers["RateLimit-Reset"]) <= 3600
    assert "Retry-After" not in headers
    window.limiter.acquire(credential_id, 2)
    window.age(credential_id, 1000)
    refused = window.limiter.acquire(credential_id, 2)
    assert not refused.allowed
    headers = refused.headers()
    assert 2599 <= int(headers["RateLimit-Reset"]) <= 2600  # when the oldest admission leaves
    assert headers["Retry-After"] == headers["RateLimit-Reset"]


def test_retry_after_is_at_least_one_second():
    assert ratelimit.Slot(False, 1, 0, 0).headers()["Retry-After"] == "1"
    assert ratelimit.Slot(False, 1, 0, 7).headers()["Retry-After"] == "7"
    assert ratelimit.Slot(True, 1, 0, 0).headers()["RateLimit-Reset"] == "0"


def test_the_window_rolls_over_after_an_hour_and_only_the_aged_admissions_leave(window, credential_id):
    for _ in range(3):
        assert window.limiter.acquire(credential_id, 3).allowed
    window.age(credential_id, 3599, count=1)  # still inside the hour
    assert not window.limiter.acquire(credential_id, 3).allowed
    window.age(credential_id, 2, count=1)  # now 3601 s old: out
    slot = window.limiter.acquire(credential_id, 3)
    assert slot.allowed and slot.remaining == 0
    assert window.stored(credential_id) == 3  # the aged admission was trimmed, not kept
    assert not window.limiter.acquire(credential_id, 3).allowed


def test_a_refund_hands_back_only_the_slot_it_names(window, credential_id):
    first = window.limiter.acquire(credential_id, 2)
    second = window.limiter.acquire(credential_id, 2)
    window.limiter.refund(second)
    assert window.stored(credential_id) == 1
    again = window.limiter.acquire(credential_id, 2)
    assert again.allowed and again.remaining == 0
    window.limiter.refund(first)
    assert window.stored(credential_id) == 1


def test_a_refused_slot_refunds_nothing(window, credential_id):
    window.limiter.acquire(credential_id, 1)
    refused = window.limiter.acquire(credential_id, 1)
    window.limiter.refund(refused)
    assert window.stored(credential_id) == 1


def test_reset_clears_the_remember_budget_of_one_credential_only(window, credential_id):
    other = credential_id + 2
    window.limiter.reset(other)
    window.limiter.acquire(credential_id, 5)
    window.limiter.acquire(other, 5)
    window.limiter.reset(credential_id)  # the default budget is the remembers'
    assert window.stored(credential_id) == 0 and window.stored(other) == 1
    window.limiter.reset(other)


def test_a_turn_slot_is_refunded_to_the_turn_budget(window, credential_id):
    window.limiter.acquire(credential_id, 5)
    turn = window.limiter.acquire(credential_id, 5, "turn")
    window.limiter.refund(turn)
    assert window.stored(credential_id, "turn") == 0 and window.stored(credential_id) == 1


def test_budgets_and_credentials_count_apart(window, credential_id):
    other = credential_id + 1
    window.limiter.reset(other)
    assert window.limiter.acquire(credential_id, 1).allowed
    assert window.limiter.acquire(credential_id, 1, "turn").allowed  # turns never use up remembers
    assert window.limiter.acquire(other, 1).allowed  # per credential
    assert not window.limiter.acquire(credential_id, 1).allowed
    assert not window.limiter.acquire(credential_id, 1, "turn").allowed
    window.limiter.reset(credential_id, "turn")
    assert window.stored(credential_id, "turn") == 0 and window.stored(credential_id) == 1
    window.limiter.reset(other)


def test_the_limiter_follows_the_configured_backend(settings):
    ratelimit._limiter.cache_clear()
    try:
        settings.RATE_LIMIT_BACKEND = "database"
        assert isinstance(ratelimit.get_limiter(), ratelimit.DatabaseRateLimiter)
        url = _redis_url()
        if url:
            settings.RATE_LIMIT_BACKEND, settings.REDIS_URL = "redis", url
            assert isinstance(ratelimit.get_limiter(), ratelimit.RedisRateLimiter)
    finally:
        ratelimit._limiter.cache_clear()


def test_an_unreachable_redis_refuses_instead_of_admitting():
    limiter = ratelimit.RedisRateLimiter("redis://127.0.0.1:1/0")
    with pytest.raises(ratelimit.ApiError) as refused:
        limiter.acquire(1, 120)
    assert refused.value.status == 503 and refused.value.code == "RATE_LIMIT_UNAVAILABLE"
    assert isinstance(refused.value.message, str) and refused.value.message.strip()
    assert refused.value.headers == {"Retry-After": "5"}
    limiter.refund(ratelimit.Slot(True, 1, 0, 1, "h", 1))  # a lost refund is not an error


# --- memoryapp/recall/bm25.py, fusion.py: SPEC §4.4 -------------------------------------------------


def _okapi(query: list[str], docs: list[list[str]], k1: float, b: float) -> list[float]:
    """Okapi BM25 written out from its definition (every idf here is positive)."""
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    scores = []
    for doc in docs:
        score = 0.0
        for term in query:
            df = sum(term in d for d in docs)
            if not df:
                continue
            idf = _math.log((n - df + 0.5) / (df + 0.5))
            tf = doc.count(term)
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avgdl))
        scores.append(score)
    return scores


_CORPUS = [["ship", "osaka", "ship"], ["osaka"], ["tea", "kyoto", "green", "tea", "cup"], ["cup"], ["kyoto"], ["rain"]]


def test_bm25_defaults_are_the_specs_k1_and_b_checked_by_score():
    for query in (["ship"], ["tea", "cup"], ["osaka", "ship", "ship"]):
        expected = _okapi(query, _CORPUS, k1=1.5, b=0.75)
        assert np.allclose(bm25_scores(query, _CORPUS), expected, rtol=1e-12), query
        assert not np.allclose(_okapi(query, _CORPUS, k1=1.2, b=0.75), expected)  # k1 matters here
        assert not np.allclose(_okapi(query, _CORPUS, k1=1.5, b=0.5), expected)  # and b does


def test_recall_ranks_with_the_specs_k1_and_b():
    assert (recall_service.BM25_K1, recall_service.BM25_B) == (1.5, 0.75)
    candidates = [recall_service.Candidate(pk=i, collection_id=None, terms=doc) for i, doc in enumerate(_CORPUS)]
    # "tea cup": BM25 ranks the long two-term memory over the short one-term one; 'rain' shares nothing.
    assert recall_service.lexical_ranking("tea cup", candidates) == [2, 3]


def test_a_query_term_missing_from_every_memory_adds_nothing():
    assert np.allclose(bm25_scores(["ship", "absent"], _CORPUS), bm25_scores(["ship"], _CORPUS))
    assert not bm25_scores(["absent"], _CORPUS).any()
    assert not bm25_scores([], _CORPUS).any() and bm25_scores(["x"], []).size == 0


def test_degenerate_bm25_parameters_score_zero_instead_of_nan_and_warn_nothing():
    # The module's contract (bm25.py): k1 = 0, or b = 1 with an empty memory, makes tf + norm = 0;
    # such a term scores 0, never NaN (a NaN score would poison the fused ranking).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        empty_doc = bm25_scores(["a"], [["a", "b"], [], ["c"], ["d"]], b=1.0)
        no_k1 = bm25_scores(["a"], [["a", "b"], ["b"], ["c"]], k1=0.0)
    assert np.isfinite(empty_doc).all() and empty_doc[1] == 0.0 and empty_doc[0] > 0
    assert np.isfinite(no_k1).all() and no_k1[0] == pytest.approx(_math.log(2.5 / 1.5)) and no_k1[1] == no_k1[2] == 0.0


def test_rrf_score_is_the_sum_of_one_over_60_plus_rank():
    fused = rrf({"bm25": [4, 2], "semantic": [2], "entity": []})
    assert list(fused) == [2, 4]
    assert fused[2] == (1 / 62 + 1 / 61, {"bm25": 2, "semantic": 1})
    assert fused[4] == (1 / 61, {"bm25": 1})
    assert rrf({"bm25": [7]}, k=0)[7][0] == 1.0
    with pytest.raises(ValueError):
        rrf({}, k=-1)


def test_rrf_ties_go_to_the_newer_candidate_and_a_repeat_keeps_its_best_rank():
    fused = rrf({"bm25": [3, 1], "semantic": [1, 3]})
    assert list(fused) == [1, 3]  # same ranks {1, 2}: the lower index (newer) first
    assert rrf({"bm25": [5, 5, 6]})[5] == (1 / 61, {"bm25": 1})
    assert rrf({"bm25": [5, 5, 6]})[6] == (1 / 63, {"bm25": 3})


def test_a_ranking_holds_only_candidates_with_evidence():
    assert rank_by_scores(np.array([0.0, 2.0, -1.0, 2.0, np.nan, 0.5]), positive_only=True) == [1, 3, 5]
    assert rank_by_scores(np.array([np.nan, 1.0, 3.0]), positive_only=False) == [2, 1, 0]
    assert rank_by_scores(np.array([]), positive_only=True) == []
    assert rank_by_scores(np.array([0.7]), positive_only=True) == [0]  # a single candidate is ranked
    assert rank_by_scores(np.array([0.0]), positive_only=False) == [0]


# --- memoryapp/gates.py: SPEC §2 rows 7-10, §4.1, §4.5 ----------------------------------------------


def _refusal(response, status: int, code: str) -> dict:
    """SPEC §3: an error is {"error": {"code", "message", "details"}} with a message to show."""
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"].strip()
    assert isinstance(error["details"], dict)
    return error


@pytest.fixture
def scoped(world):
    """A set holding collection `inside` and one listed document of collection `loose`."""
    inside = gov_actions.create_collection(world.workspace, name="Inside")
    in_doc = gov_actions.create_document(inside, title="in", text="Orders ship from Osaka.")
    loose = gov_actions.create_collection(world.workspace, name="Loose")
    listed = gov_actions.create_document(loose, title="listed", text="Listed in the set.")
    neighbour = gov_actions.create_document(loose, title="neighbour", text="Not in the set.")
    context_set = gov_actions.create_context_set(world.workspace, name="Set", collections=[inside], documents=[listed])
    agent = make_agent(world.editor, context_set=context_set)

    def pid(document):
        return str(document.current_version.passages.first().pk)

    return {"agent": agent, "set": context_set, "inside": inside, "loose": loose, "in": pid(in_doc), "listed": pid(listed), "neighbour": pid(neighbour)}


def test_a_bound_remember_needs_a_collection_or_citations_inside_the_set(scoped):
    agent = scoped["agent"]
    _refusal(agent.remember(namespace="n", text="nowhere"), 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")
    assert agent.remember(namespace="n", text="in the collection", collectionId=str(scoped["inside"].pk)).status_code == 201
    assert agent.remember(namespace="n", text="cites inside", citations=[scoped["in"]]).status_code == 201
    assert agent.remember(namespace="n", text="cites listed", citations=[scoped["listed"]]).status_code == 201
    both = agent.remember(namespace="n", text="both", collectionId=str(scoped["inside"].pk), citations=[scoped["listed"], scoped["in"]])
    assert both.status_code == 201, both.content
    _refusal(agent.remember(namespace="n", text="out", collectionId=str(scoped["loose"].pk)), 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")
    _refusal(agent.remember(namespace="n", text="neighbour", citations=[scoped["neighbour"]]), 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")
    _refusal(agent.remember(namespace="n", text="mixed", citations=[scoped["in"], scoped["neighbour"]]), 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")
    _refusal(agent.remember(namespace="n", text="missing", citations=[scoped["in"], "999999"]), 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")
    _refusal(agent.remember(namespace="n", text="in set, cites out", collectionId=str(scoped["inside"].pk), citations=[scoped["neighbour"]]), 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")


@pytest.mark.parametrize("change", [{"active": False}, {"deleted_at": "now"}])
def test_an_inactive_or_deleted_bound_set_refuses_everything(world, scoped, change):
    agent = scoped["agent"]
    assert agent.list().status_code == 200
    for field, value in change.items():
        setattr(scoped["set"], field, timezone.now() if value == "now" else value)
    scoped["set"].save()
    for response in (agent.list(), agent.recall(query="x"), agent.remember(namespace="n", text="x", collectionId=str(scoped["inside"].pk)), agent.forget(namespace="n", key="k")):
        _refusal(response, 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")


def test_forget_refuses_a_memory_outside_the_set_and_allows_one_inside(world, scoped):
    agent, unbound = scoped["agent"], make_agent(world.editor)
    outside = unbound.remember(namespace="n", key="out", text="outside the set").json()["memory"]
    inside = agent.remember(namespace="n", key="in", text="inside", collectionId=str(scoped["inside"].pk)).json()["memory"]
    _refusal(agent.forget(memoryId=str(outside["id"])), 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")
    assert agent.forget(memoryId=str(inside["id"])).json()["forgotten"] == 1
    assert unbound.forget(memoryId=str(outside["id"])).status_code == 200


def test_recall_and_list_with_a_collection_outside_the_set_are_refused(scoped):
    agent = scoped["agent"]
    for call in (agent.list, agent.recall):
        extra = {} if call == agent.list else {"query": "x"}
        assert call(collectionId=str(scoped["inside"].pk), **extra).status_code == 200
        _refusal(call(collectionId=str(scoped["loose"].pk), **extra), 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")


def test_a_citation_must_be_a_readable_passage_of_the_workspace(world):
    agent = make_agent(world.editor)
    secret = gov_actions.create_collection(world.workspace, name="Secret", restricted=True, readers=[world.owner])
    unreadable = str(gov_actions.create_document(secret, title="s", text="board minutes").current_version.passages.first().pk)
    elsewhere_collection = gov_actions.create_collection(world.other_workspace, name="Elsewhere")
    elsewhere = str(gov_actions.create_document(elsewhere_collection, title="e", text="other workspace").current_version.passages.first().pk)
    readable_collection = gov_actions.create_collection(world.workspace, name="Open")
    readable = str(gov_actions.create_document(readable_collection, title="o", text="Open text.").current_version.passages.first().pk)
    for bad in (unreadable, elsewhere, "999999"):
        error = _refusal(agent.remember(namespace="n", text="x", citations=[readable, bad]), 400, "AGENT_MEMORY_CITATION_INVALID")
        assert error["details"] == {"passageIds": [bad]}
    ok = agent.remember(namespace="n", text="x", citations=[readable])
    assert ok.status_code == 201 and [c["passageId"] for c in ok.json()["memory"]["citations"]] == [readable]


def test_a_collection_must_be_readable_by_the_member_and_in_the_workspace(world):
    agent = make_agent(world.editor)
    secret = gov_actions.create_collection(world.workspace, name="Secret", restricted=True, readers=[world.owner])
    elsewhere = gov_actions.create_collection(world.other_workspace, name="Elsewhere")
    gov_actions.create_collection(world.workspace, name="Open to all")  # another collection being readable proves nothing
    for collection in (secret, elsewhere):
        error = _refusal(agent.remember(namespace="n", text="x", collectionId=str(collection.pk)), 400, "VALIDATION_ERROR")
        assert list(error["details"]["fields"]) == ["collectionId"]
    assert make_agent(world.owner).remember(namespace="n", text="x", collectionId=str(secret.pk)).status_code == 201


def test_personal_data_in_a_name_is_refused_with_the_kinds_per_field(world):
    agent = make_agent(world.editor)
    error = _refusal(agent.remember(namespace="mail jane@example.com", key="call +1 212 555 0199", text="x"), 400, "AGENT_MEMORY_PERSONAL_DATA")
    assert error["details"] == {"fields": {"namespace": ["EMAIL"], "key": ["PHONE"]}}
    assert "jane@example.com" not in json.dumps(error)


def test_details_lines_are_masked_and_a_line_left_empty_is_dropped(world):
    agent = make_agent(world.editor)
    memory = agent.remember(namespace="n", text="How to reach her", details=["mail ada@example.com", "4111 1111 1111 1111", "likes tea"]).json()["memory"]
    assert memory["details"] == ["mail [EMAIL]", "likes tea"]
    assert memory["masked"] == ["CARD", "EMAIL"]
    error = _refusal(agent.remember(namespace="n", text="ada@example.com", details=["likes tea"]), 400, "AGENT_MEMORY_EMPTY")
    assert error["details"] == {"masked": ["EMAIL"]}


# --- memoryapp/visibility.py: SPEC §4.2 re-check, §4.3 asOf, expiry (§8) ------------------------------


def _texts(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [m["text"] for m in response.json()["memories"]]


def test_a_memory_is_hidden_when_its_cited_document_expired_or_became_unreadable(world):
    agent = make_agent(world.editor)
    open_collection = gov_actions.create_collection(world.workspace, name="Open")
    expiring = gov_actions.create_document(open_collection, title="e", text="Expiring text.")
    closing = gov_actions.create_document(open_collection, title="c", text="Closing text.")
    kept = gov_actions.create_document(open_collection, title="k", text="Kept text.")
    for text, document in (("cites expiring", expiring), ("cites closing", closing), ("cites kept", kept)):
        assert agent.remember(namespace="n", text=text, citations=[str(document.current_version.passages.first().pk)]).status_code == 201
    assert agent.remember(namespace="n", text="no citation").status_code == 201
    Document.objects.filter(pk=expiring.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    restricted = gov_actions.create_collection(world.workspace, name="Board", restricted=True, readers=[world.owner])
    Document.objects.filter(pk=closing.pk).update(collection=restricted)
    listed = agent.list()
    assert _texts(listed) == ["no citation", "cites kept"] and listed.json()["hidden"] == 2
    recalled = agent.recall(query="cites text")
    assert set(_texts(recalled)) <= {"no citation", "cites kept"} and recalled.json()["hidden"] == 2
    Document.objects.filter(pk=expiring.pk).update(expires_at=timezone.now() + timedelta(hours=1))  # not yet expired
    assert "cites expiring" in _texts(agent.list())


def test_a_memory_in_a_collection_the_member_can_no_longer_read_is_hidden(world):
    agent = make_agent(world.editor)
    collection = gov_actions.create_collection(world.workspace, name="Team")
    assert agent.remember(namespace="n", text="team note", collectionId=str(collection.pk)).status_code == 201
    assert _texts(agent.list()) == ["team note"]
    Collection.objects.filter(pk=collection.pk).update(restricted=True)
    listed = agent.list()
    assert _texts(listed) == [] and listed.json()["hidden"] == 1


def test_a_newer_document_version_marks_only_that_citation_changed(world):
    agent = make_agent(world.editor)
    collection = gov_actions.create_collection(world.workspace, name="Docs")
    moving = gov_actions.create_document(collection, title="m", text="Version one.")
    still = gov_actions.create_document(collection, title="s", text="Still here.")
    citations = [str(moving.current_version.passages.first().pk), str(still.current_version.passages.first().pk)]
    assert agent.remember(namespace="n", text="two sources", citations=citations).status_code == 201
    assert agent.remember(namespace="n", text="no sources").status_code == 201
    memories = {m["text"]: m for m in agent.list().json()["memories"]}
    assert memories["two sources"]["sourceState"] == "current" and memories["no sources"]["sourceState"] is None
    gov_actions.add_document_version(moving, text="Version two.")
    memory = {m["text"]: m for m in agent.list().json()["memories"]}["two sources"]
    assert memory["sourceState"] == "changed"
    assert [c["sourceState"] for c in memory["citations"]] == ["changed", "current"]  # in citation order


def test_as_of_returns_the_version_current_at_that_instant_bounds_included_and_excluded(world, time_machine):
    agent = make_agent(world.editor)
    start = timezone.now().replace(microsecond=0)
    time_machine.move_to(start, tick=False)
    agent.remember(namespace="n", key="k", text="first")
    time_machine.move_to(start + timedelta(minutes=1), tick=False)
    agent.remember(namespace="n", key="k", text="second")
    time_machine.move_to(start + timedelta(minutes=2), tick=False)

    def at(instant):
        return _texts(agent.list(asOf=instant.isoformat()))

    assert at(start - timedelta(seconds=1)) == []
    assert at(start) == ["first"]  # validFrom <= asOf
    assert at(start + timedelta(seconds=59)) == ["first"]
    assert at(start + timedelta(minutes=1)) == ["second"]  # asOf < validTo: the closed one is out
    assert _texts(agent.list()) == ["second"]


def test_a_memory_expires_exactly_retention_days_after_its_anchor(world, time_machine):
    agent = make_agent(world.editor)
    start = timezone.now().replace(microsecond=0)
    time_machine.move_to(start, tick=False)
    memory = agent.remember(namespace="n", text="short lived").json()["memory"]
    days = world.workspace.ask_history.agent_memory_retention_days
    assert memory["expiresAt"].replace("Z", "+00:00") == (start + timedelta(days=days)).isoformat()
    time_machine.move_to(start + timedelta(days=days) - timedelta(seconds=1), tick=False)
    assert _texts(agent.list()) == ["short lived"]
    time_machine.move_to(start + timedelta(days=days), tick=False)
    assert _texts(agent.list()) == []


def test_list_filters_by_namespace_key_and_collection(world):
    agent = make_agent(world.editor)
    collection = gov_actions.create_collection(world.workspace, name="C")
    agent.remember(namespace="a", key="x", text="a x")
    agent.remember(namespace="a", key="y", text="a y", collectionId=str(collection.pk))
    agent.remember(namespace="b", key="x", text="b x")
    assert _texts(agent.list(namespace="a")) == ["a y", "a x"]
    assert _texts(agent.list(key="x")) == ["b x", "a x"]
    assert _texts(agent.list(namespace="a", key="x")) == ["a x"]
    assert _texts(agent.list(collectionId=str(collection.pk))) == ["a y"]


# --- retention/erasure.py: SPEC §8 erasure with receipts ---------------------------------------------


def _memories(world, count: int, *, cite: bool = True) -> list[int]:
    agent = make_agent(world.editor)
    collection = gov_actions.create_collection(world.workspace, name="Cited")
    passage = str(gov_actions.create_document(collection, title="d", text="Cited text.").current_version.passages.first().pk)
    ids = []
    for i in range(count):
        body = {"citations": [passage]} if cite else {}
        ids.append(agent.remember(namespace="n", text=f"memory {i}", **body).json()["memory"]["id"])
    return [int(i) for i in ids]


def test_an_erase_deletes_every_artifact_and_its_receipt_says_so(world, settings):
    settings.BACKUP_RETENTION_DAYS = 7
    ids = _memories(world, 3)
    before = erasure.verify(ids)
    assert before["clean"] is False and before["remaining"]["memory_version"] == 3 and before["remaining"]["citation"] == 3
    receipt = erasure.erase_memories(ids + ids[:1], operation=Operation.FORGET, workspace_id=world.workspace.pk, actor_label="agent", member_id=world.editor.pk)
    artifacts = receipt.manifest["artifacts"]
    assert (artifacts["memory_version"], artifacts["citation"], artifacts["memory_embedding"]) == (3, 3, 3)
    assert receipt.manifest["requestedIds"] == 3 and sorted(receipt.memory_version_ids) == sorted(ids)
    assert receipt.versions_erased == 3 and receipt.operation == Operation.FORGET
    assert receipt.workspace_ref == world.workspace.pk and receipt.member_ref == world.editor.pk and receipt.actor_label == "agent"
    assert receipt.verification["clean"] is True and not any(receipt.verification["remaining"].values())
    assert receipt.unreachable_at == receipt.purged_at and receipt.requested_at <= receipt.purged_at
    assert receipt.residual == erasure.residual_window(receipt.purged_at)
    assert receipt.residual["backups"]["until"] == (receipt.purged_at + timedelta(days=7)).isoformat()
    assert receipt.verification["remaining"][ENTRY_ARTIFACT] == 0 and "checkedAt" in receipt.verification
    assert receipt.actor is None and receipt.actor_label == "agent"  # no user acted
    assert not MemoryVersion.objects.filter(pk__in=ids).exists()
    assert erasure.erase_memories(ids, operation=Operation.FORGET, workspace_id=world.workspace.pk, actor_label="agent") is None  # nothing left: no receipt


def test_a_dedupe_key_gives_one_receipt_for_one_piece_of_work(world):
    first, second = _memories(world, 2, cite=False)
    earlier = _memories(world, 1, cite=False)
    assert erasure.erase_memories(earlier, operation=Operation.FORGET, workspace_id=world.workspace.pk, actor_label="agent") is not None  # no key
    kwargs = {"operation": Operation.EXPIRY, "workspace_id": world.workspace.pk, "actor_label": "sweep", "dedupe_key": "expiry:x"}
    assert erasure.erase_memories([first], **kwargs) is not None
    assert erasure.erase_memories([second], **kwargs) is None
    assert MemoryVersion.objects.filter(pk=second).exists()
    assert DeletionReceipt.objects.filter(dedupe_key="expiry:x").count() == 1


def test_the_receipt_keeps_the_earliest_moment_the_memories_became_unreachable(world):
    ids = _memories(world, 2, cite=False)
    stated = timezone.now() - timedelta(days=3)
    earlier = stated - timedelta(days=1)
    MemoryVersion.objects.filter(pk=ids[0]).update(unreachable_at=earlier)
    receipt = erasure.erase_memories(ids, operation=Operation.CASCADE_DOCUMENT, workspace_id=world.workspace.pk, actor_label="x", unreachable_at=stated)
    assert receipt.unreachable_at == earlier
    later = _memories(world, 1, cite=False)
    MemoryVersion.objects.filter(pk=later[0]).update(unreachable_at=stated + timedelta(days=1))
    receipt = erasure.erase_memories(later, operation=Operation.CASCADE_DOCUMENT, workspace_id=world.workspace.pk, actor_label="x", unreachable_at=stated)
    assert receipt.unreachable_at == stated  # a later mark does not move it


def test_chunked_erasure_takes_every_row_once_one_receipt_per_chunk(world):
    ids = _memories(world, 5, cite=False)
    tally = erasure.erase_in_chunks(
        MemoryVersion.objects.filter(pk__in=ids),
        operation=Operation.MEMBER_DELETE,
        workspace_id=world.workspace.pk,
        member_id=world.editor.pk,
        actor_label="member",
        filters={"all": True},
        chunk=2,
    )
    assert (tally.versions, tally.receipts, tally.chunks) == (5, 3, 3)
    receipts = DeletionReceipt.objects.filter(operation=Operation.MEMBER_DELETE)
    assert sorted(len(r.memory_version_ids) for r in receipts) == [1, 2, 2]
    assert all(r.manifest["filters"] == {"all": True} for r in receipts)
    assert len({r.requested_at for r in receipts}) == 1  # one request, several chunks
    assert not MemoryVersion.objects.filter(pk__in=ids).exists()


def test_chunked_expiry_states_the_computed_expiry_as_unreachable(world):
    ids = _memories(world, 2, cite=False)
    anchors = sorted(MemoryVersion.objects.filter(pk__in=ids).values_list("retention_anchor", flat=True))
    erasure.erase_in_chunks(
        MemoryVersion.objects.filter(pk__in=ids), operation=Operation.EXPIRY, workspace_id=world.workspace.pk, member_id=None, actor_label="sweep", filters={}, expired_after_days=30
    )
    receipt = DeletionReceipt.objects.get(operation=Operation.EXPIRY)
    assert receipt.unreachable_at == anchors[0] + timedelta(days=30)


def test_an_admin_erase_of_a_member_erases_all_and_audits_the_count(world):
    from governance.audit import actor_label
    from governance.models import AuditEvent
    from retention.previews import erase_member_memories

    ids = _memories(world, 2)
    assert erase_member_memories(world.editor, actor=world.owner.user, reason="request") == 2
    assert not MemoryVersion.objects.filter(pk__in=ids).exists()
    receipt = DeletionReceipt.objects.get(operation=Operation.ADMIN_ERASE)
    assert receipt.manifest["filters"] == {"member": world.editor.pk, "reason": "request"}
    assert receipt.actor == world.owner.user and receipt.actor_label == actor_label(world.owner.user)
    assert receipt.member_ref == world.editor.pk and receipt.workspace_ref == world.workspace.pk
    event = AuditEvent.objects.get(action="memories.admin_erased")
    assert event.changes == {"versions": 2} and event.reason == "request"
    assert event.actor == world.owner.user and event.target == f"member #{world.editor.pk}" and event.workspace == world.workspace
    assert erase_member_memories(world.editor, actor=world.owner.user) == 0


def test_reverifying_a_receipt_finds_it_clean_and_audits_the_check(world):
    from governance.models import AuditEvent

    ids = _memories(world, 1)
    receipt = erasure.erase_memories(ids, operation=Operation.FORGET, workspace_id=world.workspace.pk, actor_label="agent")
    result = erasure.reverify_receipt(receipt, actor=world.owner.user, reason="audit")
    assert result["clean"] is True
    receipt.refresh_from_db()
    assert receipt.verification == result
    event = AuditEvent.objects.get(action="receipt.reverified")
    assert event.changes["clean"] == [True, True] and event.reason == "audit"


# --- memoryapp/masking/__init__.py: SPEC §4.1 ----------------------------------------------------
def test_overlapping_detections_are_merged_never_dropped_and_keep_the_first_kind():
    # Whatever two detectors overlap on is masked as one span: no part of either stays visible.
    assert masking._select([(5, 9, "PHONE"), (0, 6, "CARD")]) == [(0, 9, "CARD")]
    assert masking._select([(0, 4, "NUMBER"), (0, 8, "CARD")]) == [(0, 8, "CARD")]  # longest on ties
    assert masking._select([(0, 4, "EMAIL"), (4, 8, "PHONE")]) == [(0, 4, "EMAIL"), (4, 8, "PHONE")]  # touching, not overlapping
    assert masking._select([(3, 3, "EMAIL"), (2, 1, "EMAIL")]) == []  # empty spans are nothing
    assert masking._select([(3, 3, "EMAIL"), (5, 9, "PHONE")]) == [(5, 9, "PHONE")]  # and do not stop the rest
    assert masking._select([(0, 10, "SECRET"), (2, 4, "EMAIL"), (6, 12, "PHONE")]) == [(0, 12, "SECRET")]


def test_mask_replaces_each_value_with_its_typed_placeholder_and_reports_sorted_kinds():
    result = masking.mask("Write ada@example.com or bo@example.org, card 4111 1111 1111 1111.")
    assert result.text == "Write [EMAIL] or [EMAIL], card [CARD]."
    assert result.kinds == ("CARD", "EMAIL")
    assert masking.mask("a@example.com,b@example.com").text == "[EMAIL],[EMAIL]"
    clean = masking.mask("Nothing personal here.")
    assert clean == masking.MaskResult("Nothing personal here.", ())
    assert masking.mask(result.text) == masking.MaskResult(result.text, ())  # idempotent: placeholders are not data
    with pytest.raises(TypeError):
        masking.mask(b"ada@example.com")


def test_contains_personal_data_and_detect_kinds_agree_with_mask():
    assert masking.contains_personal_data("call +1 212 555 0199") and masking.detect_kinds("call +1 212 555 0199") == ("PHONE",)
    assert not masking.contains_personal_data("call me later") and masking.detect_kinds("call me later") == ()


@pytest.mark.parametrize(
    ("masked", "empty"),
    [("[EMAIL]", True), ("[EMAIL] [PHONE]、。「」!?", True), ("  \u200b\t", True), ("", True), ("[EMAIL] a", False), ("[CARD] 5", False), ("[EMAIL] 東京", False), ("[SECRET] \u0301", False)],
)
def test_only_placeholders_spaces_punctuation_and_symbols_count_as_empty(masked, empty):
    assert masking.is_effectively_empty(masked) is empty


def test_a_bound_credential_sees_only_memories_inside_its_set(world, scoped):
    """§4.5: inside = in one of the set's collections, or cited; and every citation's document in
    the set (listed, or in a listed collection)."""
    unbound, agent = make_agent(world.editor), scoped["agent"]
    inside, loose = str(scoped["inside"].pk), str(scoped["loose"].pk)
    bodies = {
        "in collection": {"collectionId": inside},
        "cites inside": {"citations": [scoped["in"]]},
        "cites listed": {"citations": [scoped["listed"]]},
        "nowhere": {},
        "in collection, cites outside": {"collectionId": inside, "citations": [scoped["neighbour"]]},
        "outside collection, cites listed": {"collectionId": loose, "citations": [scoped["listed"]]},
        "cites listed and outside": {"citations": [scoped["listed"], scoped["neighbour"]]},
        "outside collection": {"collectionId": loose},
    }
    ids = {}
    for text, body in bodies.items():
        response = unbound.remember(namespace="n", text=f"{text} memo", **body)
        assert response.status_code == 201, response.content
        ids[text] = response.json()["memory"]["id"]
    expected = {"in collection memo", "cites inside memo", "cites listed memo"}
    assert set(_texts(agent.list(limit=50))) == expected
    assert set(_texts(agent.recall(query="memo collection cites listed inside outside nowhere", limit=50))) <= expected
    for text in ("nowhere", "in collection, cites outside", "outside collection, cites listed", "cites listed and outside"):
        _refusal(agent.forget(memoryId=str(ids[text])), 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")


# --- memoryapp/masking/text.py, common.py: SPEC §4.1 "look-alikes, full-width digits and invisible
# characters do not hide a value"; what is not replaced stays exactly as written ------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail ada\u200b@example.com now", "mail [EMAIL] now"),  # zero-width space inside
        ("mail ada@exa\u00admple.com", "mail [EMAIL]"),  # soft hyphen inside: covered by the placeholder
        ("mail ada@example\u3002com", "mail [EMAIL]"),  # ideographic full stop
        ("mail ada\ufe6bexample.com", "mail [EMAIL]"),  # small commercial at
        ("mail ada\ufe0f@example.com", "mail [EMAIL]"),  # variation selector
        ("mail ada@exam\U000e0100ple.com", "mail [EMAIL]"),  # variation selector supplement
        ("card ４１１１ １１１１ １１１１ １１１１", "card [CARD]"),  # full-width digits
        ("card 4111\u20131111\u20131111\u20131111", "card [CARD]"),  # en dashes
        ("card \U0001d7d2\U0001d7cf\U0001d7cf\U0001d7cf 1111 1111 1111", "card [CARD]"),  # mathematical digits
        ("id \u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669\u0660\u0661\u0662", "id [NUMBER]"),  # Arabic-Indic digits
        ("Ｔｅｌｌ ｍｅ ada@example.com", "Ｔｅｌｌ ｍｅ [EMAIL]"),  # the rest stays as written
        ("привет ada@example.com", "привет [EMAIL]"),  # a Cyrillic word is not folded
    ],
)
def test_normalisation_does_not_let_a_value_hide_and_keeps_the_rest(text, expected):
    assert masking.mask(text).text == expected


def test_look_alike_letters_in_a_label_do_not_hide_a_secret():
    masked = masking.mask("p\u0430ssword: Tr0ub4dor&3xyz")  # Cyrillic а in "password"
    assert "SECRET" in masked.kinds and "Tr0ub4dor" not in masked.text
    assert masked.text.startswith("p\u0430ssword")  # the label itself stays as written


def test_digits_joined_by_underscores_or_middle_dots_are_still_one_number():
    for text in ("ref 054_123_4567_89", "ref 054\u00b7123\u00b74567\u00b789"):
        masked = masking.mask(text)
        assert masked.kinds and not any(ch.isdigit() for ch in masked.text), text


def test_dates_and_short_numbers_are_not_personal_data():
    for text in ("on 2024-05-03", "on 03.05.2024", "on 5/3/24", "room 1204", "version 10.2.3"):
        assert masking.mask(text).text == text, text


def test_chunked_erasure_with_one_row_per_chunk_ends_and_keeps_a_rows_unreachable_mark(world):
    ids = _memories(world, 2, cite=False)
    marked = timezone.now() - timedelta(hours=5)
    MemoryVersion.objects.filter(pk=ids[1]).update(unreachable_at=marked)
    tally = erasure.erase_in_chunks(
        MemoryVersion.objects.filter(pk__in=ids),
        operation=Operation.CASCADE_DOCUMENT,
        workspace_id=world.workspace.pk,
        member_id=world.editor.pk,
        actor_label="cascade",
        filters={},
        chunk=1,
    )
    assert (tally.versions, tally.receipts, tally.chunks) == (2, 2, 2)  # and the run ends (an empty pick stops it)
    receipt = DeletionReceipt.objects.get(memory_version_ids=[ids[1]])
    assert receipt.unreachable_at == marked


def test_tallies_add_up():
    total = erasure.Tally(1, 2, 3)
    assert total.add(erasure.Tally(4, 5, 6)) is total
    assert (total.versions, total.receipts, total.chunks) == (5, 7, 9)


@pytest.mark.parametrize("backup_days", [0, 1, 7])
def test_a_receipt_states_what_may_still_hold_the_erased_bytes_and_until_when(settings, backup_days):
    settings.BACKUP_RETENTION_DAYS, settings.WAL_ARCHIVE_RETENTION_DAYS = backup_days, 3
    purged = timezone.now()
    window = erasure.residual_window(purged)
    vendor = connection.vendor
    assert set(window) == ({"database", "backups", "walArchives"} if vendor == "postgresql" else {"database", "backups"})
    assert window["database"]["engine"] == vendor and window["database"]["statement"]
    backups = window["backups"]
    assert backups["retentionDays"] == backup_days
    assert backups["until"] == (None if backup_days == 0 else (purged + timedelta(days=backup_days)).isoformat())
    assert backups["statement"] and (backup_days == 0 or f"{backup_days} days" in backups["statement"])
    if vendor == "postgresql":
        assert window["walArchives"]["retentionDays"] == 3 and window["walArchives"]["until"] == (purged + timedelta(days=3)).isoformat()


@pytest.mark.django_db(transaction=True)
def test_space_is_reclaimed_on_postgresql_only_and_never_inside_a_transaction():
    assert erasure.reclaim_erased_space() is (connection.vendor == "postgresql")
    with transaction.atomic():
        assert erasure.reclaim_erased_space() is False
        assert erasure.checkpoint_sqlite_wal() is False
    if connection.vendor == "sqlite":
        assert erasure.checkpoint_sqlite_wal() is True


# A calendar date is never a phone or account number (masking/common.py is_date: one separator,
# year first or day/month first, real month and day ranges, an optional hour).
@pytest.mark.parametrize(
    ("text", "is_date"),
    [
        ("2024-05-03", True),
        ("2024-01-01", True),
        ("2024-12-31", True),
        ("2024-05-03 12", True),
        ("2024-05-03T12", True),
        ("2024-13-01", False),
        ("2024-00-10", False),
        ("2024-01-32", False),
        ("2024-01-00", False),
        ("2024-13-15", False),
        ("0012-20-05", False),  # four digits first: a year, so 20 is a month
        ("01.01.2024", True),
        ("31.12.2024", True),
        ("12/31/2024", True),
        ("05.20.2024", True),
        ("5/3/24", True),
        ("32.01.2024", False),
        ("13.13.2024", False),
        ("32.05.2024", False),
        ("00.01.2024", False),
        ("01/13/2024", True),
        ("05.32.2024", False),
        ("13.01.2024", True),
        ("2024-05/03", False),
        ("12345", False),
        ("1.2", False),
    ],
)
def test_what_counts_as_a_calendar_date(text, is_date):
    from memoryapp.masking.common import is_date as date_check

    assert date_check(text) is is_date


@pytest.mark.parametrize(
    ("written", "read_as"),
    [
        # invisible: left out (category Cf, the extra list, both variation-selector blocks, their ends included)
        ("a\u200bb", "ab"),
        ("a\u00adb", "ab"),
        ("a\u034fb", "ab"),
        ("a\u3164b", "ab"),
        ("a\u2800b", "ab"),
        ("a\ufe00b", "ab"),
        ("a\ufe0fb", "ab"),
        ("a\U000e0100b", "ab"),
        ("a\U000e01efb", "ab"),
        # just outside those blocks: kept as written
        ("a\ufe10b", "a\ufe10b"),
        ("a\U000e01f0b", "a\U000e01f0b"),
        # full-width ASCII, its first and last characters; just past it: kept
        ("\uff01\uff5e\uff20\uff11", "!~@1"),
        ("\uff5f", "\uff5f"),
        # dashes, spaces, digits of other scripts, compatibility letters and digits, special stops
        ("\u2010\u2212", "--"),
        ("a\u00a0b\u3000c", "a b c"),
        ("\u0663\u096a", "34"),
        ("\U0001d400\u2460", "A1"),
        ("\u3002\u2028", ".\n"),
        ("é", "é"),
        # a separator between digits
        ("054_123\u00b74567", "054-123-4567"),
        ("a_b", "a_b"),
        ("5_x", "5_x"),
    ],
)
def test_the_normalised_copy_detectors_read(written, read_as):
    from memoryapp.masking.text import Work

    work = Work.of(written)
    assert work.text == read_as
    assert len(work.starts) == len(work.ends) == len(work.text)
    assert all(0 <= s < e <= len(written) for s, e in zip(work.starts, work.ends))


def test_nothing_to_show_hides_nothing(world):
    listed = make_agent(world.editor).list().json()
    assert listed["memories"] == [] and listed["hidden"] == 0
    recalled = make_agent(world.editor).recall(query="anything").json()
    assert recalled["memories"] == [] and recalled["hidden"] == 0


def test_the_members_agent_memories_leave_out_assistant_memories(world):
    agent = make_agent(world.editor)
    agent.remember(namespace="travel", text="agent memory")
    assert agent.remember(namespace=ASSISTANT_NAMESPACE, key="tea", source="user_request", kind="preference", text="likes green tea").status_code == 201
    api = client_for(world.editor)
    listed = api.get(f"/api/w/{world.workspace.pk}/ask-history/agent-memories").json()["memories"]
    assert [m["text"] for m in listed] == ["agent memory"]
    assert set(_texts(agent.list())) == {"agent memory", "likes green tea"}  # agents read both (README decision)


def test_lists_are_newest_first_by_creation_then_by_id(world, time_machine):
    agent = make_agent(world.editor)
    start = timezone.now().replace(microsecond=0)
    time_machine.move_to(start + timedelta(minutes=5), tick=False)
    agent.remember(namespace="n", text="created later, stored first")
    time_machine.move_to(start, tick=False)
    agent.remember(namespace="n", text="created earlier, stored second")
    agent.remember(namespace="n", text="same instant, stored third")
    time_machine.move_to(start + timedelta(minutes=10), tick=False)
    assert _texts(agent.list()) == ["created later, stored first", "same instant, stored third", "created earlier, stored second"]


# gates rows 1-6 (SPEC §2): who may call at all, and with what
def test_rows_1_to_3_refuse_with_their_codes_and_details(world, time_machine):
    _refusal(AgentClient("").remember(namespace="n", text="x"), 401, "UNAUTHENTICATED")
    revoked_credential, revoked_token = gov_actions.create_credential(world.editor, name="r", scopes=["memory:read", "memory:write"])
    gov_actions.revoke_credential(revoked_credential, actor=world.editor.user)
    _refusal(AgentClient(revoked_token).list(), 401, "UNAUTHENTICATED")
    _, expiring_token = gov_actions.create_credential(world.editor, name="e", scopes=["memory:read"], expires_at=timezone.now() + timedelta(hours=1))
    assert AgentClient(expiring_token).list().status_code == 200
    time_machine.move_to(timezone.now() + timedelta(hours=2))
    _refusal(AgentClient(expiring_token).list(), 401, "UNAUTHENTICATED")
    time_machine.move_to(timezone.now() - timedelta(hours=2))
    reader = make_agent(world.editor, scopes=("memory:read",))
    error = _refusal(reader.remember(namespace="n", text="x"), 403, "INSUFFICIENT_SCOPE")
    assert error["details"] == {"requiredScope": "memory:write"}
    writer = make_agent(world.editor)
    gov_actions.change_role(world.editor, "viewer", actor=world.owner.user)
    error = _refusal(writer.remember(namespace="n", text="x"), 403, "INSUFFICIENT_ROLE")
    assert error["details"] == {"requiredScope": "memory:write", "role": "viewer"}
    assert writer.list().status_code == 200  # reading is still allowed to a viewer


def test_row_5_names_which_switch_is_off(world):
    agent = make_agent(world.editor)
    gov_actions.set_remember_me(world.editor, False)
    assert _refusal(agent.list(), 403, "AGENT_MEMORY_DISABLED")["details"] == {"reason": "member"}
    gov_actions.update_settings(world.workspace, {"agentMemoriesEnabled": False}, actor=world.owner.user)
    assert _refusal(agent.list(), 403, "AGENT_MEMORY_DISABLED")["details"] == {"reason": "workspace"}
    gov_actions.set_ai_memory_available(world.workspace, False, actor=None)
    assert _refusal(agent.list(), 403, "AGENT_MEMORY_DISABLED")["details"] == {"reason": "organization"}


def test_row_6_a_body_that_is_not_an_object_is_a_validation_error(world):
    agent = make_agent(world.editor)
    error = _refusal(agent.call("remember", raw=b"[1, 2]"), 400, "VALIDATION_ERROR")
    assert list(error["details"]["fields"]) == ["non_field_errors"]


# --- memoryapp/recall/service.py: SPEC §4.4 cosine over comparable vectors only -----------------------
def test_the_cosine_ranking_compares_only_vectors_of_the_query_embedder_and_dimension(settings):
    # A stored vector of another embedder (even of the same dimension, even identical) or of
    # another dimension is no evidence until `reembed` replaces it; a row without a vector is
    # left out too. Only the comparable one is ranked.
    from memoryapp.recall.embedders import PendingQuery, get_embedder
    from memoryapp.recall.service import Candidate, semantic_ranking

    settings.SEMANTIC_BUDGET_SECONDS = 30
    embedder = get_embedder("hashing")
    query = "which tea does she like"
    vector = embedder.embed_queries([query])[0].astype("<f4")
    same = vector.tobytes()
    candidates = [
        Candidate(pk=1, collection_id=None, embedder_id="another-model-v1", dim=vector.shape[0], vector=same),
        Candidate(pk=2, collection_id=None, embedder_id=embedder.id, dim=vector.shape[0] // 2, vector=vector[: vector.shape[0] // 2].tobytes()),
        Candidate(pk=3, collection_id=None, embedder_id=embedder.id, dim=vector.shape[0], vector=None),
        Candidate(pk=4, collection_id=None, embedder_id=embedder.id, dim=vector.shape[0], vector=same),
    ]
    ranked, degraded = semantic_ranking(query, candidates, PendingQuery(embedder, query))
    assert degraded is None
    assert [candidates[i].pk for i in ranked] == [4]


# --- memoryapp/actions.py: SPEC §8 the owner's bulk delete -----------------------------------------------
def test_the_owners_bulk_delete_receipts_name_the_owner_and_the_answer_adds_them_up(world):
    # Each member's receipt says who erased (the owner, by account and label); the answer's
    # totals are exactly the receipts' artifacts added up, nothing more.
    from governance.audit import actor_label

    make_agent(world.owner).remember(namespace="n", text="the owner's own note")
    editor = make_agent(world.editor)
    editor.remember(namespace="n", text="a note of the editor")
    editor.remember(namespace="m", text="another note of the editor")
    response = client_for(world.owner).delete(f"/api/w/{world.workspace.pk}/ask-history/settings/agent-memories")
    assert response.status_code == 200, response.content
    receipts = list(DeletionReceipt.objects.filter(pk__in=[int(i) for i in response.json()["receiptIds"]]))
    assert len(receipts) == 2 and {r.member_ref for r in receipts} == {world.owner.pk, world.editor.pk}
    assert all(r.actor == world.owner.user and r.actor_label == actor_label(world.owner.user) for r in receipts)
    added: dict[str, int] = {}
    for receipt in receipts:
        for artifact, count in receipt.manifest["artifacts"].items():
            added[artifact] = added.get(artifact, 0) + count
    assert response.json()["deleted"] == added and added["memory_version"] == 3
