"""Deterministic masking of personal data in free text (SPEC §4.1).

``mask(text)`` (or ``mask(text, region)`` with the workspace's region) replaces each piece of personal
data with a typed placeholder (``PLACEHOLDERS``). The stages run in a fixed order, most specific
first (SECRET, EMAIL, bank and card numbers, PHONE, NUMBER), each reading the text as the ones before
left it; numbers that are no personal data (``catalogue.protected_spans``) are left alone. Detectors
read a normalised copy, replacements are made on the original, so what is not replaced stays exactly
as written. The result is deterministic and idempotent: ``mask(mask(x).text).text == mask(x).text``.
Time is linear in the input; callers bound its size (``MAX_MASKED_CHARS`` per request).

The stages and what each catches: docs/masking.md "The pipeline" and docs/privacy.md "What masking covers".
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from memoryapp.masking import catalogue, email, identifiers, numbers, phone, secrets
from memoryapp.masking.common import PLACEHOLDER_RE, PLACEHOLDERS, Span
from memoryapp.masking.phone import PHONE_REGIONS, one_memory_budget
from memoryapp.masking.text import Work

__all__ = [
    "PLACEHOLDERS",
    "PHONE_REGIONS",
    "MAX_MASKED_CHARS",
    "MaskResult",
    "mask",
    "contains_personal_data",
    "name_kinds",
    "kinds_outside_identifiers",
    "is_effectively_empty",
    "detect_kinds",
    "one_memory_budget",
]

#: The most text one request may ask to mask (the sum over all its fields). A remember holds at
#: most 1,000 + 20 × 500 characters; a conversation turn is refused above this many characters
#: of messages (VALIDATION_ERROR), which bounds masking time per request (bench/masking.py).
MAX_MASKED_CHARS = 32_000

_MAX_ROUNDS = 4


@dataclass(frozen=True)
class MaskResult:
    text: str  # masked text
    kinds: tuple[str, ...]  # sorted, unique kinds that were replaced


_STAGES: tuple[Callable[[str], list[Span]], ...] = (
    *secrets.STAGES,
    email.stage_email,
    *secrets.LATE_STAGES,
    numbers.stage_iban,
    numbers.stage_cards,
    numbers.stage_il_id,
    numbers.stage_bank_shape,
    numbers.stage_bank_keyword,
    phone.stage_phone,
    phone.stage_phone_word,
    phone.stage_mobile,
    numbers.stage_ssn,
    catalogue.stage_ssn_label,
    numbers.stage_digit_groups,
    numbers.stage_long_number,
    catalogue.stage_national_id,
)


def _select(spans: list[Span]) -> list[Span]:
    """Sorted, non-overlapping spans. Overlapping spans are merged (never dropped, which could
    leave the non-shared part unmasked); the merged span keeps the kind of the one that starts
    first (longest on ties)."""
    merged: list[Span] = []
    for s, neg_e, k in sorted((s, -e, k) for s, e, k in spans):
        e = -neg_e
        if e <= s:
            continue
        if merged and s < merged[-1][1]:
            ms, me, mk = merged[-1]
            merged[-1] = (ms, max(me, e), mk)
        else:
            merged.append((s, e, k))
    return merged


def _merge(spans: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    starts: list[int] = []
    ends: list[int] = []
    for s, e in sorted(spans):
        if ends and s <= ends[-1]:
            ends[-1] = max(ends[-1], e)
        else:
            starts.append(s)
            ends.append(e)
    return starts, ends


def _inside(span: tuple[int, int], protected: tuple[list[int], list[int]]) -> bool:
    starts, ends = protected
    i = bisect.bisect_right(starts, span[0]) - 1
    return i >= 0 and span[1] <= ends[i]


def _stages_for(region: str | None) -> tuple[Callable[[str], list[Span]], ...]:
    """The stages, with the mobiles of the workspace's region right after the users' mobiles."""
    if region is None:
        return _STAGES
    at = _STAGES.index(phone.stage_mobile) + 1
    return (*_STAGES[:at], phone.region_mobile_stage(region), *_STAGES[at:])


def _mask_once(text: str, kinds: set[str], region: str | None = None) -> str:
    stages = _stages_for(region)
    work = Work.of(text)
    # numbers that are no personal data (lists of rooms, timestamps, order ids), as spans of the
    # original text: a detector's span inside one is dropped
    protected = _merge([work.original_span(s, e) for s, e in catalogue.protected_spans(work.text, region)])
    found: list[Span] = []  # spans of the original text
    for stage in stages:
        spans = stage(work.text)
        if spans and protected[0]:
            spans = [sp for sp in spans if not _inside(work.original_span(sp[0], sp[1]), protected)]
        if not spans:
            continue
        spans = _select(spans)
        found.extend((*work.original_span(s, e), k) for s, e, k in spans)
        kinds.update(k for _, _, k in spans)
        work = work.replace(spans, PLACEHOLDERS)
    if not found:
        return text
    parts: list[str] = []
    pos = 0
    for s, e, k in _select(found):
        parts.append(text[pos:s])
        parts.append(PLACEHOLDERS[k])
        pos = e
    parts.append(text[pos:])
    return "".join(parts)


def mask(text: str, region: str | None = None) -> MaskResult:
    """Replace personal data in ``text`` with typed placeholders.

    ``region``: the workspace's region (ISO 3166 alpha-2, one of phonenumbers' regions; ValueError
    otherwise). With it, that country's mobiles are masked in any grouping, without a phone word
    (``phone.region_mobile_stage``); without it, only in the national grouping."""
    if not isinstance(text, str):
        raise TypeError(f"mask() expects str, got {type(text).__name__}")
    if region is not None:
        phone.check_region(region)
    kinds: set[str] = set()
    current = text
    for _ in range(_MAX_ROUNDS):
        round_kinds: set[str] = set()
        masked = _mask_once(current, round_kinds, region)
        if masked == current:
            break
        kinds |= round_kinds
        current = masked
    return MaskResult(text=current, kinds=tuple(sorted(kinds)))


def detect_kinds(text: str, region: str | None = None) -> tuple[str, ...]:
    """Sorted, unique kinds of personal data found in ``text``."""
    return mask(text, region).kinds


def contains_personal_data(text: str, region: str | None = None) -> bool:
    """True if ``mask(text, region)`` would replace anything."""
    return bool(detect_kinds(text, region))


def name_kinds(name: str, *, identifiers: bool = True) -> tuple[str, ...]:
    """Kinds of personal data in a name that is stored as written (namespace, key, assistant
    topic, conversation id): what ``mask`` finds in it, read as written and, when it has
    underscores, with them read as spaces, since a snake_case topic cannot hold a space
    ("password_is_hunter2", "dana_at_example_dot_com", "call_5551234" are the sentences they
    spell). UUIDs and ULIDs are identifiers, not personal data: they are cut out first and the
    pieces around them read alone (``identifiers``), unless `identifiers` is False (a name a
    person chose, such as a topic, has no reason to hold one)."""
    read = kinds_outside_identifiers if identifiers else detect_kinds
    kinds = set(read(name))
    if "_" in name:
        kinds.update(read(name.replace("_", " ")))
    return tuple(sorted(kinds))


def kinds_outside_identifiers(text: str) -> tuple[str, ...]:
    """What ``detect_kinds`` finds in `text` once its UUIDs and ULIDs are cut out, each piece
    around them read alone (free text stored as written: conversation ids, credential names)."""
    kinds: set[str] = set()
    pieces = identifiers.pieces_around_identifiers(text)
    for piece in pieces:
        kinds.update(detect_kinds(piece))
    # An identifier inside an e-mail address is part of it ("john@mail.<uuid>.example.com",
    # "john﹫<uuid>.com", "john(at)<uuid>.com"): cut out, it would take the address's domain with
    # it. Addresses are read in the whole name; what the cut-out is for (an identifier's digits and
    # letters read as a phone, card or secret) cannot make one: it has no at sign or at word.
    if pieces != [text] and "EMAIL" not in kinds and email.stage_email(Work.of(text).text):
        kinds.add("EMAIL")
    if pieces != [text] and identifiers.labelled_identifier(text):
        kinds.add("SECRET")  # "password=<uuid>": the identifier is the secret's value
    return tuple(sorted(kinds))


def is_effectively_empty(masked_text: str) -> bool:
    """True if only placeholders, whitespace, punctuation or symbols remain.

    Uses Unicode categories: punctuation (P*), separators (Z*), control/format characters (C*)
    and the mathematical, currency and modifier symbols (Sm, Sc, Sk) do not count as content, so
    Japanese punctuation such as 、。「」 is ignored. Letters, marks, digits and the other symbols
    (So: emoji, pictographs, dingbats) count: a note of only emoji is a note.
    """
    rest = PLACEHOLDER_RE.sub(" ", masked_text)
    return all(unicodedata.category(ch)[0] in "PZC" or unicodedata.category(ch) in ("Sm", "Sc", "Sk") for ch in rest)
