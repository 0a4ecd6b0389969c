"""The working copy that the detectors read, and the way back to the original text.

SPEC §4.1: Unicode look-alikes, full-width digits and invisible characters do not hide a value.
Detectors therefore never read the text as written but a normalised copy of it:

- invisible characters (Unicode format characters such as ZERO WIDTH SPACE, soft hyphen, word
  joiner, bidi marks; variation selectors; Hangul fillers) are left out;
- full-width ASCII becomes ASCII, every decimal digit becomes an ASCII digit, Unicode dashes
  become "-", Unicode spaces become " ", the ideographic full stop becomes ".", and letters whose
  compatibility form is one ASCII letter or digit (mathematical alphanumerics, circled digits)
  become that letter or digit;
- Cyrillic and Greek letters that look like Latin ones become the Latin letter (a password
  label written "pаssword" with a Cyrillic "а" is still a password label);
- an underscore or a middle dot between two digits becomes "-" (a separator, as in 054_123_4567);
- between two digits or ASCII letters (or a placeholder), with or without blanks around it, any dash
  (Unicode category Pd) becomes "-" and every joiner look-alike of ``common.JOINER_LOOK_ALIKES``
  (the one-dot leader, 、 ，, the division and fraction slashes, …) its ASCII joiner, so the
  number detectors read "4111∕1111" and "1234、5678" as "4111/1111" and "1234,5678".

Every character of the copy remembers which characters of the original it came from, so a span
found in the copy maps back to a span of the original that also covers any invisible character
inside it. Replacements are made on the original text only; what was not replaced stays exactly
as written.
"""

from __future__ import annotations

import re
import unicodedata

from memoryapp.masking.common import JOINER_LOOK_ALIKES

_DASHES = frozenset("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe58\ufe63")
# Invisible characters that are not in category Cf.
_INVISIBLE_EXTRA = frozenset("\u034f\u115f\u1160\u3164\uffa0\u180e\u2800")
_CONFUSABLES = dict(
    zip(
        # Cyrillic
        "аеорсухіјѕԁһӏԛԝАВЕКМНОРСТХУІЈЅԜ"
        # Greek
        "οαιкνρτυΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
        "aeopcyxijsdhlqwABEKMHOPCTXYIJSWoaikvptuABEZHIKMNOPTYX",
        strict=True,
    )
)
_SPECIAL = {"\u3002": ".", "\uff61": ".", "\ufe6b": "@", "\u2028": "\n", "\u2029": "\n"}
_BETWEEN_DIGITS_RE = re.compile(r"[0-9][_\u00b7\u30fb\uff65\u2022\u2219\u2027\u22c5](?=[0-9])")


def _separator(m: re.Match) -> str:
    return m.group()[0] + "-"


# a single symbol or punctuation mark between digits (blanks around it allowed); the replacement
# decides by class whether it is a joiner
# (between ASCII letters and digits too: the groups of an IBAN, "GB76 JXYP‐0695")
# Blanks before the joiner may hold one line break, as DIGIT_SEP's do ("4111\n-1111"): a look-alike
# after a line break is folded like one after a space.
_JOINER_BETWEEN_RE = re.compile(
    r"(?<=[0-9A-Za-z\]])((?:[^\S\n]{0,3}\r?\n)?[^\S\n]{0,3})([^\w\s])(?=\s{0,3}[0-9A-Za-z\[])"
)


def _fold_joiner(m: re.Match) -> str:
    blanks, ch = m.groups()
    if ch in JOINER_LOOK_ALIKES:
        return blanks + JOINER_LOOK_ALIKES[ch]
    if unicodedata.category(ch) == "Pd" or ch in _DASHES:
        return blanks + "-"
    return m.group()


_CONFUSABLE_RE = re.compile("[" + "".join(_CONFUSABLES) + "]")
_MIXED_WORD_RE = re.compile(r"[^\W\d_]*[A-Za-z][^\W\d_]*")


def _fold_mixed_word(m: re.Match) -> str:
    """Look-alikes are folded only inside words that also hold Latin letters ("pаssword" with a
    Cyrillic "а"); words wholly in Cyrillic or Greek stay as they are."""
    word = m.group()
    if word.isascii():
        return word
    return "".join(_CONFUSABLES.get(ch, ch) for ch in word)


class _CharMap(dict):
    """Lazy cache: character -> its normalised form ("" for invisible characters)."""

    def __missing__(self, ch: str) -> str:
        out = _normalise_char(ch)
        self[ch] = out
        return out


def _normalise_char(ch: str) -> str:
    cp = ord(ch)
    if cp < 128:
        return ch
    if ch in _SPECIAL:
        return _SPECIAL[ch]
    category = unicodedata.category(ch)
    if category == "Cf" or ch in _INVISIBLE_EXTRA or 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF:
        return ""
    if 0xFF01 <= cp <= 0xFF5E:  # full-width ASCII
        return chr(cp - 0xFEE0)
    if ch in _DASHES:
        return "-"
    if category == "Nd":
        return str(unicodedata.decimal(ch))
    if category == "Zs":
        return " "
    compat = unicodedata.normalize("NFKC", ch)
    if len(compat) == 1 and compat.isascii() and compat.isalnum():
        return compat
    return ch


_CHAR_MAP = _CharMap()


class Work:
    """The normalised copy of a text plus, for each of its characters, the original span."""

    __slots__ = ("text", "starts", "ends")

    def __init__(self, text: str, starts: list[int], ends: list[int]) -> None:
        self.text = text
        self.starts = starts
        self.ends = ends

    @classmethod
    def of(cls, original: str) -> Work:
        if original.isascii():
            n = len(original)
            text = _BETWEEN_DIGITS_RE.sub(_separator, original) if "_" in original else original
            return cls(text, list(range(n)), list(range(1, n + 1)))
        chars: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        for i, ch in enumerate(original):
            out = _CHAR_MAP[ch]
            for c in out:
                chars.append(c)
                starts.append(i)
                ends.append(i + 1)
        # one character for one, so the maps still hold
        text = _BETWEEN_DIGITS_RE.sub(_separator, "".join(chars))
        text = _JOINER_BETWEEN_RE.sub(_fold_joiner, text)
        if _CONFUSABLE_RE.search(text):
            text = _MIXED_WORD_RE.sub(_fold_mixed_word, text)
        return cls(text, starts, ends)

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        return self.starts[start], self.ends[end - 1]

    def replace(self, spans: list[tuple[int, int, str]], placeholders: dict[str, str]) -> Work:
        """A new copy with each (start, end, kind) span replaced by its placeholder; the
        placeholder's characters all map to the original span they replace."""
        parts: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        pos = 0
        for s, e, kind in spans:
            parts.append(self.text[pos:s])
            starts.extend(self.starts[pos:s])
            ends.extend(self.ends[pos:s])
            placeholder = placeholders[kind]
            o_start, o_end = self.starts[s], self.ends[e - 1]
            parts.append(placeholder)
            starts.extend([o_start] * len(placeholder))
            ends.extend([o_end] * len(placeholder))
            pos = e
        parts.append(self.text[pos:])
        starts.extend(self.starts[pos:])
        ends.extend(self.ends[pos:])
        return Work("".join(parts), starts, ends)
