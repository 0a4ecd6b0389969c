"""Multilingual tokenizer for recall (English, Japanese, Hebrew and friends).

Pure standard library, deterministic, no Django.

Rules
-----
* The text is NFKC-normalised and casefolded (full-width ``ＰＹＴＨＯＮ`` ->
  ``python``, half-width katakana -> full-width, ``ß`` -> ``ss``).
* Hebrew points and cantillation marks (niqqud, U+0591-U+05C7 except the
  punctuation in that block) are removed so that pointed and unpointed spellings
  match; otherwise these combining marks would split a word in two.
* Runs of CJK characters (Han, Hiragana, Katakana incl. the prolonged sound
  mark, Hangul) become overlapping character bigrams; a one-character run
  becomes that character.
* Every other run of Unicode word characters (``\\w``: letters, digits,
  underscore - Latin, Hebrew, Cyrillic, ...) is one token; anything that is not
  a word character separates tokens.

``tokenize("東京でPythonを学ぶ")`` ->
``["東京", "京で", "python", "を学", "学ぶ"]``.
"""

from __future__ import annotations

import re
import threading
import unicodedata

__all__ = ["tokenize", "CJK_CLASS", "index_terms", "stem_terms", "TERMS_FORMAT"]

# Character ranges treated as CJK (bigram-tokenised). Kept as a regex class body.
CJK_CLASS = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf"  # CJK radicals supplement, Kangxi radicals
    "\u3005-\u3007"  # 々 〆 〇
    "\u3021-\u3029"  # Hangzhou numerals
    "\u3031-\u3035"  # vertical kana repeat marks
    "\u303b-\u303c"  # 〻 〼
    "\u3041-\u309f"  # Hiragana (incl. ゝ ゞ ゟ)
    "\u30a0-\u30fa"  # Katakana (the middle dot U+30FB is punctuation)
    "\u30fc-\u30ff"  # ー ヽ ヾ ヿ
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\ua960-\ua97f"  # Hangul Jamo Extended-A
    "\uac00-\ud7af"  # Hangul syllables
    "\ud7b0-\ud7ff"  # Hangul Jamo Extended-B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width katakana (NFKC maps most of them away)
    "\U00020000-\U0003134f"  # CJK Extensions B..G, compatibility supplement
)

# Group 1: a CJK run. Group 2 (implicit): a run of non-CJK word characters.
_TOKEN_RE = re.compile(f"([{CJK_CLASS}]+)|[^\\W{CJK_CLASS}]+")
# Fast path for pure-ASCII text (no CJK, no Hebrew marks possible).
_ASCII_WORD_RE = re.compile(r"\w+")

# Hebrew points/accents (Mn) but not the punctuation that lives in the same block
# (U+05BE maqaf, U+05C0 paseq, U+05C3 sof pasuq, U+05C6 nun hafukha).
_HEBREW_MARKS_RE = re.compile("[\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7]")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into recall tokens (see module docstring)."""
    if not text:
        return []
    text = unicodedata.normalize("NFKC", text).casefold()
    if text.isascii():
        return _ASCII_WORD_RE.findall(text)
    if max(text) >= "\u0591" and _HEBREW_MARKS_RE.search(text):
        text = _HEBREW_MARKS_RE.sub("", text)
    out: list[str] = []
    append = out.append
    for m in _TOKEN_RE.finditer(text):
        run = m.group(1)
        if run is None:
            append(m.group())
        elif len(run) == 1:
            append(run)
        else:
            out.extend([run[i : i + 2] for i in range(len(run) - 1)])
    return out


# --- BM25 terms --------------------------------------------------------------------------------
# English words are reduced to their Snowball (Porter 2) stem, so "painted", "painting" and
# "paints" are one term; other tokens (CJK bigrams, Hebrew, numbers, words with non-ASCII
# letters) are kept as they are (docs/benchmarks.md "Recall constants: how they were chosen").
# Changing how terms are made changes TERMS_FORMAT, so `reembed` knows which stored terms to
# recompute.
STEM_ENGLISH = True
TERMS_FORMAT = "t2-snowball-en" if STEM_ENGLISH else "t1"

_ASCII_ALPHA_RE = re.compile(r"[a-z]+")
_stemmers = threading.local()  # PyStemmer's Stemmer objects are not thread-safe: one per thread


def _stem_words(words: list[str]) -> list[str]:
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        import Stemmer  # PyStemmer: the Snowball project's own C stemmers

        stemmer = _stemmers.english = Stemmer.Stemmer("english", 0)  # 0: no cache (it would hold memory words)
    return stemmer.stemWords(words)


def stem_terms(tokens: list[str]) -> list[str]:
    """``tokens`` with every plain English word stemmed (a no-op when STEM_ENGLISH is off)."""
    if not STEM_ENGLISH or not tokens:
        return tokens
    positions = [i for i, t in enumerate(tokens) if _ASCII_ALPHA_RE.fullmatch(t)]
    if not positions:
        return tokens
    stems = _stem_words([tokens[i] for i in positions])
    out = list(tokens)
    for i, stem in zip(positions, stems):
        out[i] = stem
    return out


def index_terms(text: str) -> list[str]:
    """The BM25 terms stored for a memory: its tokens, stemmed."""
    return stem_terms(tokenize(text))
