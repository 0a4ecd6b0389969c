"""SPEC §4.4 recall through the agent endpoint: the three rankings and their fusion, degraded
semantic ranking, hidden/considered counts, asOf, filters, limit, the response shape, RRF
arithmetic, ties, the 300-candidate window and member isolation."""

from __future__ import annotations

import math
import threading
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone
from rank_bm25 import BM25Okapi

from governance import actions
from governance.models import Document
from memoryapp.models import MemoryEmbedding, MemoryVersion
from memoryapp.recall import service
from memoryapp.recall import service as recall_service
from memoryapp.recall.index import index_entry
from memoryapp.recall.stopwords import content_terms
from memoryapp.recall.tokenize import stem_terms, tokenize
from tests.recall.support import _CORPUS, position, recall_ok, remember_ok, texts
from tests.support import make_agent

MEMORY_KEYS = {
    "id",
    "type",
    "evidence",
    "trust",
    "namespace",
    "key",
    "text",
    "kind",
    "details",
    "source",
    "collectionId",
    "citations",
    "sourceState",
    "version",
    "validFrom",
    "validTo",
    "createdAt",
    "expiresAt",
    "masked",
}

DISTRACTORS = [
    "Drinks two cups of black coffee every morning before standup.",
    "Takes Spanish lessons on Saturday mornings.",
    "Tracks tasks in Linear, not Jira.",
    "Writes design docs in Notion.",
    "Runs a half marathon every spring.",
    "Presents slides with Keynote rather than PowerPoint.",
    "Books flights with Alaska Airlines to collect miles.",
    "毎週水曜日の10時に定例ミーティングがある。",
    "タスク管理にはBacklogを使っている。",
    "Mentors two junior developers, Priya and Tom.",
]


@pytest.fixture
def knowledge(world):
    """Entities (with Japanese aliases) and documents whose passages mention them."""
    actions.create_entity(world.workspace, name="Contoso", aliases=["Contoso Ltd", "コントソ"])
    actions.create_entity(world.workspace, name="Project Aurora", aliases=["Aurora", "オーロラ計画"])
    collection = actions.create_collection(world.workspace, name="Accounts")
    contoso = actions.create_document(
        collection,
        title="Contoso account",
        text="Contoso renews its enterprise contract every April.\n\nContoso procurement requires a purchase order "
        "number on every invoice.",
    )
    aurora = actions.create_document(
        collection,
        title="Aurora brief",
        text="Project Aurora moves the portal to the new payments stack; the pilot customer is Contoso.",
    )
    misc = actions.create_document(collection, title="Office", text="The office closes at six on Fridays.")
    passages = {
        "contoso_renewal": contoso.current_version.passages.get(position=0),
        "contoso_invoice": contoso.current_version.passages.get(position=1),
        "aurora": aurora.current_version.passages.get(position=0),
        "office": misc.current_version.passages.get(position=0),
    }
    return collection, {"contoso": contoso, "aurora": aurora, "office": misc}, passages


class BlockingEmbedder:
    """An embedder that does not answer until released: the query embedding misses any budget."""

    id = "hashing-v1-256"
    dim = 256

    def __init__(self):
        self.release = threading.Event()

    def embed(self, texts):
        self.release.wait(10)
        return np.zeros((len(texts), self.dim), dtype=np.float32)


@pytest.fixture
def slow_embedder(monkeypatch, settings):
    embedder = BlockingEmbedder()
    monkeypatch.setattr(service, "get_embedder", lambda name: embedder)
    settings.SEMANTIC_BUDGET_SECONDS = 0
    yield embedder
    embedder.release.set()


# --- the three rankings ----------------------------------------------------------------------------
def test_exact_words_rank_first(agent):
    for text in DISTRACTORS[:6]:
        remember_ok(agent, namespace="prefs", text=text)
    target = "Prefers dark mode in every editor and terminal."
    remember_ok(agent, namespace="prefs", text=target)
    for text in DISTRACTORS[6:]:
        remember_ok(agent, namespace="prefs", text=text)
    body = recall_ok(agent, query="dark mode editor")
    top = body["memories"][0]
    assert top["text"] == target
    assert top["ranks"]["bm25"] == 1 and top["ranks"]["semantic"] == 1
    assert top["ranks"]["entity"] is None
    assert body["considered"] == len(DISTRACTORS) + 1 and body["hidden"] == 0 and body["degraded"] == []


def test_exact_japanese_words_rank_first(agent):
    for text in DISTRACTORS:
        remember_ok(agent, namespace="prefs", text=text)
    remember_ok(agent, namespace="prefs", text="火曜日の夜は英会話教室に通っている。")
    remember_ok(agent, namespace="prefs", text="毎朝、抹茶ラテを一杯飲むのが習慣。")
    body = recall_ok(agent, query="英会話教室")
    assert body["memories"][0]["text"] == "火曜日の夜は英会話教室に通っている。"
    assert body["memories"][0]["ranks"]["bm25"] == 1


@pytest.mark.parametrize(
    "query, target",
    [
        ("Can she eat meat?", "Vegetarian; avoid booking steakhouses for team dinners."),
        ("Which cloud provider hosts our containers?", "Runs the Kubernetes clusters on GKE."),
    ],
)
def test_paraphrase_near_the_top_with_minilm(agent, world, settings, query, target):
    settings.MEMORY_EMBEDDER = "minilm"  # before remembering: stored and query vectors are both MiniLM
    settings.SEMANTIC_BUDGET_SECONDS = 30  # this test is about ranking, not about a loaded machine
    for text in DISTRACTORS[:5]:
        remember_ok(agent, namespace="notes", text=text)
    remember_ok(agent, namespace="notes", text=target)
    for text in DISTRACTORS[5:]:
        remember_ok(agent, namespace="notes", text=text)
    assert set(MemoryEmbedding.objects.values_list("embedder_id", flat=True)) == {"minilm-l6-v2"}
    body = recall_ok(agent, query=query)
    assert body["degraded"] == []
    found = body["memories"][position(body, target)]
    assert position(body, target) < 3, [(m["text"], m["ranks"]) for m in body["memories"]]
    assert found["ranks"]["semantic"] <= 2
    assert found["ranks"]["bm25"] is None  # no shared word: only the embedding found it
    assert found["ranks"]["entity"] is None


def test_paraphrase_is_missed_by_stored_vectors_of_another_embedder(agent, settings):
    """Vectors from another embedder are not comparable: they are left out of the semantic ranking."""
    remember_ok(agent, namespace="notes", text="Vegetarian; avoid booking steakhouses for team dinners.")  # hashing
    settings.MEMORY_EMBEDDER = "minilm"
    settings.SEMANTIC_BUDGET_SECONDS = 30
    body = recall_ok(agent, query="Can she eat meat?")
    assert body["memories"] == [] and body["considered"] == 1 and body["degraded"] == []


@pytest.mark.parametrize("query", ["コントソの件で準備すること", "Contoso Ltd status"])
def test_memory_citing_a_passage_about_the_queried_entity_near_the_top(agent, knowledge, query):
    _, _, passages = knowledge
    target = "Prepare the renewal deck two weeks before the deadline."
    remember_ok(agent, namespace="accounts", text=target, citations=[str(passages["contoso_renewal"].pk)])
    remember_ok(agent, namespace="accounts", text="Leave early on Fridays.", citations=[str(passages["office"].pk)])
    for text in DISTRACTORS:
        remember_ok(agent, namespace="accounts", text=text)
    body = recall_ok(agent, query=query)
    found = body["memories"][position(body, target)]
    assert position(body, target) < 2, [(m["text"], m["ranks"]) for m in body["memories"]]
    assert found["ranks"]["entity"] == 1
    assert found["ranks"]["bm25"] is None  # the memory text never names the entity
    assert [m["text"] for m in body["memories"] if m["ranks"]["entity"] is not None] == [target]
    assert found["citations"][0]["passageId"] == str(passages["contoso_renewal"].pk)


def test_more_shared_entities_rank_higher(agent, knowledge):
    _, _, passages = knowledge
    one = remember_ok(agent, namespace="a", text="Renewal deck first.", citations=[str(passages["contoso_renewal"].pk)])
    both = remember_ok(
        agent, namespace="a", text="Portal pilot next.", citations=[str(passages["aurora"].pk)]
    )  # Aurora and Contoso
    body = recall_ok(agent, query="Contoso and Aurora")
    ranks = {m["id"]: m["ranks"]["entity"] for m in body["memories"]}
    assert ranks[both["id"]] == 1 and ranks[one["id"]] == 2


# --- degraded semantic ranking ---------------------------------------------------------------------
def test_semantic_ranking_is_skipped_past_its_budget_and_bm25_still_answers(agent, slow_embedder):
    for text in DISTRACTORS:
        remember_ok(agent, namespace="prefs", text=text)
    remember_ok(agent, namespace="prefs", text="Prefers dark mode in every editor and terminal.")
    body = recall_ok(agent, query="dark mode editor")
    assert body["degraded"] == ["semantic"]
    assert body["memories"][0]["text"] == "Prefers dark mode in every editor and terminal."
    assert body["memories"][0]["ranks"] == {"bm25": 1, "semantic": None, "entity": None}
    assert all(m["ranks"]["semantic"] is None for m in body["memories"])
    assert body["considered"] == len(DISTRACTORS) + 1


def test_semantic_budget_zero_with_a_real_slow_embedder_degrades(agent, settings, monkeypatch):
    """The real embedder, made slow: SEMANTIC_BUDGET_SECONDS = 0 cannot be met."""
    from memoryapp.recall.embedders import get_embedder

    real = get_embedder("hashing")
    gate = threading.Event()

    def slow_embed(texts):
        gate.wait(10)
        return type(real).embed(real, texts)

    monkeypatch.setattr(real, "embed", slow_embed)
    settings.MEMORY_EMBEDDER = "hashing"  # the patched one: the default model would answer in time by chance
    settings.SEMANTIC_BUDGET_SECONDS = 0
    try:
        gate.set()  # remembering embeds with the same (cached) embedder: let it through
        remember_ok(agent, namespace="prefs", text="Prefers dark mode in every editor and terminal.")
        gate.clear()
        body = recall_ok(agent, query="dark mode")
        assert body["degraded"] == ["semantic"] and texts(body) == ["Prefers dark mode in every editor and terminal."]
    finally:
        gate.set()


# --- hidden, considered ----------------------------------------------------------------------------
def test_hidden_counts_memories_whose_cited_document_is_gone_or_expired(agent, world, knowledge):
    _, documents, passages = knowledge
    remember_ok(agent, namespace="n", text="renewal deck note", citations=[str(passages["contoso_renewal"].pk)])
    remember_ok(agent, namespace="n", text="renewal invoice note", citations=[str(passages["contoso_invoice"].pk)])
    remember_ok(agent, namespace="n", text="renewal office note", citations=[str(passages["office"].pk)])
    remember_ok(agent, namespace="n", text="renewal plain note")
    remember_ok(agent, namespace="n", text="renewal portal note", citations=[str(passages["aurora"].pk)])

    body = recall_ok(agent, query="renewal note")
    assert body["hidden"] == 0 and body["considered"] == 5

    documents["office"].expires_at = timezone.now() - timedelta(seconds=1)
    documents["office"].save()
    # A document row gone without the cascade having run yet: the re-check still hides the memory.
    Document.objects.filter(pk=documents["aurora"].pk).delete()
    body = recall_ok(agent, query="renewal note")
    assert body["hidden"] == 2 and body["considered"] == 3
    assert sorted(texts(body)) == ["renewal deck note", "renewal invoice note", "renewal plain note"]

    # Deleting through the action marks dependants unreachable at once (then erases them): gone, not hidden.
    actions.delete_document(documents["contoso"], actor=world.owner.user)
    body = recall_ok(agent, query="renewal note")
    assert texts(body) == ["renewal plain note"]
    assert body["hidden"] == 2 and body["considered"] == 1


# --- filters, limit --------------------------------------------------------------------------------


def test_namespace_and_collection_filters(agent, knowledge):
    collection, _, _ = knowledge
    other = actions.create_collection(collection.workspace, name="Other")
    remember_ok(agent, namespace="travel", text="travel: window seat please")
    remember_ok(agent, namespace="food", text="food: window table please")
    remember_ok(
        agent, namespace="travel", text="travel: window seat in the accounts trip", collectionId=str(collection.pk)
    )
    remember_ok(
        agent, namespace="food", text="food: window table at the accounts dinner", collectionId=str(collection.pk)
    )
    remember_ok(agent, namespace="food", text="food: window table elsewhere", collectionId=str(other.pk))

    assert recall_ok(agent, query="window")["considered"] == 5
    travel = recall_ok(agent, query="window", namespace="travel")
    assert {m["namespace"] for m in travel["memories"]} == {"travel"} and travel["considered"] == 2
    in_collection = recall_ok(agent, query="window", collectionId=str(collection.pk))
    assert {m["collectionId"] for m in in_collection["memories"]} == {str(collection.pk)} and in_collection[
        "considered"
    ] == 2
    both = recall_ok(agent, query="window", namespace="food", collectionId=str(collection.pk))
    assert texts(both) == ["food: window table at the accounts dinner"] and both["considered"] == 1


def test_limit(agent):
    for i in range(14):
        remember_ok(agent, namespace="n", text=f"standup note number {i}")
    assert len(recall_ok(agent, query="standup note")["memories"]) == 10  # default
    assert len(recall_ok(agent, query="standup note", limit=3)["memories"]) == 3
    full = recall_ok(agent, query="standup note", limit=50)
    assert len(full["memories"]) == 14 and full["considered"] == 14
    assert agent.recall(query="standup", limit=51).status_code == 400


# --- shape and arithmetic --------------------------------------------------------------------------
def test_response_shape(agent, knowledge):
    _, documents, passages = knowledge
    remember_ok(
        agent,
        namespace="accounts",
        key="renewal",
        text="Contoso renewal deck is due in March",
        citations=[str(passages["contoso_renewal"].pk)],
    )
    body = recall_ok(agent, query="Contoso renewal")
    assert set(body) == {"memories", "hidden", "considered", "degraded"}
    assert isinstance(body["hidden"], int) and isinstance(body["considered"], int) and body["degraded"] == []
    memory = body["memories"][0]
    assert set(memory) == MEMORY_KEYS | {"score", "ranks"}
    assert set(memory["ranks"]) == {"bm25", "semantic", "entity"}
    assert memory["ranks"] == {"bm25": 1, "semantic": 1, "entity": 1}
    assert isinstance(memory["score"], float)
    assert (memory["type"], memory["evidence"], memory["trust"]) == ("memory", False, "untrusted")
    assert memory["key"] == "renewal" and memory["sourceState"] == "current"
    assert memory["citations"] == [
        {
            "passageId": str(passages["contoso_renewal"].pk),
            "documentId": str(documents["contoso"].pk),
            "sha256": passages["contoso_renewal"].sha256,
            "sourceState": "current",
        }
    ]


def test_rrf_score_is_the_sum_over_reported_ranks(agent, knowledge):
    _, _, passages = knowledge
    remember_ok(agent, namespace="a", text="Contoso renewal deck", citations=[str(passages["contoso_renewal"].pk)])
    remember_ok(agent, namespace="a", text="Invoice rules", citations=[str(passages["contoso_invoice"].pk)])
    remember_ok(agent, namespace="a", text="renewal of the gym membership")
    remember_ok(agent, namespace="a", text="Pilot customer weekly email", citations=[str(passages["aurora"].pk)])
    for text in DISTRACTORS:
        remember_ok(agent, namespace="a", text=text)
    body = recall_ok(agent, query="Contoso renewal", limit=50)
    assert any(all(r is not None for r in m["ranks"].values()) for m in body["memories"])
    assert any(sum(r is not None for r in m["ranks"].values()) == 1 for m in body["memories"])
    for memory in body["memories"]:
        ranks = [r for r in memory["ranks"].values() if r is not None]
        assert ranks and all(isinstance(r, int) and r >= 1 for r in ranks)
        assert memory["score"] == math.fsum(1.0 / (60 + r) for r in sorted(ranks))
        assert memory["score"] == pytest.approx(sum(1.0 / (60 + r) for r in ranks), rel=1e-12)
    scores = [m["score"] for m in body["memories"]]
    assert scores == sorted(scores, reverse=True)
    # each ranking's ranks are 1..n without gaps among the results (limit 50 returns them all)
    for name in ("bm25", "semantic", "entity"):
        got = sorted(m["ranks"][name] for m in body["memories"] if m["ranks"][name] is not None)
        assert got == list(range(1, len(got) + 1))


def test_identical_memories_tie_newer_first(agent):
    older = remember_ok(agent, namespace="n", text="Prefers aisle seats")
    newer = remember_ok(agent, namespace="n", text="Prefers aisle seats")
    body = recall_ok(agent, query="aisle seats")
    assert [m["id"] for m in body["memories"]] == [newer["id"], older["id"]]
    assert body["memories"][0]["ranks"] == {"bm25": 1, "semantic": 1, "entity": None}


@pytest.mark.parametrize("newest", ["lexical", "entity"])
def test_equal_fused_scores_order_newer_first(agent, knowledge, slow_embedder, newest):
    """One memory only in BM25 at rank 1, another only in the entity ranking at rank 1: the same
    score 1/61 (semantic skipped); the newer one comes first whichever ranking found it."""
    _, _, passages = knowledge

    def lexical():
        return remember_ok(agent, namespace="n", text="renewal deck due Friday")

    def entity():
        return remember_ok(
            agent,
            namespace="n",
            text="Send the PO number with invoices",
            citations=[str(passages["contoso_invoice"].pk)],
        )

    first, second = (entity, lexical) if newest == "lexical" else (lexical, entity)
    old, new = first(), second()
    body = recall_ok(agent, query="Contoso renewal")
    assert body["degraded"] == ["semantic"]
    assert [m["id"] for m in body["memories"]] == [new["id"], old["id"]]
    assert body["memories"][0]["score"] == body["memories"][1]["score"] == 1.0 / 61


# --- the candidate window --------------------------------------------------------------------------
def test_only_the_newest_300_candidates_are_considered(agent, world):
    now = timezone.now()
    versions = []
    for i in range(305):
        # the 5 oldest mention a word nobody else uses: they fall outside the window
        text = f"zebra crossing note {i}" if i < 5 else f"standup note {i}"
        stamp = now - timedelta(seconds=1000 - i)
        versions.append(
            MemoryVersion(
                workspace=world.workspace,
                member=world.editor,
                namespace="bulk",
                text=text,
                text_length=len(text),
                valid_from=stamp,
                created_at=stamp,
                retention_anchor=stamp,
            )
        )
    created = MemoryVersion.objects.bulk_create(versions)
    if created[0].pk is None:  # backends that do not return ids
        created = list(MemoryVersion.objects.filter(member=world.editor).order_by("created_at", "id"))
    MemoryEmbedding.objects.bulk_create(index_entry(v) for v in created)

    body = recall_ok(agent, query="zebra crossing", limit=50)
    assert body["considered"] == 300
    assert not any("zebra" in m["text"] for m in body["memories"])
    assert all(m["ranks"]["bm25"] is None for m in body["memories"])  # only weak semantic matches remain
    body = recall_ok(agent, query="standup note", limit=50)
    assert body["considered"] == 300 and len(body["memories"]) == 50
    assert all(m["text"].startswith("standup") for m in body["memories"])
    # a newer memory pushes one more out of the window, and is considered itself
    remember_ok(agent, namespace="bulk", text="zebra crossing again")
    body = recall_ok(agent, query="zebra crossing", limit=50)
    assert body["considered"] == 300
    assert [m["text"] for m in body["memories"] if "zebra" in m["text"]] == ["zebra crossing again"]
    assert body["memories"][0]["text"] == "zebra crossing again"


# --- isolation -------------------------------------------------------------------------------------
def test_a_member_never_recalls_another_members_memories(agent, world):
    owner_agent = make_agent(world.owner)
    outsider_agent = make_agent(world.outsider)
    remember_ok(owner_agent, namespace="n", text="Falcon project budget is confidential")
    remember_ok(outsider_agent, namespace="n", text="Falcon project launch in Globex")
    remember_ok(agent, namespace="n", text="Editor note about lunch")

    body = recall_ok(agent, query="Falcon project budget launch", limit=50)
    assert texts(body) in ([], ["Editor note about lunch"])  # at most a weak semantic match of its own
    assert body["considered"] == 1 and body["hidden"] == 0
    own = set(MemoryVersion.objects.filter(member=world.editor).values_list("pk", flat=True))
    assert {int(m["id"]) for m in body["memories"]} <= own
    assert texts(recall_ok(owner_agent, query="Falcon project")) == ["Falcon project budget is confidential"]
    assert texts(recall_ok(outsider_agent, query="Falcon project")) == ["Falcon project launch in Globex"]


# --- BM25 against the reference implementation -----------------------------------------------------
@pytest.mark.parametrize(
    "query",
    ["coffee window seats morning", "window seats on flights", "東京で英語 coffee", "英会話を学ぶ"],
)
def test_lexical_ranking_orders_exactly_as_rank_bm25(agent, world, query):
    corpus = [
        "Drinks black coffee every morning before the standup meeting",
        "Likes window seats on long flights and coffee on board",
        "Window seats only, never the aisle, on morning flights",
        "東京で英語の勉強会を開く",
        "英会話を学ぶために毎朝ポッドキャストを聞く",
        "Prefers tea in the afternoon",
        "Reads the news in the morning with coffee and toast and coffee again",
        "Takes the train to Tokyo on Mondays",
        "毎週金曜日は在宅勤務",
        "Uses a standing desk",
        "Books aisle seats for short flights",
        "Runs a half marathon every spring",
    ]
    for text in corpus:
        remember_ok(agent, namespace="n", text=text)
    versions = list(
        MemoryVersion.objects.filter(member=world.editor).select_related("embedding").order_by("-created_at", "-id")
    )
    docs = [v.embedding.terms.split() for v in versions]
    assert docs == [stem_terms(tokenize(v.text)) for v in versions]  # the stored terms: tokens, stemmed
    candidates = [service.Candidate(v.pk, v.collection_id, terms=terms) for v, terms in zip(versions, docs)]
    query_tokens = stem_terms(content_terms(tokenize(query)))  # stop words out, then stemmed
    model = BM25Okapi(docs, k1=1.5, b=0.75)
    assert all(model.idf[t] > 0 for t in set(query_tokens) if t in model.idf)  # positive idfs
    scores = model.get_scores(query_tokens)
    matched = [i for i, doc in enumerate(docs) if set(query_tokens) & set(doc)]
    assert len({scores[i] for i in matched}) == len(matched)  # no ties: the order is the score's alone
    best = max(scores[i] for i in matched)
    expected = sorted((i for i in matched if scores[i] >= service.BM25_RELATIVE_FLOOR * best), key=lambda i: -scores[i])
    assert expected and service.lexical_ranking(query, candidates) == expected
    # and through the endpoint: the reported bm25 ranks follow the same order
    body = recall_ok(agent, query=query, limit=50)
    by_rank = sorted((m["ranks"]["bm25"], m["id"]) for m in body["memories"] if m["ranks"]["bm25"] is not None)
    assert [int(pk) for _, pk in by_rank] == [candidates[i].pk for i in expected]


def test_recall_ranks_with_the_specs_k1_and_b():
    assert (recall_service.BM25_K1, recall_service.BM25_B) == (1.5, 0.75)
    candidates = [recall_service.Candidate(pk=i, collection_id=None, terms=doc) for i, doc in enumerate(_CORPUS)]
    # "tea cup": BM25 ranks the long two-term memory over the short one-term one; 'rain' shares nothing.
    assert recall_service.lexical_ranking("tea cup", candidates) == [2, 3]


def test_recall_query_count_is_constant(agent, world, docs, django_assert_max_num_queries):
    _, _, passages = docs
    actions.create_entity(world.workspace, name="Osaka", aliases=[])
    for i in range(40):
        agent.remember(namespace="n", text=f"note {i} about Osaka", citations=[str(p.pk) for p in passages])
    with django_assert_max_num_queries(
        19
        # 9 for the read, 1 INSERT for its access entry, 7 for the read-budget slot on the database limiter
        # (credential and member bounds), 2 for the entity matcher (the generation, and the entities on its first
        # build)
    ):
        response = agent.recall(query="Osaka shipping", limit=50)
    assert response.json()["considered"] == 40
