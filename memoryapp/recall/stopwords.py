"""Stop words for the lexical ranking (SPEC §4.4: BM25 ranks a memory only for a shared
non-stop-word term), English and Japanese, taken from a maintained list — never typed here.

The lists are tokenised with the recall tokenizer itself, so what is removed is exactly the
tokens those words become: "don't" gives "don" and "t"; a Japanese word gives its character
bigrams ("あります" -> "あり", "りま", "ます"), which is how CJK text is indexed.

Source (``STOP_WORD_SOURCE``): the ``stopwords`` package (its English list is the classic
Snowball/IR list of 174 words, its Japanese list 40 pronouns, particles and copulas), chosen over
``stopwordsiso`` (1,298 English words, among them "home", "group", "work", "buy") on the LoCoMo
tuning conversations: see the constant's comment.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from .tokenize import CJK_CLASS, tokenize

__all__ = ["STOP_WORD_SOURCE", "stop_terms", "content_terms"]

# The short classic list keeps content words and helps multi-hop questions most (chosen on the
# tuning conversations: docs/benchmarks.md "Recall constants: how they were chosen").
STOP_WORD_SOURCE = "stopwords"
LANGUAGES = ("en", "ja")
_CJK_RE = re.compile(f"[{CJK_CLASS}]")


def _words(source: str) -> list[str]:
    if source == "stopwords":
        import stopwords

        names = {"en": "english", "ja": "japanese"}
        return [w for lang in LANGUAGES for w in stopwords.get_stopwords(names[lang]) if w]
    if source == "stopwordsiso":
        import stopwordsiso

        return sorted(stopwordsiso.stopwords(list(LANGUAGES)))
    if source == "none":
        return []
    raise ValueError(f"unknown stop word source {source!r}")


# CJK text is indexed as character bigrams, so a query's bigrams also straddle word boundaries
# and grammar: "とき", "には" (a particle of the list inside), "った", "てい" (inflection). Which
# CJK query bigrams the lexical ranking drops (chosen with bench/recall_quality.py:
# docs/benchmarks.md "Recall constants: how they were chosen"):
#   "keep"      nothing
#   "kana"      two hiragana holding a particle of the list
#   "any"       any bigram holding such a particle ("京で")
#   "hiragana"  "any", and every bigram of two hiragana
# Content words are mostly written in kanji and katakana; a query that would lose every term
# ("おにぎり", "私の猫") falls back to "kana".
CJK_QUERY_BIGRAMS = "hiragana"


def _hiragana(t: str) -> bool:
    return all("\u3041" <= c <= "\u309f" for c in t)


@lru_cache(maxsize=4)  # keyed by the source name only: a fixed public list, no memory content
def _stop_terms(source: str) -> frozenset[str]:
    return frozenset(token for word in _words(source) for token in tokenize(word))


@lru_cache(maxsize=4)
def _particles(source: str) -> frozenset[str]:
    """Single-character hiragana stop words of the list (particles and the like)."""
    # split(): the package's Japanese list has "で え" on one line
    words = (unicodedata.normalize("NFKC", part) for w in _words(source) for part in w.split())
    return frozenset(w for w in words if len(w) == 1 and "\u3041" <= w <= "\u309f")


def stop_terms() -> frozenset[str]:
    """The recall tokens of the configured stop-word lists."""
    return _stop_terms(STOP_WORD_SOURCE)


def content_terms(tokens: list[str]) -> list[str]:
    """``tokens`` without stop words and without the CJK bigrams CJK_QUERY_BIGRAMS drops, in
    order (duplicates kept: BM25 counts them)."""
    stop = stop_terms()
    kept = [t for t in tokens if t not in stop]
    mode = CJK_QUERY_BIGRAMS
    if mode == "keep":
        return kept
    particles = _particles(STOP_WORD_SOURCE)

    def dropped(t: str, mode: str) -> bool:
        if len(t) != 2 or not _CJK_RE.match(t):
            return False
        holds_particle = t[0] in particles or t[1] in particles
        if mode == "hiragana":
            return holds_particle or _hiragana(t)
        return holds_particle and (mode == "any" or _hiragana(t))

    out = [t for t in kept if not dropped(t, mode)]
    if not out and mode == "hiragana":
        out = [t for t in kept if not dropped(t, "kana")]
    return out
