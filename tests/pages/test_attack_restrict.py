"""Attacks on the collection names of "What Bundata remembers" after they moved to
`Collection.objects.restrict` (8d89206): a memory in a restricted collection the member reads
shows its name; one the member does not (or no longer) read is hidden with its name; no other
workspace's collection is ever named."""

from __future__ import annotations

import pytest

from governance import actions as g
from memoryapp.pages import presenters
from tests.pages.support import browser, url
from tests.support import make_agent

pytestmark = pytest.mark.django_db


def remember_in(member, collection, text: str) -> None:
    response = make_agent(member).remember(namespace="notes", text=text, collectionId=str(collection.pk))
    assert response.status_code == 201, response.content


def test_a_restricted_collection_the_member_reads_is_named_on_their_memory(world):
    vault = g.create_collection(world.workspace, name="VaultOfEditors", restricted=True, readers=[world.editor])
    remember_in(world.editor, vault, "Filed in the vault.")
    text = browser(world.editor).get(url(world, "agent-memories")).content.decode()
    assert "Filed in the vault." in text and "VaultOfEditors" in text


def test_a_collection_the_member_no_longer_reads_hides_the_memory_and_its_name(world):
    vault = g.create_collection(world.workspace, name="VaultOfEditors", restricted=True, readers=[world.editor])
    remember_in(world.editor, vault, "Filed in the vault.")
    vault.readers.remove(world.editor)
    for member in (world.editor, world.owner, world.viewer):
        text = browser(member).get(url(world, "agent-memories")).content.decode()
        assert "VaultOfEditors" not in text and "Filed in the vault." not in text, member


def row(collection) -> dict:
    at = "2030-01-01T09:00:00Z"
    return {
        "collectionId": str(collection.pk),
        "createdAt": at,
        "expiresAt": at,
        "source": "agent",
        "masked": [],
        "citations": [],
    }


def test_the_presenter_names_no_collection_the_member_cannot_read_nor_another_workspaces(world):
    secret = g.create_collection(world.workspace, name="OwnersOnly", restricted=True, readers=[world.owner])
    foreign = g.create_collection(world.other_workspace, name="GlobexShelf")
    shelf = g.create_collection(world.workspace, name="OpenShelf")
    rows = presenters.agent_memory_rows([row(c) for c in (secret, foreign, shelf)], world.editor)
    assert [r["collection_name"] for r in rows] == [None, None, "OpenShelf"]
    owner_rows = presenters.agent_memory_rows([row(c) for c in (secret, foreign)], world.owner)
    assert [r["collection_name"] for r in owner_rows] == ["OwnersOnly", None]
