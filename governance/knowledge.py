"""Knowledge rules shared by ingestion, citation checks and recall: how text splits into passages,
and which entities a text mentions. What a member may read is `Collection.objects.restrict` and
`Document.objects.restrict` (`core.restrict`)."""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from django.conf import settings

from governance.models import Entity, Workspace

_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]")


def split_passages(text: str) -> list[str]:
    """Passages are the non-empty paragraphs of a text (split on blank lines), in order."""
    normalised = text.replace("\r\n", "\n").replace("\r", "\n")
    return [part.strip() for part in _BLANK_LINE.split(normalised) if part.strip()]


def normalised_length(text: str) -> int:
    """A text's length after NFKC: what it costs to match and what the passage volume cap counts
    (U+FDFA, one character, is 18)."""
    return len(unicodedata.normalize("NFKC", text))


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _is_word(ch: str) -> bool:
    """`re`'s \\w for str patterns (what the word-boundary rule of SPEC §5.1 means here)."""
    return ch.isalnum() or ch == "_"


class EntityMatcher:
    """Finds which of a workspace's entities a text mentions (names and aliases, case-insensitive,
    on word boundaries; as a substring in CJK text), SPEC §5.1.

    One dict of normalised forms (NFKC, casefolded) → entity ids, and per first character the
    lengths of the forms that start with it. `find` walks the text once: at each position it
    looks up only the slices whose length a form starting with that character has, and (outside
    CJK) only where a word starts and ends. So a text costs at most len(text) × the number of
    distinct form lengths per first character (≤ 200, the longest form EntityBody allows)
    lookups, whatever the number of entities — where one regex per entity cost each text the
    entity count in passes (and a recompile each, past `re`'s 512-pattern cache)."""

    __slots__ = ("_bounded", "_bounded_lengths", "_anywhere", "_anywhere_lengths", "forms")

    def __init__(self, entities: Iterable[Entity]):
        bounded: dict[str, set[int]] = {}
        anywhere: dict[str, set[int]] = {}
        for entity in entities:
            for form in entity.surface_forms:
                normalised = _normalise(form) if form.strip() else ""
                if normalised:
                    # CJK text has no word boundaries: a substring match is the best signal
                    (anywhere if _CJK.search(form) else bounded).setdefault(normalised, set()).add(entity.pk)
        self._bounded, self._bounded_lengths = self._index(bounded)
        self._anywhere, self._anywhere_lengths = self._index(anywhere)
        self.forms = len(bounded) + len(anywhere)  # what the cache budget counts

    @staticmethod
    def _index(forms: dict[str, set[int]]) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
        lengths: dict[str, set[int]] = {}
        for form in forms:
            lengths.setdefault(form[0], set()).add(len(form))
        return {form: tuple(sorted(ids)) for form, ids in forms.items()}, {
            first: tuple(sorted(ls)) for first, ls in lengths.items()
        }

    def mentions(self, text: str, limit: int | None = None) -> list[int]:
        """The entity ids the text mentions, in the order of their first mention (ties: by id),
        stopping after `limit` distinct ones."""
        t = _normalise(text)
        n = len(t)
        found: dict[int, None] = {}
        bounded, bounded_lengths, anywhere, anywhere_lengths = (
            self._bounded,
            self._bounded_lengths,
            self._anywhere,
            self._anywhere_lengths,
        )
        after_word = False
        for start, ch in enumerate(t):
            hits: list[int] = []
            for length in anywhere_lengths.get(ch, ()):
                if start + length > n:
                    break
                hits.extend(anywhere.get(t[start : start + length], ()))
            if not after_word:
                for length in bounded_lengths.get(ch, ()):
                    end = start + length
                    if end > n:
                        break
                    if end == n or not _is_word(t[end]):
                        hits.extend(bounded.get(t[start:end], ()))
            for entity_id in sorted(set(hits)):
                if entity_id not in found:
                    found[entity_id] = None
                    if limit is not None and len(found) >= limit:
                        return list(found)
            after_word = _is_word(ch)
        return list(found)

    def find(self, text: str) -> set[int]:
        return set(self.mentions(text))

    @classmethod
    def for_workspace(cls, workspace_id: int) -> EntityMatcher:
        return cls(Entity.objects.filter(workspace_id=workspace_id).only("id", "name", "aliases"))


# --- one matcher per workspace, per process ---------------------------------------------------------
_matchers: OrderedDict[int, tuple[tuple[Any, int], EntityMatcher]] = OrderedDict()
_matchers_lock = threading.Lock()
_building: dict[int, threading.Lock] = {}  # one per workspace seen: a lock is a few dozen bytes


def matcher_for(workspace_id: int, version: tuple[Any, int] | None = None) -> EntityMatcher:
    """The workspace's matcher, built once per process and entity change.

    Every change to a workspace's entities raises `Workspace.entity_generation` in its own
    transaction (`Entity.changed`, on every save and delete), so each process learns of a change
    from the database, not from a message it could miss. `version`: the workspace's
    `entity_version` as the caller read it (a recall has the row from its gate); read here when
    not given, always before the entities are, so a matcher is never filed under a version
    older than its rows. A cached matcher serves only the version it was built for (a restored
    backup's lower counter, or a test database's reused id, rebuilds too). Cached matchers are
    kept in LRU order within `ENTITY_MATCHER_CACHE_FORMS` surface forms in all (the newest stays)."""
    if version is None:
        row = Workspace.objects.filter(pk=workspace_id).values_list("created_at", "entity_generation").first()
        version = (row[0], row[1]) if row else (None, 0)
    with _matchers_lock:
        cached = _matchers.get(workspace_id)
        if cached is not None and cached[0] == version:
            _matchers.move_to_end(workspace_id)
            return cached[1]
        building = _building.setdefault(workspace_id, threading.Lock())
    with building:  # one build per workspace at a time: the threads that wait use its result
        with _matchers_lock:
            cached = _matchers.get(workspace_id)
            if cached is not None and cached[0] == version:
                return cached[1]
        matcher = EntityMatcher.for_workspace(workspace_id)
    with _matchers_lock:
        _matchers[workspace_id] = (version, matcher)
        _matchers.move_to_end(workspace_id)
        budget = settings.ENTITY_MATCHER_CACHE_FORMS
        while len(_matchers) > 1 and sum(m.forms for _, m in _matchers.values()) > budget:
            _matchers.popitem(last=False)
    return matcher
