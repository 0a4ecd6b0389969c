"""Knowledge writes are rate-limited per member (issue 32, row 2): collections, documents and their
versions, and entities share one rolling-window budget of KNOWLEDGE_WRITES_PER_HOUR per member,
on both limiter backends, with the remember budget's 429 code and headers."""

from __future__ import annotations

import pytest

from tests.support import client_for, error_code


@pytest.fixture
def budget(settings):
    settings.KNOWLEDGE_WRITES_PER_HOUR = 4
    return 4


def url(world, path: str) -> str:
    return f"/api/w/{world.workspace.pk}/{path}"


def test_a_member_s_knowledge_writes_stop_at_the_budget_with_a_429(world, budget):
    editor = client_for(world.editor)
    collection = editor.post(url(world, "collections"), {"name": "Handbook"}, format="json")
    assert (
        collection.status_code == 201
        and collection["RateLimit-Limit"] == "4"
        and collection["RateLimit-Remaining"] == "3"
    )
    collection_id = collection.json()["id"]
    document = editor.post(
        url(world, "documents"),
        {"collectionId": collection_id, "title": "T", "text": "Orders ship from Osaka."},
        format="json",
    )
    assert document.status_code == 201
    assert (
        editor.post(
            url(world, f"documents/{document.json()['id']}/versions"), {"text": "Orders ship from Kobe."}, format="json"
        ).status_code
        == 201
    )
    assert editor.post(url(world, "entities"), {"name": "Osaka"}, format="json").status_code == 201

    refused = editor.post(url(world, "entities"), {"name": "Kobe"}, format="json")
    assert refused.status_code == 429 and error_code(refused) == "AGENT_MEMORY_RATE_LIMITED"
    assert refused.json()["error"]["details"]["operation"] == "knowledge"
    assert int(refused["Retry-After"]) >= 1 and refused["RateLimit-Remaining"] == "0"
    assert editor.delete(url(world, f"collections/{collection_id}")).status_code == 429  # deletes are writes too
    assert editor.get(url(world, "collections")).status_code == 200  # reads are not counted

    # The budget is the member's: another member of the workspace still writes.
    assert client_for(world.owner).post(url(world, "entities"), {"name": "Kobe"}, format="json").status_code == 201


def test_a_refused_or_failed_write_uses_no_budget(world, budget):
    editor, viewer = client_for(world.editor), client_for(world.viewer)
    for _ in range(budget + 1):
        assert editor.post(url(world, "collections"), {"name": ""}, format="json").status_code == 400
        assert viewer.post(url(world, "collections"), {"name": "V"}, format="json").status_code == 403
    for n in range(budget):
        assert editor.post(url(world, "collections"), {"name": f"C{n}"}, format="json").status_code == 201
    assert editor.post(url(world, "collections"), {"name": "one more"}, format="json").status_code == 429
