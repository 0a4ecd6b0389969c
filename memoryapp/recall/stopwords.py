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

from functools import lru_cache

from .tokenize import tokenize

__all__ = ["STOP_WORD_SOURCE", "stop_terms", "content_terms"]

# bench/recall_locomo.py on the LoCoMo tuning conversations (26, 30), fusion with e5, the other
# constants at their values; R@5 overall / multi-hop: "stopwords" 0.693 / 0.443, "stopwordsiso"
# 0.696 / 0.422, none 0.696 / 0.371 (BM25 alone 0.621 / 0.586 / 0.620). The short classic list
# keeps content words and helps multi-hop questions most.
STOP_WORD_SOURCE = "stopwords"
LANGUAGES = ("en", "ja")


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


@lru_cache(maxsize=4)  # keyed by the source name only: a fixed public list, no memory content
def _stop_terms(source: str) -> frozenset[str]:
    return frozenset(token for word in _words(source) for token in tokenize(word))


def stop_terms() -> frozenset[str]:
    """The recall tokens of the configured stop-word lists."""
    return _stop_terms(STOP_WORD_SOURCE)


def content_terms(tokens: list[str]) -> list[str]:
    """``tokens`` without stop words, in order (duplicates kept: BM25 counts them)."""
    stop = stop_terms()
    return [t for t in tokens if t not in stop]
