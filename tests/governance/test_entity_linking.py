"""Entity linking runs outside the write transaction (issue 32, row 2).

On the embedded default (SQLite, IMMEDIATE transactions) every transaction holds the one write
lock of the file, for every workspace. Creating an entity scanned every passage of its workspace
inside its transaction: 33 documents of U+FDFA held the lock 14–16 s and a remember in another
workspace waited as long. Now the entity commits, then its passages are matched while only
reading and the links written in short transactions (governance.linking); what a lost task
leaves pending, the link sweep finishes."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from governance import actions, linking
from governance.knowledge import EntityMatcher
from governance.models import Entity, Passage
from tests import sqlite_locks
from tests.support import make_agent


@pytest.fixture
def short_busy_timeout():
    """Writers wait at most 1 s for the lock (production: 30 s): a write held behind the scan fails."""
    with sqlite_locks.short_busy_timeout():
        yield


MENTION = "Orders for Contoso ship from Osaka."
OTHER = "Support answers in Japanese."


def _knowledge(world, documents: int = 3):
    collection = actions.create_collection(world.workspace, name="Handbook")
    return [actions.create_document(collection, title=f"D{n}", text=f"{MENTION}\n\n{OTHER}") for n in range(documents)]


def _linked(entity: Entity) -> set[str]:
    return set(Passage.objects.filter(entities=entity).values_list("text", flat=True))


@pytest.mark.django_db(transaction=True)
def test_writes_of_other_workspaces_go_on_while_a_new_entity_scans_the_passages(world, short_busy_timeout, monkeypatch):
    _knowledge(world)
    other = make_agent(world.outsider)
    other.client.raise_request_exception = False
    scanning, written = threading.Event(), threading.Event()
    answers = {}
    find = EntityMatcher.find

    def slow_find(self, text):
        if not scanning.is_set():
            scanning.set()
            written.wait(timeout=20)  # the scan is underway until the other write has finished
        return find(self, text)

    def write_elsewhere():
        try:
            scanning.wait(timeout=20)
            answers["remember"] = other.remember(namespace="o", text="written while an entity is being linked")
        finally:
            written.set()
            connections.close_all()

    monkeypatch.setattr(EntityMatcher, "find", slow_find)
    thread = threading.Thread(target=write_elsewhere)
    thread.start()
    try:
        entity = actions.create_entity(world.workspace, name="Contoso", aliases=[])
    finally:
        thread.join(timeout=60)
    assert answers["remember"].status_code == 201, answers["remember"].content[:300]
    assert _linked(entity) == {MENTION} and Entity.objects.get(pk=entity.pk).links_status == "linked"


@pytest.mark.django_db
def test_links_a_lost_task_left_pending_are_written_by_the_sweep(world, settings, monkeypatch):
    settings.ENTITY_LINK_INLINE_CHARS = 0  # every linking is a task ...

    def broker_down(*args):
        raise ConnectionError("broker down")

    monkeypatch.setattr(linking, "queue_task", broker_down)  # ... and the task is lost
    documents = _knowledge(world, 2)
    entity = actions.create_entity(world.workspace, name="Contoso", aliases=["Osaka"])
    assert entity.links_status == "pending" and _linked(entity) == set()
    assert Passage.objects.filter(links_pending=True).count() == 4
    later = actions.create_document(documents[0].collection, title="Later", text="Contoso opened a depot.")

    assert linking.link_sweep() == {"workspacesLinked": 1}
    assert _linked(entity) == {MENTION, "Contoso opened a depot."}
    assert (
        Entity.objects.get(pk=entity.pk).links_status == "linked"
        and not Passage.objects.filter(links_pending=True).exists()
    )
    assert Passage.objects.filter(document=later, entities=entity).count() == 1
    assert linking.link_sweep() == {"workspacesLinked": 0}  # converged: nothing left


@pytest.mark.django_db
def test_a_document_deleted_while_its_passages_are_matched_gets_no_links(world, monkeypatch):
    documents = _knowledge(world, 2)
    doomed, doomed_id = documents[0], documents[0].pk
    find = EntityMatcher.find

    def delete_midway(self, text):
        if Passage.objects.filter(document_id=doomed_id).exists():
            actions.delete_document(doomed, actor=None)  # between the read of a chunk and its write
        return find(self, text)

    monkeypatch.setattr(EntityMatcher, "find", delete_midway)
    entity = actions.create_entity(world.workspace, name="Contoso", aliases=[])
    assert entity.links_status == "linked"
    assert list(
        Entity.passages.through.objects.filter(entity=entity).values_list("passage__document_id", flat=True)
    ) == [documents[1].pk]


@pytest.mark.django_db
def test_an_entity_links_existing_and_new_passages_in_chunks(world, monkeypatch):
    monkeypatch.setattr(linking, "LINK_CHUNK", 2)
    _knowledge(world, 3)  # 6 passages: 3 chunks
    entity = actions.create_entity(world.workspace, name="contoso", aliases=[])
    assert _linked(entity) == {MENTION} and Passage.objects.filter(entities=entity).count() == 3
    collection = actions.create_collection(world.workspace, name="More")
    document = actions.create_document(collection, title="New", text=f"{OTHER}\n\nCONTOSO again.\n\n{MENTION}")
    assert Passage.objects.filter(document=document, entities=entity).count() == 2
