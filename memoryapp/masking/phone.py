"""Phone numbers (SPEC §4.1).

``phonenumbers.PhoneNumberMatcher`` (leniency POSSIBLE, regions ``PHONE_REGIONS``) on
"windows" of phone-like characters with >= 7 digits, plus acceptance rules that keep dates,
versions and invoice numbers out (see ``_phone_candidate_ok``). Space-separated lists of numbers,
which the matcher cannot split, get a second pass that segments the leftover tokens and checks
each candidate with ``phonenumbers.parse``. International call prefixes (00, 001, 011) count as
"+". An extension after a number (x3682, ext. 12, 内線 123) belongs to it. A short local number
right after a phone word of the users' languages ("call 555-1234", 電話 1234-5678, "ruf mich an
unter 555 1234"; ``words.PHONE_WORDS``) is a phone too.

Over ~400 lines on purpose: one detector (windows, the matcher, the acceptance rules, the
segmenting second pass); its rules only make sense read together.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import NamedTuple

import phonenumbers
from phonenumbers import Leniency, PhoneNumberMatcher

from memoryapp.masking.common import (
    DATE_INSIDE_RE,
    DATE_LIKE_RE,
    DIGIT_RE,
    HAS_DIGIT_RE,
    IPV4_RE,
    Span,
    count_digits,
    is_date,
)
from memoryapp.masking.mobiles import (  # the mobile stages, named here as before (the catalogue reads them too)
    MOBILE_REGIONS,
    announced_list,
    check_region,
    is_mobile,
    is_region_mobile,
    region_mobile_stage,
    stage_mobile,
)
from memoryapp.masking.numbers import stage_digit_groups, stage_long_number
from memoryapp.masking.words import PHONE_CONNECTORS, PHONE_WORDS, word_pattern

#: Default regions used to interpret phone numbers written without "+".
PHONE_REGIONS: tuple[str, ...] = ("IL", "JP", "US", "GB")

_EXTENSION_RE = re.compile(
    r"[ \t]*+(?:[,;][ \t]*+)?\(?(?:(?i:x|ext|extn|extension|ext\s*no)\.?|内線|#|שלוחה)[ \t]*+[:.]?[ "
    r"\t]*+[0-9]{1,6}(?![0-9])\)?"
)

# -- phones ---------------------------------------------------------------------
# A window is a maximal run of characters that can appear inside a phone
# number; phonenumbers only ever looks at windows with >= 7 digits.
# (a run of two or more spaces/tabs ends a window: numbers never contain one)
_PHONE_WINDOW_RE = re.compile(r"[+(\[]*[0-9](?:[0-9().\-/\[\]~\u30fc\uff70]|[ \t](?![ \t]))*")
_TOKEN_RE = re.compile(r"[^ \t]+")
_SEGMENT_MAX_TOKENS = 6
_SEGMENT_MAX_DIGITS = 17
_SEGMENT_BUDGET = 150
_PHONE_CONTEXT = 4  # characters of context given to the matcher on each side
_PHONE_MIN_DIGITS = 7
_PHONE_PIECE = 40  # long windows are scanned in pieces of about this size
_COUNTRY_CODE_BEFORE_RE = re.compile(r"(?<![0-9])\+[0-9]{1,3}[ \t]*(?:\(0\)[ \t]*)?\Z")

# -- things that are never a phone / bank account -----------------------------
_DATE_LIKE_RE = re.compile(
    r"(?:[0-9]{4}([-./])[0-9]{1,2}\1[0-9]{1,2}|[0-9]{1,2}([-./])[0-9]{1,2}\2[0-9]{2,4})"
    r"(?:[ T][0-9]{1,2})?"
)
# a date anywhere inside a candidate ("01.01.1900 - 1900/1/1") disqualifies it
_DATE_INSIDE_RE = re.compile(
    r"(?<![0-9])(?:[0-9]{4}([-./])[0-9]{1,2}\1[0-9]{1,2}|[0-9]{1,2}([-./])[0-9]{1,2}\2[0-9]{2,4})(?![0-9])"
)
_IPV4_RE = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}")
_NANP_SHAPE_RE = re.compile(r"(?:\+?1[-. ]?)?(?:\([2-9][0-9]{2}\)[ ]?|[2-9][0-9]{2}[-. ])[0-9]{3}[-. ][0-9]{4}")


def _trim_brackets(text: str, start: int, end: int) -> tuple[int, int]:
    """Drop an unbalanced leading "(" / "[" (phonenumbers keeps it in "(+972 …)")."""
    while end - start > 1 and text[start] in "([" and ")]"[("([").index(text[start])] not in text[start:end]:
        start += 1
    while end - start > 1 and text[end - 1] in ")]" and "(["[(")]").index(text[end - 1])] not in text[start:end]:
        end -= 1
    return start, end


def _phone_candidate_ok(match) -> bool:
    """Accept a POSSIBLE-leniency match only if it really looks like a phone.

    ``Leniency.VALID`` alone is too strict (it rejects numbers in ranges the
    metadata does not list, e.g. 054-123-4567) and plain ``POSSIBLE`` matches
    dates, versions and invoice numbers, so the decision is made here:

    * candidates containing a date, and IPv4 addresses, are never phones;
    * written with "+" in international form: possible, at most 15 digits
      after the "+" (E.164); with the "00" call prefix: valid;
    * starting with the trunk prefix 0 (IL, JP, GB national forms) or "(":
      possible and 9–12 digits (longer runs are several numbers glued
      together by the matcher);
    * NANP shape (``212-555-0123``, ``1-800-555-0199``): possible;
    * otherwise: valid according to the metadata *and* written with exactly
      the digits of its own national format (so "2024-0012", which would be
      an Israeli number only with a missing trunk prefix, is not a phone,
      while "1-800-123-456" is).
    """
    raw = match.raw_string
    s, e = _trim_brackets(raw, 0, len(raw))
    raw = raw[s:e]
    if DATE_INSIDE_RE.search(raw) or IPV4_RE.fullmatch(raw):
        return False
    number = match.number
    if not phonenumbers.is_possible_number(number):
        return False
    digits = "".join(DIGIT_RE.findall(raw))
    first = raw[0]
    if first == "+":  # E.164: at most 15 digits (+1 for a "(0)" trunk prefix)
        return 8 <= len(digits) <= (16 if "(0)" in raw else 15)
    if digits.startswith(("00", "011")):  # an international call prefix, then an E.164 number
        return 10 <= len(digits) <= 18
    if first == "0" or first == "(":
        return 9 <= len(digits) <= 12
    if _NANP_SHAPE_RE.fullmatch(raw):
        return True
    if not phonenumbers.is_valid_number(number):
        return False
    national = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL)
    return "".join(DIGIT_RE.findall(national)) == digits


def _regions_for(snippet: str) -> tuple[str, ...]:
    """The regions whose national numbers can start in this snippet: a number written without "+"
    starts with the trunk prefix 0 in IL, JP and GB (IL toll-free numbers with 1), and never
    with 0 in the NANP (except the 011 international call prefix). International numbers do not
    depend on the region, so one region reads them."""
    starts = {
        snippet[i]
        for i in range(len(snippet))
        if "0" <= snippet[i] <= "9" and (i == 0 or not "0" <= snippet[i - 1] <= "9")
    }
    regions = []
    for region in PHONE_REGIONS:
        if region == "US":
            wanted = bool(starts - {"0"}) or "011" in snippet
        elif region == "IL":
            wanted = "0" in starts or "1" in starts
        else:
            wanted = "0" in starts
        if wanted:
            regions.append(region)
    if not regions and "+" in snippet:
        regions.append(PHONE_REGIONS[0])
    return tuple(regions)


def _phone_spans_in_snippet(snippet: str) -> tuple[tuple[int, int], ...]:
    """Accepted phone spans in a short snippet (merged over the regions that can apply).

    Regions are tried in order; once the accepted spans cover every digit of
    the snippet the remaining regions cannot add anything and are skipped.
    """
    # phonenumbers reads a tab as the end of a number; between groups it is a blank like any
    # other (a number copied from a spreadsheet cell), and one character for one keeps the spans
    snippet = snippet.replace("\t", " ")
    found: set[tuple[int, int]] = set()
    digit_positions = [i for i, ch in enumerate(snippet) if "0" <= ch <= "9"]
    for region in _regions_for(snippet):
        for match in PhoneNumberMatcher(snippet, region, leniency=Leniency.POSSIBLE):
            if _phone_candidate_ok(match):
                found.add(_trim_brackets(snippet, match.start, match.end))
        if found and all(any(s <= i < e for s, e in found) for i in digit_positions):
            break
    merged: list[list[int]] = []
    for s, e in sorted(found):
        if merged and s < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return tuple((s, e) for s, e in merged)


def _last_space(work: str, lo: int, hi: int) -> int:
    """Index of the last space/tab in work[lo:hi], or -1."""
    return max(work.rfind(" ", lo, hi), work.rfind("\t", lo, hi))


def _context_bounds(work: str, ws: int, we: int) -> tuple[int, int]:
    """Up to _PHONE_CONTEXT characters around a window, stopping before any
    digit (so a neighbouring number never leaks into the snippet)."""
    lo = ws
    while lo > 0 and ws - lo < _PHONE_CONTEXT and not "0" <= work[lo - 1] <= "9":
        lo -= 1
    hi = we
    n = len(work)
    while hi < n and hi - we < _PHONE_CONTEXT and not "0" <= work[hi] <= "9":
        hi += 1
    return lo, hi


def _window_phone_spans(work: str, ws: int, we: int) -> list[tuple[int, int]]:
    """Phone spans inside the window work[ws:we].

    Short windows go to the matcher whole (with a little context). Long
    windows (e.g. space-separated lists of numbers) are scanned in pieces of
    about ``_PHONE_PIECE`` characters cut at whitespace, because the matcher
    is quadratic on long runs of digits and spaces. A number that touches the
    last token of a piece may continue in the next piece, so it is not
    accepted there; the next piece starts at that number's token instead.
    """
    lo_ctx, hi_ctx = _context_bounds(work, ws, we)
    if we - ws <= _PHONE_PIECE:
        lo, hi = lo_ctx, hi_ctx
        return [(lo + s, lo + e) for s, e in _phone_spans_in_snippet(work[lo:hi])]
    out: list[tuple[int, int]] = []
    pos = ws
    while pos < we:
        end = min(we, pos + _PHONE_PIECE)
        if end < we:
            cut = _last_space(work, pos + 1, end)
            if cut > pos:
                end = cut
            else:  # a single very long token: take all of it
                nxt = [i for i in (work.find(" ", end, we), work.find("\t", end, we)) if i != -1]
                end = min(nxt) if nxt else we
        final = end >= we
        lo = lo_ctx if pos == ws else pos
        hi = hi_ctx if final else end
        spans = [(lo + s, lo + e) for s, e in _phone_spans_in_snippet(work[lo:hi])]
        last_tok = _last_space(work, pos, end) + 1
        if final or last_tok <= pos:
            out.extend(spans)
            pos = end
            continue
        next_pos = last_tok
        for s, e in spans:
            if e <= last_tok:
                out.append((s, e))
                continue
            # touches the last token: may continue in the next piece
            tok = _last_space(work, pos, s + 1) + 1
            if tok <= pos:  # the number fills the whole piece: accept it
                out.append((s, e))
                next_pos = max(e, pos + 1)
            else:
                next_pos = tok
            break
        pos = next_pos
    return out


class _Candidate(NamedTuple):
    """The two PhoneNumberMatch attributes that _phone_candidate_ok uses."""

    raw_string: str
    number: phonenumbers.PhoneNumber


def _raw_phone_ok(raw: str) -> bool:
    """Is ``raw`` on its own an acceptable phone number in one of the regions?"""
    for region in PHONE_REGIONS:
        try:
            number = phonenumbers.parse(raw, region)
        except phonenumbers.NumberParseException:
            number = None
        if number is not None and _phone_candidate_ok(_Candidate(raw, number)):
            return True
        if raw.startswith("+"):
            break  # the region does not matter for international numbers
    return False


def _segment_leftovers(
    work: str, ws: int, we: int, spans: list[tuple[int, int]], budget: list[int]
) -> list[tuple[int, int]]:
    """Second chance for digits the matcher left in a window.

    PhoneNumberMatcher cannot split space-separated lists of numbers that
    themselves contain spaces ("(201) 555-0000 07400 120000"). Uncovered runs
    of whitespace-separated tokens are segmented here, longest candidate
    first, each candidate checked with ``phonenumbers.parse`` and the same
    acceptance rules. ``budget`` (candidate checks per pass, shared by all
    windows) bounds the cost on number-heavy garbage, so the result only
    depends on the input.
    """
    out: list[tuple[int, int]] = []
    runs: list[list[tuple[int, int]]] = []
    cur: list[tuple[int, int]] = []
    for m in _TOKEN_RE.finditer(work, ws, we):
        ts, te = m.span()
        if not HAS_DIGIT_RE.search(work, ts, te) or any(s < te and ts < e for s, e in spans):
            if cur:
                runs.append(cur)
                cur = []
        else:
            cur.append((ts, te))
    if cur:
        runs.append(cur)
    for run in runs:
        if count_digits(work[run[0][0] : run[-1][1]]) < _PHONE_MIN_DIGITS:
            continue
        i = 0
        while i < len(run):
            # longest valid candidate starting at token i, else longest acceptable one
            best: tuple[int, int, int, int] | None = None  # (level, cs, ce, j)
            for j in range(min(len(run), i + _SEGMENT_MAX_TOKENS) - 1, i - 1, -1):
                cs, ce = _trim_brackets(work, run[i][0], run[j][1])
                n_digits = count_digits(work[cs:ce])
                if not _PHONE_MIN_DIGITS <= n_digits <= _SEGMENT_MAX_DIGITS:
                    continue
                if budget[0] <= 0:
                    return out
                budget[0] -= 1
                raw = work[cs:ce]
                level = (2 if _raw_phone_valid(raw) else 1) if _raw_phone_ok(raw) else 0
                if level and (best is None or level > best[0]):
                    best = (level, cs, ce, j)
                    if level == 2:
                        break
            if best is None:
                i += 1
            else:
                out.append((best[1], best[2]))
                i = best[3] + 1
    return out


def _phone_good(raw: str) -> bool:
    return _raw_phone_ok(raw) and _raw_phone_valid(raw)


def _drop_glued_token(work: str, s: int, e: int) -> tuple[int, int]:
    """In a space-separated list the matcher may glue a group of the next
    (or previous) number onto a number: "+972 2-123-0000 0121" from
    "… 0121 234 0000", or "0020 050-234-0000" from "056 1234 0020 …".
    If the span is not a valid number but becomes one without its last token
    (when that token starts like a national number, "0…") or without its first
    token, drop that token; the segmentation step then sees it together with
    the rest of its own number."""
    if " " not in work[s:e] and "\t" not in work[s:e]:
        return s, e  # nothing glued: every case below cuts at a space
    first = _TOKEN_RE.match(work, s, e)
    tail_start = first.end() if first is not None else e
    while tail_start < e and work[tail_start] in " \t":
        tail_start += 1
    if (
        first is not None
        and first.group().startswith("00")
        and len(first.group()) <= 5
        and tail_start < e
        and _phone_good(work[tail_start:e])
    ):
        # "0020 050-234-0000": the end of the previous number read as the
        # "00" international call prefix; the rest is a number of its own
        return tail_start, e
    if _phone_good(work[s:e]):
        return s, e
    cut = _last_space(work, s, e)
    if cut > s and work[cut + 1 : cut + 2] == "0":
        head_end = cut
        while head_end > s and work[head_end - 1] in " \t":
            head_end -= 1
        if head_end > s and _phone_good(work[s:head_end]):
            return s, head_end
    if tail_start < e and _phone_good(work[tail_start:e]):
        return tail_start, e
    return s, e


def _raw_phone_valid(raw: str) -> bool:
    """Is ``raw`` a valid (not merely possible) number in one of the regions?"""
    for region in PHONE_REGIONS:
        try:
            if phonenumbers.is_valid_number(phonenumbers.parse(raw, region)):
                return True
        except phonenumbers.NumberParseException:
            pass
        if raw.startswith("+"):
            break
    return False


#: phonenumbers is slow per snippet (docs/benchmarks.md "Figures behind code choices"). A text can
#: ask for this many snippet reads per pass; past it, the remaining windows are masked by shape
#: (any run of 7 or more digits in phone-like groups becomes NUMBER), so masking time stays linear
#: in the text with a small constant, and the result still depends on the input only.
MATCHER_BUDGET = 48
_FALLBACK_RUN_RE = re.compile(r"\+?\(?[0-9](?:[0-9]|[ .\-()](?=[0-9(]))*+\)?")


def _covered_by_number_stages(work: str, ws: int, we: int) -> list[Span] | None:
    """The spans the NUMBER stages would mask in a window, when they cover all its digits."""
    window = work[ws:we]
    spans = stage_digit_groups(window) + stage_long_number(window)
    covered = [False] * len(window)
    for s, e, _ in spans:
        for i in range(s, e):
            covered[i] = True
    if all(covered[i] for i, ch in enumerate(window) if "0" <= ch <= "9"):
        return [(ws + s, ws + e, k) for s, e, k in spans]
    return None


def _fallback_spans(work: str, ws: int, we: int) -> list[Span]:
    out: list[Span] = []
    for m in _FALLBACK_RUN_RE.finditer(work, ws, we):
        if count_digits(m.group()) >= _PHONE_MIN_DIGITS and not DATE_LIKE_RE.fullmatch(m.group()):
            out.append((m.start(), m.end(), "NUMBER"))
    return out


#: One memory's fields (its text and up to 20 lines of details) share one phone budget, this many
#: texts' worth, instead of one each, so twenty detail lines cost what two texts may (docs/benchmarks.md
#: "Figures behind code choices"). What the budget does not reach is masked by shape.
MEMORY_BUDGET_TEXTS = 2
_SHARED_BUDGET: ContextVar[list[int] | None] = ContextVar("phone_budget", default=None)


@contextmanager
def one_memory_budget() -> Iterator[None]:
    """Every `mask()` inside shares one phone budget (MEMORY_BUDGET_TEXTS texts' worth), in the
    order the calls are made: the result still depends on the input only."""
    token = _SHARED_BUDGET.set([_SEGMENT_BUDGET * MEMORY_BUDGET_TEXTS, MATCHER_BUDGET * MEMORY_BUDGET_TEXTS])
    try:
        yield
    finally:
        _SHARED_BUDGET.reset(token)


def stage_phone(work: str) -> list[Span]:
    if count_digits(work) < _PHONE_MIN_DIGITS:
        return []
    out: list[Span] = []
    shared = _SHARED_BUDGET.get()
    budget = shared if shared is not None else [_SEGMENT_BUDGET, MATCHER_BUDGET]  # [candidate checks, snippet reads]
    for w in _PHONE_WINDOW_RE.finditer(work):
        if w.end() - w.start() < _PHONE_MIN_DIGITS:
            continue
        window = w.group()
        if count_digits(window) < _PHONE_MIN_DIGITS or DATE_LIKE_RE.fullmatch(window.strip(" \t")):
            continue
        if len(window) > _PHONE_PIECE:
            # a long list of numbers that the NUMBER stages mask whole needs no phone reading
            covered = _covered_by_number_stages(work, w.start(), w.end())
            if covered is not None:
                out.extend(covered)
                continue
        budget[1] -= 1 + len(window) // _PHONE_PIECE
        if budget[1] < 0:
            out.extend(_fallback_spans(work, w.start(), w.end()))
            continue
        spans = _window_phone_spans(work, w.start(), w.end())
        spans = [_drop_glued_token(work, s, e) for s, e in spans]
        if " " in window or "\t" in window:
            spans += _segment_leftovers(work, w.start(), w.end(), spans, budget)
        for s, e in spans:
            # a country code right before an accepted number belongs to it
            # ("+972 1-800-120-000" where only "1-800-120-000" was accepted)
            cc = _COUNTRY_CODE_BEFORE_RE.search(work, max(w.start(), s - 12), s)
            ext = _EXTENSION_RE.match(work, e)
            out.append((cc.start() if cc else s, ext.end() if ext else e, "PHONE"))
    # overlapping spans are merged (never dropped, which would unmask)
    merged: list[Span] = []
    for s, e, k in sorted(out):
        if merged and s < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e), merged[-1][2])
        else:
            merged.append((s, e, k))
    return merged


# "call 555-1234", "電話 1234-5678", "טלפון: 12-3456", "ruf mich an unter 555 1234": a short local
# number after a phone word of one of the product's users' languages (``words.PHONE_WORDS``).
_PHONE_WORD_RE = re.compile(
    r"(?:" + word_pattern({w for ws in PHONE_WORDS.values() for w in ws}) + r")"
    r"(?:[ \t:：#.\-]|" + word_pattern(PHONE_CONNECTORS) + r")*?"
    r"(?<![0-9])(?P<v>\+?\(?[0-9](?:[0-9]|[ \t.\-/()](?=[0-9(]))*+)"
)


def stage_phone_word(work: str) -> list[Span]:
    if count_digits(work) < 6:
        return []
    out: list[Span] = []
    for m in _PHONE_WORD_RE.finditer(work):
        s, e = m.span("v")
        value = work[s:e]
        digits = count_digits(value)
        if not 6 <= digits <= 15 or is_date(value) or IPV4_RE.fullmatch(value):
            continue
        if work[e : e + 1] in (":", ",") and work[e + 1 : e + 2].isdigit():
            continue  # a time or a decimal number
        ext = _EXTENSION_RE.match(work, e)
        out.append((s, ext.end() if ext else e, "PHONE"))
    return out


__all__ = [
    "MOBILE_REGIONS",
    "announced_list",
    "check_region",
    "is_mobile",
    "is_region_mobile",
    "region_mobile_stage",
    "stage_mobile",
]
