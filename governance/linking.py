"""Entity links (SPEC §5.1) written outside the knowledge write that causes them, in bounded chunks.

A knowledge write never scans the workspace's passages inside its own transaction: on the
embedded default (SQLite, IMMEDIATE transactions) that would hold the one write lock of the file
for every workspace for as long as the scan takes. The write commits first,
with its pending state on the rows (`Entity.link_cursor`, `Passage.links_pending`); the links are
then matched while only reading, and written in short transactions of LINK_CHUNK passages each:
in the request when the work is small (ENTITY_LINK_INLINE_CHARS), else by the Celery task
`LINK_TASK`, and in any case by the periodic `link_sweep`, so a lost task or a restarted worker
loses nothing.

Why every link is found: an entity is matched against every passage committed before each chunk
of its scan is read, and it is committed before its scan starts; a passage is matched against
every entity committed before its matcher is read (`matcher_for` reads the workspace's entity
generation first), after the passage committed. For an entity E and a passage P, either P's
matcher was read before E committed (then E's scan, later still, reads P), or after (then P's
matcher holds E). Both sides may write the same link; the through table's unique pair keeps one.

A deleted document's passages are never linked: each chunk locks the documents it writes for and
skips the passages whose document is gone, and the deleting actions lock their documents first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from django.conf import settings
from django.db import transaction
from django.db.models import Sum

from core.task_queue import queue_task
from governance.knowledge import EntityMatcher, matcher_for
from governance.models import Document, Entity, Passage

logger = logging.getLogger(__name__)

LINK_CHUNK = 500  # passages matched, then written, per short write transaction
LINK_TASK = "governance.tasks.link_workspace"
Links = Entity.passages.through


def workspace_passage_chars(workspace_id: int) -> int:
    """The workspace's passages in all, in characters after NFKC (the volume cap counts this)."""
    return int(Passage.objects.filter(document__workspace_id=workspace_id).aggregate(total=Sum("chars"))["total"] or 0)


def _write(links: Iterable[tuple[int, int]], passage_ids: Sequence[int]) -> None:
    """Inside the caller's transaction: the links whose passage still exists, its document locked
    (a concurrent delete of the document waits for this transaction, or has already happened)."""
    links = list(links)
    if not links:
        return
    document_ids = set(Passage.objects.filter(pk__in=passage_ids).values_list("document_id", flat=True))
    locked = list(
        Document.objects.select_for_update().filter(pk__in=document_ids).order_by("pk").values_list("pk", flat=True)
    )
    alive = set(Passage.objects.filter(pk__in=passage_ids, document_id__in=locked).values_list("pk", flat=True))
    Links.objects.bulk_create([Links(entity_id=e, passage_id=p) for e, p in links if p in alive], ignore_conflicts=True)


def link_entity(entity_id: int) -> None:
    """Scan the workspace's passages for one entity, a chunk at a time, from its cursor, until its
    links are complete. Safe to run twice at once: a chunk is written only by whoever still holds
    the cursor it read (a restarted run goes on from the cursor)."""
    while True:
        row = Entity.objects.filter(pk=entity_id).values_list("workspace_id", "name", "aliases", "link_cursor").first()
        if row is None or row[3] is None:
            return
        workspace_id, name, aliases, cursor = row
        chunk = list(
            Passage.objects.filter(document__workspace_id=workspace_id, pk__gt=cursor)
            .order_by("pk")
            .values_list("pk", "text", "chars")[:LINK_CHUNK]
        )
        matcher = EntityMatcher([Entity(pk=entity_id, name=name, aliases=aliases)])
        links = [(entity_id, pk) for pk, text, _ in chunk if matcher.find(text)]
        with transaction.atomic():
            if not Entity.objects.select_for_update().filter(pk=entity_id, link_cursor=cursor).exists():
                continue  # deleted, or another run moved on: read again
            _write(links, [pk for pk, _, _ in chunk])
            Entity.objects.filter(pk=entity_id).update(link_cursor=chunk[-1][0] if len(chunk) == LINK_CHUNK else None)
        if len(chunk) < LINK_CHUNK:
            return


def pending_passages(workspace_id: int, version_id: int | None = None):
    pending = Passage.objects.filter(links_pending=True, document__workspace_id=workspace_id)
    return pending if version_id is None else pending.filter(version_id=version_id)


def link_passages(workspace_id: int, *, version_id: int | None = None) -> None:
    """Match the workspace's pending passages (of one document version, if given) against all its
    entities, a chunk at a time, until none is pending."""
    pending = pending_passages(workspace_id, version_id)
    while chunk := list(pending.order_by("pk").values_list("pk", "text", "chars")[:LINK_CHUNK]):
        matcher = matcher_for(workspace_id)  # read after the passages committed: see the module docstring
        ids = [pk for pk, _, _ in chunk]
        with transaction.atomic():
            _write(((entity_id, pk) for pk, text, _ in chunk for entity_id in matcher.find(text)), ids)
            Passage.objects.filter(pk__in=ids, links_pending=True).update(links_pending=False)


def link_workspace(workspace_id: int) -> None:
    """Everything pending in one workspace: its new entities' scans, then its new passages."""
    for entity_id in (
        Entity.objects.filter(workspace_id=workspace_id, link_cursor__isnull=False)
        .order_by("pk")
        .values_list("pk", flat=True)
    ):
        link_entity(entity_id)
    link_passages(workspace_id)


def link_sweep() -> dict[str, int]:
    """The periodic job: finish what a lost task or a restarted worker left pending."""
    workspaces = set(Entity.objects.filter(link_cursor__isnull=False).values_list("workspace_id", flat=True))
    workspaces |= set(
        Passage.objects.filter(links_pending=True).values_list("document__workspace_id", flat=True).distinct()
    )
    for workspace_id in sorted(workspaces):
        link_workspace(workspace_id)
    return {"workspacesLinked": len(workspaces)}


def start_linking(workspace_id: int, *, entity_id: int | None = None, version_id: int | None = None) -> bool:
    """After the write committed: link now when the work is small (ENTITY_LINK_INLINE_CHARS of
    normalised text to match), else queue the workspace's linking task. True when the links are
    complete on return; False: "pending" until the task or the sweep has run."""
    if entity_id is not None:
        work = workspace_passage_chars(workspace_id)
    else:
        work = int(pending_passages(workspace_id, version_id).aggregate(total=Sum("chars"))["total"] or 0)
    if work <= settings.ENTITY_LINK_INLINE_CHARS:
        if entity_id is not None:
            link_entity(entity_id)
        else:
            link_passages(workspace_id, version_id=version_id)
        return True
    try:
        queue_task(LINK_TASK, workspace_id)
    except Exception as exc:  # the broker is down: the link sweep finishes it
        logger.warning("entity linking not queued (the link sweep finishes it): %s", type(exc).__name__)
    if entity_id is not None:  # an eager or very fast worker may have finished already
        return not Entity.objects.filter(pk=entity_id, link_cursor__isnull=False).exists()
    return not pending_passages(workspace_id, version_id).exists()
