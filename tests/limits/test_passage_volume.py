"""A workspace's passages are capped in characters after NFKC (issue 32, row 2): U+FDFA is one
character that normalises to 18, so 33 documents of ~21,000 of them were 12.5 million characters
for every new entity to scan. MAX_PASSAGE_CHARS_PER_WORKSPACE counts what the matcher reads."""

from __future__ import annotations

import pytest

from core.errors import ApiError
from governance import actions
from governance.models import Passage
from tests.support import client_for, error_code

LIGATURE = "\ufdfa"  # ARABIC LIGATURE SALLALLAHOU ALAYHE WASALLAM: 18 characters after NFKC


@pytest.fixture
def cap(settings):
    settings.MAX_PASSAGE_CHARS_PER_WORKSPACE = 1000
    return 1000


def test_the_cap_counts_characters_after_nfkc(world, cap):
    api = client_for(world.editor)
    collection_id = api.post(f"/api/w/{world.workspace.pk}/collections", {"name": "C"}, format="json").json()["id"]
    refused = api.post(
        f"/api/w/{world.workspace.pk}/documents",
        {"collectionId": collection_id, "title": "L", "text": LIGATURE * 100},
        format="json",
    )
    assert refused.status_code == 409 and error_code(refused) == "PASSAGE_VOLUME_LIMIT_REACHED"
    assert refused.json()["error"]["details"] == {"limit": 1000, "used": 0, "adding": 1800}
    assert not Passage.objects.exists()  # nothing of it was stored
    # 100 plain characters are 100: the same length in code points fits.
    assert (
        api.post(
            f"/api/w/{world.workspace.pk}/documents",
            {"collectionId": collection_id, "title": "P", "text": "a" * 100},
            format="json",
        ).status_code
        == 201
    )
    assert Passage.objects.get().chars == 100


def test_every_version_counts_and_a_deleted_document_makes_room(world, cap):
    collection = actions.create_collection(world.workspace, name="C")
    document = actions.create_document(collection, title="D", text="b" * 600)
    with pytest.raises(ApiError) as refused:
        actions.add_document_version(document, text=LIGATURE * 23)  # 414 after NFKC: 1,014 in all
    assert refused.value.status == 409 and refused.value.code == "PASSAGE_VOLUME_LIMIT_REACHED"
    actions.add_document_version(document, text=LIGATURE * 22)  # 396: 996 in all
    # Another workspace has a budget of its own.
    other = actions.create_collection(world.other_workspace, name="O")
    actions.create_document(other, title="O", text="c" * 900)
    actions.delete_document(document, actor=None)
    actions.create_document(collection, title="E", text="d" * 1000)
