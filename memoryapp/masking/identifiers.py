"""Identifiers that are not personal data: UUIDs and ULIDs in names stored as written.

Namespaces, keys, assistant topics and conversation ids are never masked, so they are refused
when the detector finds personal data in them (``name_kinds``). A random identifier is full of
digits: read as text, about one `str(uuid4())` in five holds a run that looks like a phone, card,
Israeli ID or long number, and LangGraph's own examples key items by `uuid4()`. So identifier-shaped
tokens are cut out of a name before it is read, and the pieces around them are read alone (the
digits on either side never join into one number through the identifier).

What counts as an identifier, as a whole token (no letter, digit or invisible character next to
it, so it cannot be the tail of a longer run):

- a UUID of any version, in any case: `8-4-4-4-12` hex digits with hyphens, or 32 hex digits;
- a ULID: 26 characters of Crockford's base 32 (no I, L, O, U), the first one 0-7, in any case.

Each must hold at least one letter: an all-digit token of that length is a number before it is an
identifier, and is read as one (a random UUID is all digits once in ~10^6).

What this does not catch: digits a writer deliberately hides inside an identifier's shape. The
check reads personal data as it is written, not what someone disguises on purpose (a hex or
base-32 encoding of a phone number passes with or without this module).
"""

from __future__ import annotations

import re
import unicodedata

_UUID = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}|[0-9A-Fa-f]{32}"
_ULID = r"[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}"
_IDENTIFIER_RE = re.compile(rf"(?:{_UUID}|{_ULID})")
_LETTER_RE = re.compile(r"[A-Za-z]")
# what joins an identifier to the rest of a key ("user-<uuid>", "thread_<uuid>", "ns:<uuid>")
_JOINERS = " -_.:/\\|,;=~#"


def _boundary(ch: str) -> bool:
    """A character an identifier may touch: not a letter or digit of any script (a full-width
    or Arabic-Indic digit would extend the run), not invisible (the detector drops those,
    which would join the identifier to what is on the other side), and not an at sign or its
    full-width form: an identifier next to one is part of an e-mail address
    (`john@<ulid>.gmail.com`), which is read whole."""
    return not ch.isalnum() and ch not in "@\uff20" and unicodedata.category(ch) not in ("Cf", "Mn", "Me")


def identifier_spans(name: str) -> list[tuple[int, int]]:
    """The (start, end) of every identifier-shaped token in `name`."""
    spans: list[tuple[int, int]] = []
    for m in _IDENTIFIER_RE.finditer(name):
        s, e = m.span()
        if (s > 0 and not _boundary(name[s - 1])) or (e < len(name) and not _boundary(name[e])):
            continue
        if _LETTER_RE.search(m.group()):
            spans.append((s, e))
    return spans


# A secret's label written as an assignment or a header before an identifier: "password=<uuid>",
# "api_key: <uuid>", "Authorization: Bearer <uuid>", "password is <uuid>" (a UUID is what some
# services issue as an API key). Not a prefix joined by a colon, hyphen or underscore
# ("token:<uuid>", "session-<uuid>", "secret_<uuid>", "password_reset:<uuid>"): that is how keys
# name what an identifier is.
_SECRET_LABEL_RE = re.compile(
    r"(?i)(?<![A-Za-z])(?:password|passwd|passphrase|pwd|api[ _-]?key|secret|access[ _-]?token|token|bearer)"
    r"(?:[ \t]*=[ \t]*|[ \t]*:[ \t]+|[ \t]+is[ \t]+|(?<=[Bb]earer)[ \t]+)\Z"
)


def labelled_identifier(name: str) -> bool:
    """Whether an identifier in `name` is the value of a secret's label (``_SECRET_LABEL_RE``)."""
    return any(_SECRET_LABEL_RE.search(name, max(0, s - 40), s) for s, _ in identifier_spans(name))


def pieces_around_identifiers(name: str) -> list[str]:
    """`name` without its identifiers: the non-empty pieces between them, to be read alone."""
    spans = identifier_spans(name)
    if not spans:
        return [name]
    pieces, pos = [], 0
    for s, e in spans:
        pieces.append(name[pos:s])
        pos = e
    pieces.append(name[pos:])
    # The separator that joined a piece to the identifier is not part of the piece: an e-mail
    # before "-<uuid>" must not end in "-", which no address does.
    cut = [p.rstrip(_JOINERS) if i < len(pieces) - 1 else p for i, p in enumerate(pieces)]
    cut = [p.lstrip(_JOINERS) if i > 0 else p for i, p in enumerate(cut)]
    return [p for p in cut if p]
