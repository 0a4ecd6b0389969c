"""The member export (issue 17 §2, SPEC §8.1): `GET /api/w/:wsId/me/export` streams one JSON
document of everything the workspace keeps about the caller, valid against docs/export.schema.json.

The attacker tests come first: nothing of another member, ever — another member of the same
workspace, an owner, a member of two workspaces, a removed member, another user's personal token.
"""

from __future__ import annotations

import hashlib
import json
import math
import tracemalloc
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from credits.models import UsageRecord
from governance import actions as g
from governance.models import AuditEvent
from memoryapp import assistant, export
from memoryapp.models import MemoryEmbedding, MemoryVersion
from retention import receipt_keys, receipts
from retention.models import DeletionReceipt
from tests.export.support import SCHEMA, download, exported, url
from tests.support import AgentClient, client_for, make_agent

pytestmark = pytest.mark.django_db

MARK = "zanzibarite"


@pytest.fixture
def marked(world):
    """The editor's data, every piece carrying MARK: agent memories (two versions of a key, a
    citation), an assistant memory, a forgotten memory (receipt with filters), a credential, an
    access entry, a usage record."""
    _, token = g.create_credential(world.editor, name=f"bot-{MARK}", scopes=["memory:read", "memory:write"])
    agent = AgentClient(token)
    collection = g.create_collection(world.workspace, name="Docs")
    passage = g.create_document(
        collection, title="d", text=f"The {MARK} ferry leaves at nine."
    ).current_version.passages.get()
    agent.remember(namespace=f"ns-{MARK}", key=f"key_{MARK}", text=f"{MARK} first", citations=[str(passage.pk)])
    agent.remember(namespace=f"ns-{MARK}", key=f"key_{MARK}", text=f"{MARK} second")
    agent.remember(namespace=f"ns-{MARK}", key=f"gone_{MARK}", text=f"{MARK} forgotten")
    agent.forget(namespace=f"ns-{MARK}", key=f"gone_{MARK}")
    assistant.add_assistant_memory(
        world.editor, kind="fact", topic=f"{MARK}_topic", summary=f"{MARK} assistant", details=[f"{MARK} detail"]
    )
    agent.list()
    UsageRecord.objects.create(
        workspace=world.workspace,
        member=world.editor,
        role="editor",
        category="reply",
        model_name="m",
        conversation_id=f"conv-{MARK}",
        input_tokens=3,
        input_cost=Decimal("0.01"),
    )
    return {"agent": agent, "token": token, "passage": passage}


# --- attackers first --------------------------------------------------------------------------------
def test_another_member_of_the_workspace_exports_nothing_of_the_members(world, marked):
    for member in (world.viewer, world.owner):  # a plain member, and an owner (who manages, but never reads)
        status, body = download(client_for(member), world.workspace)
        assert status == 200 and MARK not in body
        document = json.loads(body)
        assert document["member"]["id"] == str(member.pk)
        assert (
            document["agentMemories"] == []
            and document["receipts"] == []
            and document["accessLog"] == []
            and document["usageRecords"] == []
        )


def test_a_member_of_two_workspaces_exports_only_this_workspaces_data(world, marked):
    membership = g.add_member(world.other_workspace, "editor@acme.test", role="editor")
    g.update_settings(world.other_workspace, {"agentMemoriesEnabled": True}, actor=None)
    other_agent = make_agent(membership)
    other_agent.remember(namespace="globex", text="Globex-only note")
    other_agent.list()
    here = exported(world.editor)
    assert "Globex" not in json.dumps(here)
    there = exported(membership)
    assert MARK not in json.dumps(there) and [m["text"] for m in there["agentMemories"]] == ["Globex-only note"]
    assert there["workspace"]["id"] == str(world.other_workspace.pk) and len(there["accessLog"]) == 1


def test_a_removed_member_cannot_export(world, marked):
    g.remove_member(world.editor, actor=world.owner.user)
    status, body = download(client_for(world.editor), world.workspace)
    assert status == 404 and MARK not in body


def test_an_outsider_and_an_anonymous_caller_cannot_export(world, marked):
    status, body = download(client_for(world.outsider), world.workspace)
    assert status == 404 and MARK not in body
    assert Client().get(url(world.workspace)).status_code in (401, 403)


def test_another_users_personal_token_exports_that_users_data_or_nothing(world, marked):
    for user, expected in ((world.viewer.user, 200), (world.outsider.user, 404)):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {g.issue_personal_token(user)}")
        status, body = download(client, world.workspace)
        assert status == expected and MARK not in body


def test_the_export_never_contains_a_token_or_a_hash_of_one(world, marked):
    document = exported(world.editor)
    text = json.dumps(document)
    credential = world.editor.credentials.get()
    assert marked["token"] not in text and credential.token_hash not in text
    assert set(document["credentials"][0]) == {
        "id",
        "name",
        "prefix",
        "scopes",
        "contextSetId",
        "createdAt",
        "lastUsedAt",
        "expiresAt",
        "revokedAt",
    }


# --- what it holds ------------------------------------------------------------------------------------
def test_the_export_holds_everything_kept_about_the_member_and_validates_against_its_schema(world, marked):
    document = exported(world.editor)
    assert document["format"] == export.FORMAT and document["member"]["email"] == "editor@acme.test"
    versions = [m for m in document["agentMemories"] if m["key"] == f"key_{MARK}"]
    assert [(m["version"], m["current"], m["text"]) for m in versions] == [
        (1, False, f"{MARK} first"),
        (2, True, f"{MARK} second"),
    ]
    (citation,) = versions[0]["citations"]
    passage = marked["passage"]
    assert citation == {
        "passageId": str(passage.pk),
        "documentId": str(passage.document_id),
        "documentVersionId": str(passage.version_id),
        "sha256": passage.sha256,
        "sourceState": "current",
    }
    assert "ferry" not in json.dumps(document)  # a citation is a reference and a hash, never the passage text
    (kept,) = document["assistantMemories"]
    assert (kept["key"], kept["state"], kept["details"]) == (f"{MARK}_topic", "active", [f"{MARK} detail"])
    (receipt,) = document["receipts"]
    assert receipt["operation"] == "forget" and set(receipt["manifest"]["filters"]) == {
        "namespaceHmac",
        "keyHmac",
    }  # the names as keyed digests (docs/receipts.md)
    assert receipt["resolvedFilters"] == {"namespace": f"ns-{MARK}"} and f"gone_{MARK}" not in json.dumps(
        document
    )  # the namespace lives on, the forgotten key does not
    assert receipt["memoryVersionIds"] and receipt["verification"]["clean"] is True
    # its proof (docs/receipts.md): the export's own fields hash to the stored hash, signed
    stored = DeletionReceipt.objects.get(pk=int(receipt["id"]))
    assert {f: receipt[f] for f in receipts.PROOF_FIELDS} == receipts.proof_json(stored)
    assert hashlib.sha256(receipts.canonical(receipt)).hexdigest() == receipt["sha256"] == stored.sha256
    receipt_keys.signing_key().public_key().verify(
        bytes.fromhex(receipt["signature"]), bytes.fromhex(receipt["sha256"])
    )
    assert document["credentials"][0]["name"] == f"bot-{MARK}"
    assert document["usageRecords"][0]["conversationId"] == f"conv-{MARK}"
    (entry,) = document["accessLog"]
    assert (
        entry["operation"] == "list"
        and entry["credential"]["name"] == f"bot-{MARK}"
        and {m["state"] for m in entry["memories"]} == {"readable"}
    )
    assert document["withheld"] == {"pendingErasureOrExpired": 0, "hiddenBySourceRecheck": 0}


def test_expired_assistant_memories_are_exported_and_what_is_withheld_is_counted(world, marked):
    version, _ = assistant.add_assistant_memory(
        world.editor, kind="fact", topic="old_topic", summary="Expired but in grace"
    )
    MemoryVersion.objects.filter(pk=version.pk).update(
        retention_anchor=timezone.now() - timedelta(days=100)
    )  # 90 + 10 < 90 + 30
    pending = make_agent(world.editor)
    pending_id = pending.remember(namespace="p", text="Pending erasure").json()["memory"]["id"]
    MemoryVersion.objects.filter(pk=pending_id).update(
        unreachable_at=timezone.now(), unreachable_reason="cascade_document"
    )
    collection = marked["passage"].document.collection  # restricted: the version citing it is hidden
    collection.restricted = True
    collection.save()
    document = exported(world.editor)
    states = {m["key"]: m["state"] for m in document["assistantMemories"]}
    assert states == {f"{MARK}_topic": "active", "old_topic": "expired"}
    assert "Pending erasure" not in json.dumps(document) and f"{MARK} first" not in json.dumps(
        document["agentMemories"]
    )
    assert document["withheld"] == {"pendingErasureOrExpired": 1, "hiddenBySourceRecheck": 1}


def test_each_export_writes_a_content_free_audit_event(world, marked):
    exported(world.editor)
    exported(world.editor)
    events = AuditEvent.objects.filter(action="member.exported")
    assert events.count() == 2
    event = events.first()
    assert (
        event.actor == world.editor.user
        and event.target == f"member #{world.editor.pk}"
        and event.workspace_id == world.workspace.pk
    )
    assert MARK not in json.dumps([event.changes, event.target, event.reason])


def test_the_response_is_a_streamed_download(world, marked):
    response = client_for(world.editor).get(url(world.workspace))
    assert response.streaming and response["Content-Type"].startswith("application/json")
    assert response["Content-Disposition"].startswith("attachment;") and response["Cache-Control"] == "no-store"


# --- bounded at 5,000 versions ---------------------------------------------------------------------
def fill(member, count: int, batch: str = "a") -> None:
    """`count` versions: two of each key, the first superseded."""
    half, now = count // 2, timezone.now()
    rows = [
        MemoryVersion(
            workspace=member.workspace,
            member=member,
            namespace="bulk",
            key=f"{batch}{i % half}",
            version=1 + i // half,
            valid_to=now if i < half else None,
            text=f"Bulk memory {i} " + "x" * 200,
            text_length=210,
        )
        for i in range(count)
    ]
    MemoryVersion.objects.bulk_create(rows, batch_size=1000)


def test_queries_stay_bounded_at_5000_versions(world, django_assert_max_num_queries):
    fill(world.editor, 5000)
    batches = math.ceil(5000 / export.BATCH)
    client = client_for(world.editor)
    # per memory batch: its rows and the re-check (citations); plus a fixed number for the
    # request, the audit event, the other sections and the counts
    with django_assert_max_num_queries(30 + 2 * batches):
        response = client.get(url(world.workspace))
        document = json.loads(b"".join(response.streaming_content))
    assert len(document["agentMemories"]) == 5000


def streamed_peak(member) -> tuple[int, int, int]:
    """(document size, largest chunk, peak traced memory while the response is consumed)."""
    response = client_for(member).get(url(member.workspace))
    tracemalloc.start()
    try:
        size, largest = 0, 0
        for chunk in response.streaming_content:
            size += len(chunk)
            largest = max(largest, len(chunk))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return size, largest, peak


def test_memory_use_stays_bounded_at_5000_versions(world):
    fill(world.editor, 2500, "a")
    half_size, _, half_peak = streamed_peak(world.editor)
    fill(world.editor, 2500, "b")
    size, largest, peak = streamed_peak(world.editor)
    assert size > 1.9 * half_size and size > 3_000_000  # twice the data…
    assert largest < size / 5  # …sent in pieces…
    assert peak < 1.25 * half_peak and peak < size  # …with the same peak: one batch at a time, never the whole document


def test_under_asgi_the_export_is_an_async_stream_and_under_wsgi_a_plain_iterator():
    import io

    from django.core.handlers.asgi import ASGIRequest
    from django.test import RequestFactory
    from rest_framework.request import Request

    from memoryapp.api.access import stream

    scope = {"type": "http", "method": "GET", "path": "/", "query_string": b"", "headers": []}
    over_asgi = stream(Request(ASGIRequest(scope, io.BytesIO())), iter(["a", "b"]))
    assert hasattr(over_asgi, "__aiter__") and not hasattr(
        over_asgi, "__next__"
    )  # Django would buffer a sync iterator whole
    over_wsgi = stream(Request(RequestFactory().get("/")), iter(["a", "b"]))
    assert list(over_wsgi) == [b"a", b"b"]


# --- documented ----------------------------------------------------------------------------------------
def test_the_schema_is_served_and_referenced_from_the_openapi_schema(world):
    served = Client().get("/api/schema/export.json")
    assert served.status_code == 200 and json.loads(b"".join(served.streaming_content)) == SCHEMA
    openapi = client_for(world.editor).get("/api/schema/", HTTP_ACCEPT="application/json")
    text = openapi.content.decode()
    spec = json.loads(text) if text.lstrip().startswith("{") else __import__("yaml").safe_load(text)
    operation = spec["paths"]["/api/w/{ws_id}/me/export"]["get"]
    body = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert (
        set(SCHEMA["required"]) <= set(body["properties"])
        and "/api/schema/export.json" in operation["responses"]["200"]["description"]
    )
    assert body["properties"]["agentMemories"]["items"]["properties"]["validTo"]["nullable"] is True
    assert "$ref" not in json.dumps(body) or "#/components/" in json.dumps(body)


def test_embedding_rows_are_never_exported(world, marked):
    text = json.dumps(exported(world.editor))
    assert MemoryEmbedding.objects.exists() and '"vector"' not in text and '"terms"' not in text
