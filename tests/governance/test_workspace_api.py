"""The workspace API: who may do what (owner / editor / viewer / outsider / other workspace)."""

import pytest
from django.db import connection
from rest_framework.test import APIClient

from governance import actions
from governance.auth import find_credential
from governance.knowledge import split_passages
from governance.models import AuditEvent, Credential, Passage, PersonalToken
from memoryapp.models import ASSISTANT_NAMESPACE
from tests.support import _texts, client_for, error_code, make_agent


def url(world, path, other=False):
    workspace = world.other_workspace if other else world.workspace
    return f"/api/w/{workspace.pk}/{path}"


def test_anonymous_is_401(world):
    response = APIClient().get(url(world, "ask-history/settings"))
    assert response.status_code == 401 and error_code(response) == "UNAUTHENTICATED"


def test_outsider_gets_404_not_403(world):
    outsider = client_for(world.outsider)
    for path in (
        "ask-history/settings",
        "agent-credentials",
        "ask-history/agent-memories",
        "collections",
        "members",
        "ai-memory/memories",
    ):
        response = outsider.get(url(world, path))
        assert response.status_code == 404, path
    assert client_for(world.outsider).get("/api/w/999999/ask-history/settings").status_code == 404


@pytest.mark.parametrize("who, status", [("owner", 200), ("editor", 403), ("viewer", 403)])
def test_only_owner_changes_settings(world, who, status):
    response = client_for(getattr(world, who)).put(
        url(world, "ask-history/settings"), {"agentMemoryRetentionDays": 30}, format="json"
    )
    assert response.status_code == status
    if status == 403:
        assert error_code(response) == "FORBIDDEN"


@pytest.mark.parametrize("who", ["owner", "editor", "viewer"])
def test_every_member_reads_settings(world, who):
    body = client_for(getattr(world, who)).get(url(world, "ask-history/settings")).json()
    assert body == {
        "agentMemoriesEnabled": True,
        "agentMemoryRetentionDays": 90,
        "expiredGraceDays": 30,
        "phoneRegion": None,
        "retentionAppliesToExistingMemories": True,
    }


@pytest.mark.parametrize(
    "body",
    [
        {"agentMemoryRetentionDays": 0},
        {"agentMemoryRetentionDays": 366},
        {"expiredGraceDays": 91},
        {"expiredGraceDays": -1},
        {"agentMemoriesEnabled": "maybe"},
        {"unknown": 1},
    ],
)
def test_settings_validation(world, body):
    response = client_for(world.owner).put(url(world, "ask-history/settings"), body, format="json")
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"


def test_settings_change_leaves_an_audit_event(world):
    client_for(world.owner).put(url(world, "ask-history/settings"), {"agentMemoryRetentionDays": 30}, format="json")
    event = AuditEvent.objects.filter(action="settings.changed").latest("id")
    assert event.changes == {"agentMemoryRetentionDays": [90, 30]} and event.actor == world.owner.user


def test_credentials_are_own_and_token_is_shown_once(world):
    editor = client_for(world.editor)
    created = editor.post(
        url(world, "agent-credentials"), {"name": "bot", "scopes": ["memory:read", "memory:write"]}, format="json"
    )
    assert created.status_code == 201 and created.json()["token"].startswith("gam_")
    listed = editor.get(url(world, "agent-credentials")).json()["credentials"]
    assert [c["name"] for c in listed] == ["bot"] and "token" not in listed[0]
    assert client_for(world.owner).get(url(world, "agent-credentials")).json()["credentials"] == []
    assert client_for(world.owner).delete(url(world, f"agent-credentials/{created.json()['id']}")).status_code == 404
    assert editor.delete(url(world, f"agent-credentials/{created.json()['id']}")).status_code == 204
    assert AuditEvent.objects.filter(action__in=["credential.created", "credential.revoked"]).count() == 2


def test_scopes_default_to_none_and_viewer_cannot_take_write(world):
    viewer = client_for(world.viewer)
    response = viewer.post(url(world, "agent-credentials"), {"name": "bot", "scopes": ["memory:write"]}, format="json")
    assert response.status_code == 403 and error_code(response) == "INSUFFICIENT_ROLE"
    assert viewer.post(url(world, "agent-credentials"), {"name": "bot"}, format="json").status_code == 400
    assert (
        viewer.post(
            url(world, "agent-credentials"), {"name": "bot", "scopes": ["memory:read"]}, format="json"
        ).status_code
        == 201
    )


def test_tokens_are_never_stored_in_clear(world):
    _, token = actions.create_credential(world.editor, name="bot", scopes=["memory:read"])
    personal = actions.issue_personal_token(world.editor.user)
    with connection.cursor() as cursor:
        for table in (Credential._meta.db_table, PersonalToken._meta.db_table):
            cursor.execute(f"SELECT * FROM {table}")
            dump = repr(cursor.fetchall())
            assert token not in dump and personal not in dump
            assert (
                token.split("_", 2)[2] not in dump and personal.split("_", 2)[2] not in dump
            )  # the secret may hold "_"
    assert find_credential(token) is not None and find_credential(token + "x") is None


def test_personal_token_authenticates_the_workspace_api(world):
    token = actions.issue_personal_token(world.editor.user)
    client = APIClient()
    assert client.get(url(world, "ask-history/settings"), HTTP_AUTHORIZATION=f"Token {token}").status_code == 200
    assert (
        client.get(url(world, "ask-history/settings"), HTTP_AUTHORIZATION="Token gpt_000000000000_nope").status_code
        == 401
    )


def test_member_role_change_and_removal_by_owner_only(world):
    editor_url = url(world, f"members/{world.viewer.pk}")
    assert client_for(world.editor).patch(editor_url, {"role": "editor"}, format="json").status_code == 403
    response = client_for(world.owner).patch(editor_url, {"role": "editor"}, format="json")
    assert response.status_code == 200 and response.json()["role"] == "editor"
    assert AuditEvent.objects.filter(action="member.role_changed").get().changes == {"role": ["viewer", "editor"]}
    assert client_for(world.outsider).delete(url(world, f"members/{world.viewer.pk}")).status_code == 404
    assert client_for(world.owner).delete(editor_url).status_code == 204
    assert client_for(world.viewer).get(url(world, "ask-history/settings")).status_code == 404


def test_last_owner_cannot_leave(world):
    response = client_for(world.owner).patch(url(world, f"members/{world.owner.pk}"), {"role": "editor"}, format="json")
    assert response.status_code == 409 and error_code(response) == "LAST_OWNER"


def test_member_of_another_workspace_is_not_found(world):
    assert (
        client_for(world.owner)
        .patch(url(world, f"members/{world.outsider.pk}"), {"role": "viewer"}, format="json")
        .status_code
        == 404
    )


def test_passage_splitting_on_blank_lines():
    assert split_passages("One.\n\nTwo\nstill two.\n   \n\nThree.\r\n\r\nFour") == [
        "One.",
        "Two\nstill two.",
        "Three.",
        "Four",
    ]
    assert split_passages("\n\n  \n") == []


def test_documents_create_passages_and_versions(world):
    owner = client_for(world.owner)
    collection = owner.post(url(world, "collections"), {"name": "Handbook"}, format="json").json()["id"]
    created = owner.post(
        url(world, "documents"), {"collectionId": collection, "title": "T", "text": "Alpha.\n\nBeta."}, format="json"
    ).json()
    assert [p["text"] for p in created["passages"]] == ["Alpha.", "Beta."]
    version = owner.post(url(world, f"documents/{created['id']}/versions"), {"text": "Gamma."}, format="json").json()
    assert version["id"] == created["id"] and version["versionId"] != created["versionId"]
    passage = owner.get(url(world, f"passages/{created['passages'][0]['id']}")).json()
    assert passage == {
        "id": created["passages"][0]["id"],
        "documentId": created["id"],
        "versionId": created["versionId"],
        "text": "Alpha.",
        "entityIds": [],
    }
    assert (
        client_for(world.viewer)
        .post(url(world, "documents"), {"collectionId": collection, "title": "T", "text": "x"}, format="json")
        .status_code
        == 403
    )
    assert client_for(world.outsider).get(url(world, f"passages/{created['passages'][0]['id']}")).status_code == 404


def test_entities_link_existing_and_new_passages_latin_and_japanese(world):
    collection = actions.create_collection(world.workspace, name="c")
    before = actions.create_document(
        collection,
        title="a",
        text="The Osaka warehouse ships daily.\n\nNothing about osakawarehouse.\n\n大阪倉庫から出荷します。",
    )
    owner = client_for(world.owner)
    entity_id = owner.post(
        url(world, "entities"), {"name": "Osaka warehouse", "aliases": ["大阪倉庫"]}, format="json"
    ).json()["id"]
    after = actions.create_document(collection, title="b", text="OSAKA WAREHOUSE closes at six.")
    linked = set(Passage.objects.filter(entities__pk=entity_id).values_list("text", flat=True))
    assert linked == {"The Osaka warehouse ships daily.", "大阪倉庫から出荷します。", "OSAKA WAREHOUSE closes at six."}
    assert before and after


def test_restricted_collections_are_invisible_to_non_readers(world):
    owner = client_for(world.owner)
    collection = owner.post(
        url(world, "collections"),
        {"name": "Board", "restricted": True, "memberIds": [str(world.owner.pk)]},
        format="json",
    ).json()["id"]
    document = owner.post(
        url(world, "documents"), {"collectionId": collection, "title": "Minutes", "text": "secret"}, format="json"
    ).json()
    editor = client_for(world.editor)
    assert collection not in [c["id"] for c in editor.get(url(world, "collections")).json()["collections"]]
    assert editor.get(url(world, f"passages/{document['passages'][0]['id']}")).status_code == 404
    assert editor.get(url(world, f"documents/{document['id']}")).status_code == 404


def test_context_sets_crud(world):
    editor = client_for(world.editor)
    collection = actions.create_collection(world.workspace, name="c")
    created = editor.post(
        url(world, "context-sets"), {"name": "Shipping", "collectionIds": [str(collection.pk)]}, format="json"
    )
    assert created.status_code == 201
    set_id = created.json()["id"]
    assert (
        editor.patch(url(world, f"context-sets/{set_id}"), {"active": False}, format="json").json()["active"] is False
    )
    assert (
        client_for(world.viewer)
        .patch(url(world, f"context-sets/{set_id}"), {"active": True}, format="json")
        .status_code
        == 403
    )
    assert editor.delete(url(world, f"context-sets/{set_id}")).status_code == 204
    assert editor.get(url(world, "context-sets")).json()["contextSets"] == []


def test_member_sees_and_deletes_only_own_agent_memories(world):
    make_agent(world.editor).remember(namespace="n", key="k", text="editor apricot")
    owner_memory = make_agent(world.owner).remember(namespace="n", text="owner plum").json()["memory"]["id"]
    editor = client_for(world.editor)
    listed = editor.get(url(world, "ask-history/agent-memories")).json()
    assert [m["text"] for m in listed["memories"]] == ["editor apricot"]
    assert editor.delete(url(world, f"ask-history/agent-memories/{owner_memory}")).status_code == 404
    assert editor.delete(url(world, "ask-history/agent-memories")).json()["deleted"] == 1
    assert (
        client_for(world.owner).get(url(world, "ask-history/agent-memories")).json()["memories"][0]["text"]
        == "owner plum"
    )


def test_owner_bulk_delete_reads_nothing_and_answers_counts(world):
    make_agent(world.editor).remember(namespace="n", text="editor apricot")
    make_agent(world.viewer, scopes=["memory:read"])
    assert client_for(world.editor).delete(url(world, "ask-history/settings/agent-memories")).status_code == 403
    response = client_for(world.owner).delete(url(world, "ask-history/settings/agent-memories"))
    assert response.status_code == 200
    body = response.json()
    assert body["deleted"]["memory_version"] == 1 and body["receiptId"]
    assert "apricot" not in response.content.decode()


def test_openapi_schema_and_docs_are_served(world):
    client = client_for(world.owner)
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/agent/v1/memories/remember" in schema.content
    assert client.get("/api/docs/").status_code == 200


def test_the_members_agent_memories_leave_out_assistant_memories(world):
    agent = make_agent(world.editor)
    agent.remember(namespace="travel", text="agent memory")
    assert (
        agent.remember(
            namespace=ASSISTANT_NAMESPACE, key="tea", source="user_request", kind="preference", text="likes green tea"
        ).status_code
        == 201
    )
    api = client_for(world.editor)
    listed = api.get(f"/api/w/{world.workspace.pk}/ask-history/agent-memories").json()["memories"]
    assert [m["text"] for m in listed] == ["agent memory"]
    assert set(_texts(agent.list())) == {"agent memory", "likes green tea"}  # agents read both (docs/decisions.md)


def test_the_agent_memories_api_filters_and_paginates_the_members_own(world, docs):
    collection, _, _ = docs
    agent = make_agent(world.editor)
    for i in range(5):
        agent.remember(namespace="travel", key=f"trip{i}", text=f"trip {i}")
    agent.remember(namespace="travel", key="trip0", text="trip 0 again")
    agent.remember(namespace="food", text="likes ramen", collectionId=str(collection.pk))
    make_agent(world.viewer, scopes=("memory:read",))
    make_agent(world.owner).remember(namespace="travel", text="the owner's own trip")
    api = client_for(world.editor)
    url = f"/api/w/{world.workspace.pk}/ask-history/agent-memories"
    assert sorted(m["text"] for m in api.get(url, {"namespace": "food"}).json()["memories"]) == ["likes ramen"]
    assert [m["text"] for m in api.get(url, {"key": "trip0"}).json()["memories"]] == ["trip 0 again"]  # current only
    assert [m["text"] for m in api.get(url, {"collectionId": str(collection.pk)}).json()["memories"]] == ["likes ramen"]
    seen, cursor = [], None
    while True:
        page = api.get(url, {"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        assert len(page["memories"]) <= 2
        seen += [m["text"] for m in page["memories"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 6 and "the owner's own trip" not in seen
    assert api.get(url, {"limit": 101}).status_code == 400


def test_put_preference_switches_remember_me(world, agent):
    api = client_for(world.editor)
    url = f"/api/w/{world.workspace.pk}/ai-memory/preference"
    assert api.put(url, {"rememberMe": False}, format="json").status_code == 200
    world.editor.refresh_from_db()
    assert world.editor.remember_me is False
    assert agent.list().json()["error"]["details"] == {"reason": "member"}
    assert api.put(url, {"rememberMe": "sometimes"}, format="json").status_code == 400
    assert api.put(url, {"rememberMe": True}, format="json").status_code == 200
    assert agent.list().status_code == 200
