"""The access log (SPEC §8.1): which agent read which memory versions, as ids, never text.

- `record` writes one entry per agent read that returned memories (called by `memoryapp.reads`, shared
  by REST and MCP); a read that returned nothing is not logged. The entry is written before the
  answer leaves, in one statement, and lists only the versions still stored at that moment, so an
  erase committing between the read and its entry is never undone by it (`record`'s docstring: the
  locks). On PostgreSQL its transaction commits with `synchronous_commit = off`: it survives any
  crash of the application, and only a crash of the database server within about 3 x
  `wal_writer_delay` can lose it — what SQLite's `synchronous=NORMAL` gives the embedded default.
  Memories themselves, and erases, still commit synchronously. Not deferred past the answer, on
  purpose: docs/decisions.md "The access-log entry is written before the answer".
- `strike_references` runs inside every erase (`retention.erasure.erase_memories`): the erased
  versions' references leave every entry that lists them; an entry left listing nothing is
  deleted. `count_listing` is the erase's verification that none is left.
- `member_entries`, `readable_versions` and `daily_counts` are what the member's page and API
  show, and the owners' counts per day; `daily_counts_for` holds the owners' rule (who may read
  the counts, their window).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from core.cursors import decode_cursor, encode_cursor
from core.errors import ApiError, validation_error
from core.timestamps import iso, parse_instant
from governance.models import AskHistorySettings, Credential, Member, Workspace
from memoryapp.models import AccessEntry, MemoryVersion
from memoryapp.visibility import recheck

ENTRY_ARTIFACT = "access_log_entry"  # entries erased: every memory they listed is erased
REFERENCE_ARTIFACT = "access_log_reference"  # references struck from entries that list other memories too


# --- writing --------------------------------------------------------------------------------------
_TABLE = AccessEntry._meta.db_table
_VERSIONS = MemoryVersion._meta.db_table


def record(
    *,
    credential: Credential,
    member: Member,
    operation: str,
    surface: str,
    memories: Sequence[dict[str, Any]],
    hidden: int,
) -> int | None:
    """Write the read's entry: the memory objects' ids and version numbers, in the order returned.
    Answers the entry's id, or None when no entry was written (nothing returned, or everything
    returned was erased since).

    The read and this write are not one transaction: an erase may commit between them. The entry
    therefore lists only the versions still stored when it is written (the others are counted in
    `erased`, as `strike_references` would have counted them), and the check cannot miss an erase
    running beside it. On PostgreSQL it is one statement that takes FOR KEY SHARE on the listed
    versions: an erase locks them FOR UPDATE before it deletes them and strikes the log, so either
    the erase waits for this entry to commit and then strikes it, or this entry waits for the
    erase to commit and finds them gone. On SQLite one statement inserts the entry only if every
    listed version is stored (a statement holds the write lock, which every erase takes); if not,
    `_record_survivors` writes what is left in one IMMEDIATE transaction. One statement, one
    commit, as the plain INSERT was."""
    if not memories:
        return None
    refs = [{"id": int(m["id"]), "v": int(m["version"])} for m in memories]
    ids = [ref["id"] for ref in refs]
    at = connection.ops.adapt_datetimefield_value(timezone.now())
    values = [member.workspace_id, member.pk, credential.pk, credential.name, operation, surface, at, len(refs), hidden]
    marks = ", ".join(["%s"] * len(values))
    if connection.vendor == "postgresql":
        # Its own transaction (autocommit) commits without waiting for the WAL flush; inside a
        # caller's transaction the setting would reach the caller's writes too, so it is not set.
        commit = None if connection.in_atomic_block else "off"
        sql = (
            "WITH relaxed AS (SELECT set_config('synchronous_commit', coalesce(%s, "
            "current_setting('synchronous_commit')), true)), listed AS (SELECT r.ref, r.ord FROM "
            f"jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS r(ref, ord)), stored AS (SELECT id FROM {_VERSIONS} "
            f"WHERE id = ANY(%s) FOR KEY SHARE) INSERT INTO {_TABLE} ({_COLUMNS}) SELECT {marks}, %s - count(*), "
            "jsonb_agg(listed.ref ORDER BY listed.ord) FROM relaxed, listed JOIN stored ON stored.id = "
            "(listed.ref->>'id')::bigint HAVING count(*) > 0 RETURNING id"
        )
        params = [commit, json.dumps(refs), ids, *values, len(refs)]
    else:
        sql = (
            f"INSERT INTO {_TABLE} ({_COLUMNS}) SELECT {marks}, 0, %s WHERE (SELECT count(*) FROM {_VERSIONS} "
            "WHERE id IN (SELECT value FROM json_each(%s))) = %s RETURNING id"
        )
        params = [*values, json.dumps(refs), json.dumps(ids), len(set(ids))]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is not None or connection.vendor == "postgresql":
        return row[0] if row else None
    return _record_survivors(values, refs)


_COLUMNS = (
    "workspace_id, member_id, credential_ref, credential_name, operation, surface, at, returned, hidden, erased, "
    "memories"
)


def _record_survivors(values: list[Any], refs: list[dict[str, int]]) -> int | None:
    """SQLite, when an erase came between the read and its entry: the entry lists the versions
    still stored, inside one IMMEDIATE transaction (no erase runs beside it)."""
    with transaction.atomic():
        stored = {
            pk
            for (pk,) in _rows(
                f"SELECT id FROM {_VERSIONS} WHERE id IN (SELECT value FROM json_each(%s))",
                [json.dumps([ref["id"] for ref in refs])],
            )
        }
        kept = [ref for ref in refs if ref["id"] in stored]
        if not kept:
            return None
        rows = _rows(
            f"INSERT INTO {_TABLE} ({_COLUMNS}) VALUES ({', '.join(['%s'] * 11)}) RETURNING id",
            [*values, len(refs) - len(kept), json.dumps(kept)],
        )
        return rows[0][0]


# --- erasing with the memories ---------------------------------------------------------------------
_PG_HIT = "(ref->>'id')::bigint = ANY(%s)"


def _listing_sql(
    ids: Sequence[int], member_id: int | None, *, select: str, select_params: Sequence[Any] = (), lock: bool = False
) -> tuple[str, list[Any]]:
    """The entries that list any of `ids`. PostgreSQL answers from the GIN index on `memories`
    (`@>` containment, one probe per id); SQLite walks each entry's list with json_each (scoped
    to the member's entries when the caller knows the member)."""
    params: list[Any] = list(select_params)
    where = []
    if member_id is not None:
        where.append("member_id = %s")
        params.append(member_id)
    if connection.vendor == "postgresql":
        where.append("memories @> ANY(%s::jsonb[])")
        params.append([json.dumps([{"id": int(i)}]) for i in ids])
    else:
        where.append(
            f"EXISTS (SELECT 1 FROM json_each({_TABLE}.memories) AS ref WHERE json_extract(ref.value, '$.id') IN "
            "(SELECT value FROM json_each(%s)))"
        )
        params.append(json.dumps([int(i) for i in ids]))
    sql = f"SELECT {select} FROM {_TABLE} WHERE {' AND '.join(where)}"
    if lock and connection.vendor == "postgresql":
        sql += " ORDER BY id FOR UPDATE"  # two erases striking one entry wait for each other: no lost update
    return sql, params


def _rows(sql: str, params: list[Any]) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def strike_references(version_ids: Sequence[int], *, member_id: int | None = None) -> dict[str, int]:
    """Erase the access log's traces of these memory versions, inside the erase's transaction.
    Answers the manifest's counts: entries erased, references struck from entries kept.

    The listing entries are locked first; those listing nothing else are deleted, the others
    rewritten without the erased references. On PostgreSQL the rewrite is one UPDATE computed in
    the database, not Django's bulk_update (docs/benchmarks.md "Figures behind code choices")."""
    counts = {ENTRY_ARTIFACT: 0, REFERENCE_ARTIFACT: 0}
    ids = sorted({int(i) for i in version_ids})
    if not ids:
        return counts
    doomed: list[int] = []
    kept: list[int] = []
    if connection.vendor == "postgresql":
        select = (
            "id, jsonb_array_length(memories), "
            f"(SELECT count(*) FROM jsonb_array_elements(memories) AS ref WHERE {_PG_HIT})"
        )
        for pk, listed, struck in _rows(*_listing_sql(ids, member_id, select=select, select_params=[ids], lock=True)):
            (doomed if struck >= listed else kept).append(pk)
            counts[REFERENCE_ARTIFACT] += struck if struck < listed else 0
        with connection.cursor() as cursor:
            if doomed:
                cursor.execute(f"DELETE FROM {_TABLE} WHERE id = ANY(%s)", [doomed])
                counts[ENTRY_ARTIFACT] = cursor.rowcount
            if kept:
                cursor.execute(
                    f"UPDATE {_TABLE} SET memories = coalesce((SELECT jsonb_agg(r.ref ORDER BY r.ord) FROM "
                    "jsonb_array_elements(memories) WITH ORDINALITY AS r(ref, ord) WHERE NOT "
                    "((r.ref->>'id')::bigint = ANY(%s))), '[]'::jsonb), erased = erased + (SELECT count(*) FROM "
                    f"jsonb_array_elements(memories) AS ref WHERE {_PG_HIT}) WHERE id = ANY(%s)",
                    [ids, ids, kept],
                )
        return counts
    erased = set(ids)
    rewrites: list[tuple[str, int, int]] = []
    for pk, memories, already in _rows(*_listing_sql(ids, member_id, select="id, memories, erased")):
        refs = json.loads(memories) if isinstance(memories, str) else memories
        remaining = [ref for ref in refs if int(ref["id"]) not in erased]
        if remaining:
            rewrites.append((json.dumps(remaining), already + len(refs) - len(remaining), pk))
            counts[REFERENCE_ARTIFACT] += len(refs) - len(remaining)
        else:
            doomed.append(pk)
    for start in range(0, len(doomed), 900):
        counts[ENTRY_ARTIFACT] += AccessEntry.objects.filter(pk__in=doomed[start : start + 900])._raw_delete(
            connection.alias
        )
    if rewrites:
        with connection.cursor() as cursor:
            cursor.executemany(f"UPDATE {_TABLE} SET memories = %s, erased = %s WHERE id = %s", rewrites)
    return counts


def strike_counts(version_ids: Sequence[int], *, member_id: int | None = None) -> dict[str, int]:
    """What `strike_references` would count for these versions, writing nothing: for a preview
    (dry run) of an erase, whose manifest carries the same artifact classes."""
    counts = {ENTRY_ARTIFACT: 0, REFERENCE_ARTIFACT: 0}
    ids = sorted({int(i) for i in version_ids})
    if not ids:
        return counts
    erased = set(ids)
    for (memories,) in _rows(*_listing_sql(ids, member_id, select="memories")):
        refs = json.loads(memories) if isinstance(memories, str) else memories
        struck = sum(1 for ref in refs if int(ref["id"]) in erased)
        if struck >= len(refs):
            counts[ENTRY_ARTIFACT] += 1
        else:
            counts[REFERENCE_ARTIFACT] += struck
    return counts


_SCAN_MEMBER_ABOVE = 200  # ids: above this, a preview reads the member's entries instead of probing per id


def strike_counts_in_order(batches: Sequence[Sequence[int]], *, member_id: int | None = None) -> dict[str, int]:
    """What `strike_references` would count, summed, if it ran once per batch in this order
    (the chunks of a sweep), writing nothing. An entry whose references are spread over several
    batches has the earlier ones struck and is erased by the last; one batch = `strike_counts`."""
    counts = {ENTRY_ARTIFACT: 0, REFERENCE_ARTIFACT: 0}
    batch_of: dict[int, int] = {}
    for index, batch in enumerate(batches):
        for pk in batch:
            batch_of.setdefault(int(pk), index)
    if not batch_of:
        return counts
    if member_id is not None and len(batch_of) > _SCAN_MEMBER_ABOVE:
        # A bulk preview names most of a member's memories: reading the member's entries once
        # beats one GIN probe per id (docs/benchmarks.md "Figures behind code choices").
        rows = _rows(f"SELECT memories FROM {_TABLE} WHERE member_id = %s", [member_id])
    else:
        rows = _rows(*_listing_sql(sorted(batch_of), member_id, select="memories"))
    for (memories,) in rows:
        refs = json.loads(memories) if isinstance(memories, str) else memories
        hits = [batch_of[int(ref["id"])] for ref in refs if int(ref["id"]) in batch_of]
        if not hits:
            continue
        if len(hits) >= len(refs):
            last = max(hits)
            counts[ENTRY_ARTIFACT] += 1
            counts[REFERENCE_ARTIFACT] += sum(1 for index in hits if index < last)
        else:
            counts[REFERENCE_ARTIFACT] += len(hits)
    return counts


def count_listing(version_ids: Sequence[int], *, member_id: int | None = None) -> int:
    """How many entries still list any of these versions (a clean erase leaves 0)."""
    ids = sorted({int(i) for i in version_ids})
    if not ids:
        return 0
    return int(_rows(*_listing_sql(ids, member_id, select="count(*)"))[0][0])


def delete_chunk(queryset: QuerySet[AccessEntry], chunk: int) -> tuple[int, int]:
    """One chunk of a sweep: (entries picked, entries deleted)."""
    ids = list(queryset.order_by("pk").values_list("pk", flat=True)[:chunk])
    return len(ids), AccessEntry.objects.filter(pk__in=ids)._raw_delete(connection.alias) if ids else 0


# --- reading: the member ---------------------------------------------------------------------------
@dataclass
class EntryFilters:
    credential_id: int | None = None
    operation: str | None = None
    since: datetime | None = None  # inclusive
    until: datetime | None = None  # exclusive


def member_entries(member: Member, filters: EntryFilters | None = None) -> QuerySet[AccessEntry]:
    """The member's own entries, newest first. Never anyone else's, whatever the role."""
    queryset = AccessEntry.objects.restrict(member, "view")
    filters = filters or EntryFilters()
    if filters.credential_id is not None:
        queryset = queryset.filter(credential_ref=filters.credential_id)
    if filters.operation:
        queryset = queryset.filter(operation=filters.operation)
    if filters.since is not None:
        queryset = queryset.filter(at__gte=filters.since)
    if filters.until is not None:
        queryset = queryset.filter(at__lt=filters.until)
    return queryset.order_by("-at", "-id")


def _cursor_scope(member: Member) -> str:
    return f"access-log:{member.pk}"


def page_of(
    queryset: QuerySet[AccessEntry], member: Member, *, limit: int, cursor: str | None
) -> tuple[list[AccessEntry], str | None]:
    """Keyset pagination, newest first; the cursor is signed and valid only for this member."""
    if cursor:
        at, pk = decode_cursor(cursor, scope=_cursor_scope(member))  # signed by us: its content is ours
        queryset = queryset.filter(Q(at__lt=parse_instant(at)) | Q(at=parse_instant(at), id__lt=int(pk)))
    entries = list(queryset[: limit + 1])
    more = len(entries) > limit
    entries = entries[:limit]
    next_cursor = encode_cursor([iso(entries[-1].at), entries[-1].pk], scope=_cursor_scope(member)) if more else None
    return entries, next_cursor


READABLE, HIDDEN, ERASED = "readable", "hidden", "erased"


def readable_versions(member: Member, entries: Iterable[AccessEntry]) -> tuple[dict[int, MemoryVersion], set[int]]:
    """The listed versions the member may open now, and those hidden by the live source
    re-check (SPEC §4.2). Anything else listed is gone: erased, expired, or unreachable."""
    ids = {ref_id for entry in entries for ref_id in entry.memory_ids}
    if not ids:
        return {}, set()
    ask_history: AskHistorySettings = member.workspace.ask_history
    versions = list(MemoryVersion.objects.restrict(member, "keep", ask_history=ask_history).filter(pk__in=ids))
    checked = recheck(versions, member)
    visible = {v.pk: v for v in checked.visible}
    hidden = {v.pk for v in versions} - set(visible)
    return visible, hidden


def state_of(ref_id: int, visible: dict[int, MemoryVersion], hidden: set[int]) -> str:
    if ref_id in visible:
        return READABLE
    return HIDDEN if ref_id in hidden else ERASED


def entry_json(entry: AccessEntry, visible: dict[int, MemoryVersion], hidden: set[int]) -> dict[str, Any]:
    """An entry as its member sees it: ids, versions and their state now; no text (the page
    opens the readable ones)."""
    return {
        "id": str(entry.pk),
        "at": iso(entry.at),
        "credential": {"id": str(entry.credential_ref), "name": entry.credential_name},
        "operation": entry.operation,
        "surface": entry.surface,
        "returned": entry.returned,
        "hidden": entry.hidden,
        "erasedSince": entry.erased,
        "memories": [
            {"id": str(ref["id"]), "version": ref["v"], "state": state_of(int(ref["id"]), visible, hidden)}
            for ref in entry.memories
        ],
    }


# --- reading: owners, counts per day ---------------------------------------------------------------
WORKSPACE_COUNTS_PERMISSION = "ask_history:manage"  # the owner's: counts for the whole workspace
DEFAULT_DAYS = 30  # the window without `since`: the 30 days to `until`
MAX_DAYS = 366  # the widest window one answer covers


def daily_counts_for(
    member: Member,
    *,
    since: date | None = None,
    until: date | None = None,
    operation: str | None = None,
    member_only: Sequence[str] = (),
) -> dict[str, Any]:
    """The workspace's counts per UTC day as `member` may read them (the API's `scope=workspace`):
    only with `ask_history:manage` (else 403 naming it). `member_only` names the member-scope
    filters the caller was given (a credential, a cursor): refused, these counts name no
    credential and come in one answer. The window runs to `until` (default today, UTC), from
    `since` (default 30 days to `until`), at most `MAX_DAYS` days."""
    if not member.has_perm(WORKSPACE_COUNTS_PERMISSION):
        raise ApiError(
            403,
            "FORBIDDEN",
            f"This needs the {WORKSPACE_COUNTS_PERMISSION} permission.",
            {"permission": WORKSPACE_COUNTS_PERMISSION},
        )
    if member_only:
        raise validation_error(
            {member_only[0]: ["Not available with scope=workspace: it answers counts per day only."]}
        )
    until = until or timezone.now().astimezone(UTC).date()
    since = since or until - timedelta(days=DEFAULT_DAYS - 1)
    if (until - since).days >= MAX_DAYS:
        raise validation_error({"from": [f"At most {MAX_DAYS} days at once."]})
    return {
        "scope": "workspace",
        "retentionDays": settings.ACCESS_LOG_RETENTION_DAYS,
        "from": since.isoformat(),
        "to": until.isoformat(),
        "days": daily_counts(member.workspace, since=since, until=until, operation=operation),
    }


def daily_counts(
    workspace: Workspace, *, since: date, until: date, operation: str | None = None
) -> list[dict[str, Any]]:
    """Per UTC day: how many agent reads returned memories and how many memories they returned,
    by operation and surface. No member, credential or memory is named."""
    start = datetime.combine(since, time.min, tzinfo=UTC)
    end = datetime.combine(until + timedelta(days=1), time.min, tzinfo=UTC)
    queryset = AccessEntry.objects.within_retention().filter(workspace=workspace, at__gte=start, at__lt=end)
    if operation:
        queryset = queryset.filter(operation=operation)
    rows = (
        queryset.annotate(day=TruncDate("at", tzinfo=UTC))
        .values("day", "operation", "surface")
        .annotate(reads=Count("id"), memories=Sum("returned"))
        .order_by("-day", "operation", "surface")
    )
    days: dict[date, dict[str, Any]] = {}
    for row in rows:
        day = days.setdefault(
            row["day"],
            {"date": row["day"].isoformat(), "reads": 0, "memoriesReturned": 0, "byOperation": {}, "bySurface": {}},
        )
        day["reads"] += row["reads"]
        day["memoriesReturned"] += row["memories"] or 0
        day["byOperation"][row["operation"]] = day["byOperation"].get(row["operation"], 0) + row["reads"]
        day["bySurface"][row["surface"]] = day["bySurface"].get(row["surface"], 0) + row["reads"]
    return list(days.values())
