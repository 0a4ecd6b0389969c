"""SPEC §4.7: no single request may cost more than a bounded multiple of a typical one, and a slow
embedding never delays another member's writes.

* Token caps: whatever the text, the engine is handed at most E5Embedder.query_tokens /
  passage_tokens tokens as its own tokenizer counts them, after NFKC and case-folding (a ligature
  that expands 18-fold, "a@" runs of one token per character, emoji sequences, combining marks).
* Lanes: queries and passages run on separate engine threads, so a remember embeds while hostile
  recalls hold the query lane — shown with an engine that blocks queries on an Event, counting
  calls, not seconds.
* In flight: at most MEMORY_QUERIES_IN_FLIGHT query embeddings run or wait per process; a recall
  over that answers degraded "semantic" at once, and the slots come back when the engine does."""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from memoryapp.recall import embedders
from memoryapp.recall.embedders import (
    E5Embedder,
    _casefold,
    _clean_texts,
    engine_lane,
    get_embedder,
    truncate_to_tokens,
)
from tests.recall.support import _django_setup
from tests.support import make_agent

# Pieces an attacker strings together: NFKC expansions (U+FDFA is 18 characters, U+3300 five),
# runs the tokenizer splits into one piece per character, emoji ZWJ sequences, stacked
# combining marks, invisible and broken code points.
HOSTILE_PIECES = [
    "\ufdfa",
    "\ufdfb",
    "\u3300",
    "\u33fe",
    "a@",
    "@a",
    "\U0001f469\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",
    "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    "e\u0301\u0302\u0303\u0304",
    "\u200b",
    "\u202e",
    "\x00",
    "\ud800",
    "  ",
    "\n",
    "大阪",
    "word ",
    "ﬃ",
    "Ⅻ",
]
TEXTS = st.one_of(
    st.text(max_size=1000),
    st.lists(st.sampled_from(HOSTILE_PIECES), max_size=500).map("".join),
    st.lists(st.one_of(st.sampled_from(HOSTILE_PIECES), st.text(max_size=8)), max_size=200).map("".join),
)


def _count(e5: E5Embedder, text: str, is_query: bool) -> int:
    return e5._model.token_count(text, is_query)


# --- the token caps ---------------------------------------------------------------------------------
def test_the_caps_are_within_the_models_own_maximum():
    for cls in (E5Embedder, embedders.MiniLMEmbedder):
        assert 8 <= cls.query_tokens <= cls.passage_tokens <= embedders.MODEL_MAX_TOKENS


@given(text=TEXTS, is_query=st.booleans())
@hypothesis_settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_whatever_the_text_the_engine_is_handed_at_most_the_cap(e5, text, is_query):
    cap = e5.query_tokens if is_query else e5.passage_tokens
    normalised = _casefold(_clean_texts([text])[0])  # what the engine would be given uncapped
    capped = e5.capped(text, is_query)
    assert _count(e5, capped, is_query) <= cap
    assert normalised.startswith(capped)  # truncated, never refused or rewritten
    if _count(e5, normalised, is_query) <= cap:
        assert capped == normalised  # a text that fits is left whole
    elif len(capped) < min(len(normalised), cap * embedders.MAX_CHARS_PER_TOKEN):
        assert _count(e5, normalised[: len(capped) + 1], is_query) > cap  # cut at the cap, not sooner


@dataclass
class _Prefix:
    """A token count over prefixes that is not monotonic (as SentencePiece's is not): the count of
    text[:n] is 2 plus the running sum of generated steps, some negative."""

    steps: list[int]
    calls: int = 0

    def __call__(self, part: str) -> int:
        self.calls += 1
        return 2 + max(0, sum(self.steps[: len(part)]))


@given(steps=st.lists(st.integers(-2, 4), max_size=600), cap=st.integers(2, 60))
@hypothesis_settings(max_examples=400, deadline=None)
def test_truncation_keeps_a_prefix_within_the_cap_that_one_more_character_would_break(steps, cap):
    text = "x" * len(steps)
    count = _Prefix(steps)
    kept = truncate_to_tokens(text, cap, count)
    window = text[: cap * embedders.MAX_CHARS_PER_TOKEN]
    assert window.startswith(kept) and count(kept) <= cap
    if kept != window:
        assert count(window[: len(kept) + 1]) > cap
    assert count.calls <= 2 * math.ceil(math.log2(len(window) + 2)) + 6  # O(log n) counts, whatever the shape


def test_a_text_within_the_cap_embeds_exactly_as_before(e5):
    for text in [
        "Prefers window seats on long flights.",
        "毎朝、抹茶ラテを一杯飲むのが習慣。",
        "Caroline: I went to a LGBTQ support group yesterday",
    ]:
        for is_query in (False, True):
            plain = engine_lane(is_query).submit(e5._model.encode, _casefold(text), is_query).result()
            ours = (e5.embed_queries if is_query else e5.embed)([text])[0]
            assert np.array_equal(ours, plain)


def test_a_long_text_embeds_as_its_capped_prefix(e5):
    text = "I prefer dark mode in every editor and my terminal uses solarized colours. " * 12
    for is_query, cap in ((True, e5.query_tokens), (False, e5.passage_tokens)):
        assert _count(e5, _casefold(text), is_query) > cap
        prefix = e5.capped(text, is_query)
        whole = (e5.embed_queries if is_query else e5.embed)([text])[0]
        assert np.array_equal(whole, (e5.embed_queries if is_query else e5.embed)([prefix])[0])


def test_minilm_is_capped_by_its_own_tokenizer():
    minilm = get_embedder("minilm")
    sep = minilm._tokenizer.token_to_id("[SEP]")
    for text in ["a@" * 500, "\ufdfa" * 1000, "word " * 400]:
        for cap in (minilm.query_tokens, minilm.passage_tokens):
            ids = minilm._encode([text], cap)[0]
            assert len(ids) <= cap and ids[-1] == sep
    short = "Prefers window seats."
    assert minilm._encode([short], minilm.query_tokens) == minilm._encode([short])


class _Recorder:
    """Wraps the engine call: (side, tokens handed, thread) of every call."""

    def __init__(self, e5: E5Embedder, real):
        self.e5, self.real, self.calls = e5, real, []

    def __call__(self, text: str, is_query: bool, threads: int):
        self.calls.append(
            ("query" if is_query else "passage", _count(self.e5, text, is_query), threading.current_thread().name)
        )
        return self.real(text, is_query, threads)


def test_every_field_at_its_limit_hands_the_engine_no_more_than_the_caps(world, e5, settings, monkeypatch):
    """Through REST, the worst inputs the API accepts (1,000-character text and query of each
    hostile kind, the other fields at their limits): each engine call stays within its side's cap."""
    settings.MEMORY_EMBEDDER = "e5"
    settings.SEMANTIC_BUDGET_SECONDS = 60  # a loaded machine must not turn this into a timing test
    recorder = _Recorder(e5, e5._encode_on_engine)
    monkeypatch.setattr(e5, "_encode_on_engine", recorder)
    agent = make_agent(world.editor)
    worst = [
        "\ufdfa" * 1000,
        "a@" * 500,
        ("\U0001f469\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466" * 200)[:1000],
        ("e" + "\u0301" * 9) * 100,
        "ﬃ" * 1000,
    ]
    for i, text in enumerate(worst):
        remembered = agent.remember(
            namespace=("n" * 63 + str(i)), key="k" * 119 + str(i), text=text, details=["d" * 200] * 5
        )
        assert remembered.status_code in (201, 400), remembered.json()  # 400: masking left nothing (never a 500)
        recalled = agent.recall(query=text, namespace="n" * 63 + str(i), limit=50)
        assert recalled.status_code == 200
    sides = {side for side, _, _ in recorder.calls}
    assert sides == {"query", "passage"}
    assert all(
        tokens <= (e5.query_tokens if side == "query" else e5.passage_tokens) for side, tokens, _ in recorder.calls
    )
    assert all(thread.startswith(f"e5-{side}") for side, _, thread in recorder.calls)


# --- lanes and the in-flight cap --------------------------------------------------------------------
class _BlockingEngine:
    """Query calls block until `release`; passage calls note how many queries were inside the
    engine at that moment. A shared lane could only run a passage after the query returned."""

    def __init__(self, real):
        self.real = real
        self.release = threading.Event()
        self.query_entered = threading.Event()
        self.lock = threading.Lock()
        self.queries_inside = 0
        self.query_calls = 0
        self.passages: list[tuple[int, str]] = []

    def __call__(self, text: str, is_query: bool, threads: int):
        if not is_query:
            with self.lock:
                self.passages.append((self.queries_inside, threading.current_thread().name))
            return self.real(text, is_query, threads)
        with self.lock:
            self.queries_inside += 1
            self.query_calls += 1
        self.query_entered.set()
        try:
            self.release.wait(60)  # a deadlock guard only: the test releases it
            return self.real(text, is_query, threads)
        finally:
            with self.lock:
                self.queries_inside -= 1


def _wait_until(predicate, timeout: float = 60.0) -> bool:
    """Polls a condition (a guard against hanging, never an assertion about time)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_remember_is_not_delayed_by_hostile_recalls_and_the_in_flight_cap_degrades_the_rest(
    world, e5, settings, monkeypatch, caplog
):
    caplog.set_level(logging.WARNING, logger="memoryapp.recall.embedders")
    settings.MEMORY_EMBEDDER = "e5"
    # The hostile read-only credential's member has a memory, so that its recalls rank (recall
    # embeds nothing for a member with no candidates); written before the engine is patched.
    assert (
        make_agent(world.owner).remember(namespace="n", text="Quarterly numbers are due on Friday.").status_code == 201
    )
    hostile = make_agent(world.owner, scopes=("memory:read",))
    member = make_agent(world.editor)
    settings.SEMANTIC_BUDGET_SECONDS = 0.05
    engine = _BlockingEngine(e5._encode_on_engine)
    monkeypatch.setattr(e5, "_encode_on_engine", engine)
    monkeypatch.setattr(embedders._queries_in_flight, "limit", 2)
    assert _wait_until(lambda: embedders._queries_in_flight.count == 0)
    try:
        first = hostile.recall(query="\ufdfa" * 1000)
        assert first.status_code == 200 and first.json()["degraded"] == ["semantic"]
        assert engine.query_entered.wait(60)  # the hostile query now holds the query lane

        remembered = member.remember(namespace="prefs", text="Prefers window seats on long flights.")
        assert remembered.status_code == 201
        assert engine.passages and all(
            inside == 1 and thread.startswith("e5-passage") for inside, thread in engine.passages
        )

        second = hostile.recall(query="a@" * 500)  # admitted: waits behind the first on the query lane
        assert second.json()["degraded"] == ["semantic"] and embedders._queries_in_flight.count == 2
        caplog.clear()
        third = member.recall(query="window seats")  # over the cap: not started at all
        assert third.status_code == 200 and third.json()["degraded"] == ["semantic"]
        assert [m["text"] for m in third.json()["memories"]] == [
            "Prefers window seats on long flights."
        ]  # BM25 still answers
        assert "already in flight" in caplog.text and "window seats" not in caplog.text
        assert engine.query_calls == 1 and embedders._queries_in_flight.count == 2  # nothing more queued

        again = member.remember(namespace="prefs", text="Drinks matcha every morning.")
        assert again.status_code == 201 and all(inside == 1 for inside, _ in engine.passages)
    finally:
        engine.release.set()
    assert _wait_until(lambda: embedders._queries_in_flight.count == 0)  # slots come back with the engine
    assert engine.query_calls == 2
    settings.SEMANTIC_BUDGET_SECONDS = 60
    later = member.recall(query="window seats")
    assert later.json()["degraded"] == []


def test_a_slot_is_held_until_the_embedder_returns_not_until_the_recall_stops_waiting():
    entered, release = threading.Event(), threading.Event()

    class Blocked:
        id, dim = "blocked-slot", 4

        def embed(self, texts):
            entered.set()
            release.wait(60)
            return np.ones((len(texts), 4), dtype=np.float32) / 2.0

    before = embedders._queries_in_flight.count
    try:
        pending = embedders.PendingQuery(Blocked(), "q")
        assert entered.wait(60) and not pending.busy  # running (one not yet started is cancelled, freeing its slot)
        assert pending.result(0.0) is None
        assert embedders._queries_in_flight.count == before + 1  # abandoned, still counted
    finally:
        release.set()
    assert _wait_until(lambda: embedders._queries_in_flight.count == before)


def test_a_forked_child_starts_with_no_query_in_flight(monkeypatch):
    slots = embedders._InFlight(1)
    assert slots.try_acquire() and not slots.try_acquire()
    monkeypatch.setattr(slots, "_pid", -1)  # as seen from a child: another process's count
    assert slots.count == 0 and slots.try_acquire()


def test_queries_in_flight_is_read_from_the_environment_and_checked(tmp_path):
    code = "from memoryapp.recall import embedders; print(embedders._queries_in_flight.limit)"
    result = _django_setup(
        {"VAR_DIR": str(tmp_path / "v"), "MEMORY_EMBEDDER": "hashing", "MEMORY_QUERIES_IN_FLIGHT": "9"}, code=code
    )
    assert result.returncode == 0 and result.stdout.split() == ["9"], result.stderr
    result = _django_setup({"VAR_DIR": str(tmp_path / "d"), "MEMORY_EMBEDDER": "hashing"}, code=code)
    assert result.returncode == 0 and result.stdout.split() == ["4"], result.stderr
    for value in ("0", "65", "two"):
        result = _django_setup(
            {"VAR_DIR": str(tmp_path / value), "MEMORY_EMBEDDER": "hashing", "MEMORY_QUERIES_IN_FLIGHT": value}
        )
        assert result.returncode != 0 and "MEMORY_QUERIES_IN_FLIGHT" in result.stderr
    with pytest.raises(ValueError):
        embedders.configure_engine(1, 0)
