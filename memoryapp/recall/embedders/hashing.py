"""The hashing embedder (setting ``hashing``): signed feature hashing of the recall tokens plus
character n-grams; dependency-free, microseconds, for a deployment that opts out of a model."""

from __future__ import annotations

import re
import zlib
from collections import Counter

import numpy as np

from ..tokenize import CJK_CLASS, tokenize
from .base import _l2_normalise_rows

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
    # unrelated texts hash to ~0) and within cosine_margin of the best candidate (0: off; chosen
    # on the tuning conversations, docs/benchmarks.md "Recall constants: how they were chosen").
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
