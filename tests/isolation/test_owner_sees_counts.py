"""Owners see counts, never what another member wrote (SPEC §5, §8).

A member's agent writes memories whose namespace, key, text, details, topic, credential name and
conversation id all carry a marker, then forgets and deletes some of them (so receipts exist with
the filters a member chose). The owner then reads every GET route of the workspace API and every
workspace page — enumerated from the URLconf, so a new route is covered without touching this
test — with every id of the member's objects in the path parameters. No answer, whatever its
status, may contain a marker; and the member still sees their own receipts in full.
"""

from __future__ import annotations

import itertools
import json

import pytest
from django.test import Client

from memoryapp.assistant import add_assistant_memory
from memoryapp.models import MemoryVersion
from retention.models import DeletionReceipt
from tests.support import client_for, fill, make_agent, routes

pytestmark = pytest.mark.django_db

MARK = "xylophonia"
NAMESPACE = f"health{MARK}"
MARKERS = (MARK, NAMESPACE, f"therapist_{MARK}")


@pytest.fixture
def member_wrote_things(world, django_capture_on_commit_callbacks):
    from governance import actions
    from tests.support import AgentClient

    _, token = actions.create_credential(world.editor, name=f"bot-{MARK}", scopes=["memory:read", "memory:write"])
    agent = AgentClient(token)
    for key in (f"therapist_{MARK}", f"diet_{MARK}", f"notes_{MARK}"):
        for n in range(2):
            assert (
                agent.remember(namespace=NAMESPACE, key=key, text=f"{MARK} session {n} on Tuesday").status_code == 201
            )
    assert agent.forget(namespace=NAMESPACE, key=f"therapist_{MARK}").status_code == 200
    kept = MemoryVersion.objects.filter(member=world.editor, key=f"diet_{MARK}", valid_to__isnull=True).get()
    assert agent.forget(memoryId=str(kept.pk)).status_code == 200
    version, _ = add_assistant_memory(
        world.editor, kind="preference", topic=f"{MARK}_topic", summary=f"{MARK} likes tea", details=[f"{MARK} detail"]
    )
    client_for(world.editor).delete(f"/api/w/{world.workspace.pk}/ai-memory/memories/{version.pk}")
    from decimal import Decimal

    from credits.models import ModelPrice

    ModelPrice.objects.create(model_name="gpt-x", input_per_1k=Decimal("0.01"), output_per_1k=Decimal("0.02"))
    reply = agent.client.post(
        "/api/agent/v1/usage/replies",
        {"conversationId": f"conv-{MARK}", "model": "gpt-x", "inputTokens": 10, "outputTokens": 5, "memoryTokens": 2},
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {agent.token}",
    )
    assert reply.status_code == 201, reply.content
    assert DeletionReceipt.objects.filter(member_ref=world.editor.pk).count() >= 3
    return world


def ids_of_the_member(world) -> list[str]:
    ids = {str(world.editor.pk), str(world.workspace.pk)}
    ids |= {str(pk) for pk in MemoryVersion.objects.filter(member=world.editor).values_list("pk", flat=True)}
    ids |= {str(pk) for pk in world.editor.credentials.values_list("pk", flat=True)}
    ids |= {str(pk) for pk in DeletionReceipt.objects.filter(member_ref=world.editor.pk).values_list("pk", flat=True)}
    return sorted(ids)


def owner_reads(world) -> list[tuple[str, int, str]]:
    browser = Client()
    browser.force_login(world.owner.user)
    api = client_for(world.owner)
    answers = []
    for route, params in routes():
        if not (route.startswith("api/w/") or route.startswith("w/")) or "ws_id" not in params:
            continue
        others = [p for p in params if p != "ws_id"]
        for combination in itertools.product(ids_of_the_member(world), repeat=len(others)):
            url = fill(route, {"ws_id": str(world.workspace.pk), **dict(zip(others, combination))})
            response = (api if url.startswith("/api/") else browser).get(url)
            body = (
                b"".join(response.streaming_content) if response.streaming else response.content
            )  # the export streams
            answers.append((url, response.status_code, body.decode("utf-8", "replace")))
    return answers


def test_no_owner_facing_answer_contains_what_the_member_wrote(member_wrote_things):
    world = member_wrote_things
    answers = owner_reads(world)
    assert len(answers) > 30
    for url, status, body in answers:
        assert status != 500, url
        for marker in MARKERS:
            assert marker not in body, f"{url} ({status}) shows {marker!r}"
    receipts = next(json.loads(body) for url, status, body in answers if url.endswith("/ask-history/deletion-receipts"))
    theirs = [r for r in receipts["receipts"] if r["memberId"] == str(world.editor.pk)]
    assert len(theirs) >= 3
    for receipt in theirs:
        assert set(receipt["manifest"]) == {
            "artifacts",
            "requestedIds",
            "keysDestroyed",
        }  # counts only: never the key ids
        assert "memoryVersionIds" not in receipt
        assert receipt["manifest"]["artifacts"]["memory_version"] >= 1  # counts stay


def test_the_member_sees_their_own_receipts_in_full(member_wrote_things):
    world = member_wrote_things
    body = client_for(world.editor).get(f"/api/w/{world.workspace.pk}/ask-history/deletion-receipts").json()
    filters = [r["manifest"].get("filters", {}) for r in body["receipts"]]
    assert {"namespaceHmac", "keyHmac"} in [
        set(f) for f in filters
    ]  # stored as keyed digests (docs/receipts.md "Names in receipts")
    assert {"namespace": NAMESPACE} in [
        r["resolvedFilters"] for r in body["receipts"]
    ]  # the namespace lives on; the forgotten key is named by nobody
    assert f"therapist_{MARK}" not in json.dumps(body)
    assert all("memoryVersionIds" in r for r in body["receipts"])


def test_the_owners_own_receipts_stay_complete_for_the_owner(world):
    agent = make_agent(world.owner)
    assert agent.remember(namespace="mine", key="k", text="owner's own note").status_code == 201
    assert agent.forget(namespace="mine", key="k").status_code == 200
    body = client_for(world.owner).get(f"/api/w/{world.workspace.pk}/ask-history/deletion-receipts").json()
    (receipt,) = body["receipts"]
    assert (
        set(receipt["manifest"]["filters"]) == {"namespaceHmac", "keyHmac"} and receipt["resolvedFilters"] == {}
    )  # forgotten: not even the owner's own


def test_usage_shows_the_owner_figures_not_another_members_conversation_ids(member_wrote_things):
    world = member_wrote_things
    owner_view = client_for(world.owner).get(f"/api/w/{world.workspace.pk}/usage").json()
    record = next(r for r in owner_view["records"] if r["memberId"] == str(world.editor.pk))
    assert record["conversationId"] is None and record["lines"]
    member_view = client_for(world.editor).get(f"/api/w/{world.workspace.pk}/usage").json()
    assert member_view["records"][0]["conversationId"] == f"conv-{MARK}"
