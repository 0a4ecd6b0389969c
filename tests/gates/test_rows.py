"""SPEC §2: every gate in isolation, and the precedence between neighbours."""

import json
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from governance import actions
from governance import actions as gov_actions
from memoryapp.models import MemoryVersion
from memoryapp.ratelimit import get_limiter
from tests.support import AgentClient, _refusal, error_code, make_agent


def test_missing_token_is_unauthenticated(client, world):
    response = client.post("/api/agent/v1/memories/list", {}, content_type="application/json")
    assert response.status_code == 401 and error_code(response) == "UNAUTHENTICATED"


def test_malformed_bearer_is_unauthenticated(client, world):
    for header in ("Bearer", "Basic abc", "Bearer gam_short", "Bearer gam_000000000000_x"):
        response = client.post(
            "/api/agent/v1/memories/list", {}, content_type="application/json", HTTP_AUTHORIZATION=header
        )
        assert response.status_code == 401, header


def test_revoked_credential_is_unauthenticated(world):
    credential, token = actions.create_credential(world.editor, name="a", scopes=["memory:read"])
    actions.revoke_credential(credential, actor=world.editor.user)
    assert error_code(AgentClient(token).list()) == "UNAUTHENTICATED"


def test_expired_credential_is_unauthenticated(world, time_machine):
    _, token = actions.create_credential(
        world.editor, name="a", scopes=["memory:read"], expires_at=timezone.now() + timedelta(hours=1)
    )
    assert AgentClient(token).list().status_code == 200
    time_machine.move_to(timezone.now() + timedelta(hours=2))
    assert error_code(AgentClient(token).list()) == "UNAUTHENTICATED"


def test_removed_members_credentials_answer_401(world):
    agent = make_agent(world.editor)
    actions.remove_member(world.editor, actor=world.owner.user)
    assert agent.list().status_code == 401


def test_a_deactivated_accounts_credentials_answer_401(world):
    agent = make_agent(world.editor)
    assert agent.list().status_code == 200
    world.editor.user.is_active = False  # the admin's "Active" box, unticked
    world.editor.user.save(update_fields=["is_active"])
    assert error_code(agent.list()) == "UNAUTHENTICATED"
    assert error_code(agent.remember(namespace="n", text="hello")) == "UNAUTHENTICATED"


def test_missing_scope_is_insufficient_scope(world):
    reader = make_agent(world.editor, scopes=["memory:read"])
    response = reader.remember(namespace="n", text="hello")
    assert response.status_code == 403 and error_code(response) == "INSUFFICIENT_SCOPE"
    writer = make_agent(world.editor, scopes=["memory:write"])
    assert error_code(writer.list()) == "INSUFFICIENT_SCOPE"
    assert error_code(writer.recall(query="x")) == "INSUFFICIENT_SCOPE"


def test_lowered_role_disables_write_scope_at_use_time(world):
    agent = make_agent(world.editor)
    assert agent.remember(namespace="n", text="before").status_code == 201
    actions.change_role(world.editor, "viewer", actor=world.owner.user)
    response = agent.remember(namespace="n", text="after")
    assert response.status_code == 403 and error_code(response) == "INSUFFICIENT_ROLE"
    assert agent.list().status_code == 200  # read still allowed for a viewer


def test_scope_beats_role(world):
    reader, writer = make_agent(world.editor, scopes=["memory:read"]), make_agent(world.editor)
    assert error_code(reader.remember(namespace="n", text="x")) == "INSUFFICIENT_SCOPE"  # scope alone
    actions.change_role(world.editor, "viewer", actor=world.owner.user)
    assert error_code(writer.remember(namespace="n", text="x")) == "INSUFFICIENT_ROLE"  # role alone
    assert error_code(reader.remember(namespace="n", text="x")) == "INSUFFICIENT_SCOPE"  # both


def test_viewer_cannot_be_granted_write_scope(world):
    from core.errors import ApiError

    with pytest.raises(ApiError) as refused:
        actions.create_credential(world.viewer, name="a", scopes=["memory:write"])
    assert refused.value.code == "INSUFFICIENT_ROLE"


def test_non_retaining_workspace_refuses_always(world):
    agent = make_agent(world.editor)
    world.workspace.retains_history = False
    world.workspace.ai_memory_available = False
    world.workspace.save()
    for operation in ("remember", "recall", "list", "forget"):
        response = agent.call(operation, {})
        assert response.status_code == 403 and error_code(response) == "NON_RETAINING_WORKSPACE", operation


def test_role_beats_non_retaining(world):
    agent = make_agent(world.editor)
    actions.change_role(world.editor, "viewer", actor=world.owner.user)
    assert error_code(agent.remember(namespace="n", text="x")) == "INSUFFICIENT_ROLE"  # role alone
    world.workspace.retains_history = False
    world.workspace.save()
    assert error_code(agent.remember(namespace="n", text="x")) == "INSUFFICIENT_ROLE"  # both
    assert (
        error_code(make_agent(world.owner).remember(namespace="n", text="x")) == "NON_RETAINING_WORKSPACE"
    )  # non-retaining alone


@pytest.mark.parametrize("reason", ["organization", "workspace", "member"])
def test_disabled_reasons_in_order(world, reason):
    agent = make_agent(world.editor)
    if reason == "organization":
        actions.set_ai_memory_available(world.workspace, False, actor=None)
    if reason in ("organization", "workspace"):
        actions.update_settings(world.workspace, {"agentMemoriesEnabled": False}, actor=world.owner.user)
    actions.set_remember_me(world.editor, False)
    response = agent.list()
    assert response.status_code == 403
    assert response.json()["error"] == {
        "code": "AGENT_MEMORY_DISABLED",
        "message": response.json()["error"]["message"],
        "details": {"reason": reason},
    }


def test_owner_switch_is_off_by_default(db):
    workspace, owner = actions.create_workspace("Fresh", owner_email="fresh@x.test")
    agent = make_agent(owner)
    assert agent.list().json()["error"]["details"] == {"reason": "workspace"}


def test_disabled_beats_validation(world):
    agent = make_agent(world.editor)
    assert error_code(agent.call("remember", raw=b"{not json")) == "VALIDATION_ERROR"  # validation alone
    actions.set_remember_me(world.editor, False)
    assert error_code(agent.remember(namespace="n", text="fine")) == "AGENT_MEMORY_DISABLED"  # disabled alone
    assert error_code(agent.call("remember", raw=b"{not json")) == "AGENT_MEMORY_DISABLED"  # both


@pytest.mark.parametrize(
    "body, field",
    [
        ({"text": "x"}, "namespace"),
        ({"namespace": "", "text": "x"}, "namespace"),
        ({"namespace": "n" * 65, "text": "x"}, "namespace"),
        ({"namespace": "n", "text": ""}, "text"),
        ({"namespace": "n", "text": "x" * 1001}, "text"),
        ({"namespace": "n", "text": 5}, "text"),
        ({"namespace": "n", "text": "x", "key": "k" * 121}, "key"),
        ({"namespace": "n", "text": "x", "citations": [str(i) for i in range(1, 22)]}, "citations"),
        ({"namespace": "n", "text": "x", "citations": "1"}, "citations"),
        ({"namespace": "n", "text": "x", "source": "robot"}, "source"),
        ({"namespace": "n", "text": "x", "surprise": 1}, "surprise"),
        ({"namespace": "n", "text": "nul\x00byte"}, "text"),
        ({"namespace": "assistant", "text": "x"}, "namespace"),
        ({"namespace": "n", "text": "x", "source": "user_request"}, "namespace"),
    ],
)
def test_remember_validation(agent, body, field):
    response = agent.remember(**body)
    assert response.status_code == 400, response.json()
    assert error_code(response) == "VALIDATION_ERROR"
    assert field in response.json()["error"]["details"]["fields"]


@pytest.mark.parametrize(
    "operation, body, field",
    [
        ("recall", {}, "query"),
        ("recall", {"query": "x", "limit": 51}, "limit"),
        ("recall", {"query": "x", "limit": 0}, "limit"),
        ("recall", {"query": "x", "asOf": "2024-01-01T00:00:00"}, "asOf"),
        ("recall", {"query": "x", "asOf": "2999-01-01T00:00:00Z"}, "asOf"),
        ("recall", {"query": "x", "asOf": "yesterday"}, "asOf"),
        ("list", {"limit": 101}, "limit"),
        ("list", {"cursor": "garbage!"}, "cursor"),
        ("forget", {}, "non_field_errors"),
        ("forget", {"namespace": "n"}, "non_field_errors"),
        ("forget", {"memoryId": "abc"}, "memoryId"),
        ("forget", {"memoryId": "1", "namespace": "n", "key": "k"}, "non_field_errors"),
    ],
)
def test_read_and_forget_validation(agent, operation, body, field):
    response = agent.call(operation, body)
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert field in response.json()["error"]["details"]["fields"]


def test_malformed_json_and_wrong_shapes_are_validation_errors(agent):
    assert error_code(agent.call("remember", raw=b"{nope")) == "VALIDATION_ERROR"
    assert error_code(agent.call("remember", raw=b"[1, 2]")) == "VALIDATION_ERROR"
    assert error_code(agent.call("remember", raw=b'"text"')) == "VALIDATION_ERROR"
    assert agent.call("remember", raw=b"\xff\xfe", content_type="application/json").status_code == 400


def test_wrong_content_type_is_415(agent):
    response = agent.call("remember", raw=b"namespace=n", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415 and error_code(response) == "UNSUPPORTED_MEDIA_TYPE"


def test_body_over_64_kib_is_413(agent):
    response = agent.call("remember", raw=b'{"namespace":"n","text":"' + b"x" * 70000 + b'"}')
    assert response.status_code == 413
    assert MemoryVersion.objects.count() == 0


@pytest.mark.parametrize(
    "field, value",
    [("namespace", "mail-jane@example.com"), ("key", "card 4111 1111 1111 1111"), ("key", "+972 54-123-4567")],
)
def test_personal_data_in_names_is_refused(agent, field, value):
    body = {"namespace": "n", "text": "fine", field: value}
    response = agent.remember(**body)
    assert response.status_code == 400 and error_code(response) == "AGENT_MEMORY_PERSONAL_DATA"
    assert value not in response.content.decode()
    assert MemoryVersion.objects.count() == 0


def test_personal_data_in_forget_key_is_refused(agent):
    assert error_code(agent.forget(namespace="n", key="jane@example.com")) == "AGENT_MEMORY_PERSONAL_DATA"


def test_validation_beats_personal_data(agent):
    assert error_code(agent.remember(namespace="n", text="")) == "VALIDATION_ERROR"  # validation alone
    assert (
        error_code(agent.remember(namespace="jane@example.com", text="fine")) == "AGENT_MEMORY_PERSONAL_DATA"
    )  # personal data alone
    assert error_code(agent.remember(namespace="jane@example.com", text="")) == "VALIDATION_ERROR"  # both


def test_citation_must_exist_in_workspace(agent, world, docs):
    other_collection = actions.create_collection(world.other_workspace, name="Theirs")
    other_document = actions.create_document(other_collection, title="t", text="secret plans")
    foreign = other_document.current_version.passages.first()
    for passage_id in (str(foreign.pk), "999999"):
        response = agent.remember(namespace="n", text="x", citations=[passage_id])
        assert response.status_code == 400 and error_code(response) == "AGENT_MEMORY_CITATION_INVALID"


def test_citation_must_be_readable_by_the_member(agent, world):
    restricted = actions.create_collection(world.workspace, name="Board only", restricted=True, readers=[world.owner])
    document = actions.create_document(restricted, title="t", text="board minutes")
    response = agent.remember(namespace="n", text="x", citations=[str(document.current_version.passages.first().pk)])
    assert error_code(response) == "AGENT_MEMORY_CITATION_INVALID"


def test_expired_document_cannot_be_cited(agent, world):
    collection = actions.create_collection(world.workspace, name="c")
    document = actions.create_document(collection, title="t", text="old", expires_at=timezone.now() - timedelta(days=1))
    assert (
        error_code(
            agent.remember(namespace="n", text="x", citations=[str(document.current_version.passages.first().pk)])
        )
        == "AGENT_MEMORY_CITATION_INVALID"
    )


def test_empty_after_masking(agent):
    response = agent.remember(namespace="n", text="jane@example.com, +1 (212) 555-0123")
    assert response.status_code == 400 and error_code(response) == "AGENT_MEMORY_EMPTY"
    assert "jane@example.com" not in response.content.decode()
    assert MemoryVersion.objects.count() == 0


def test_citation_beats_empty(agent):
    assert (
        error_code(agent.remember(namespace="n", text="fine", citations=["999999"])) == "AGENT_MEMORY_CITATION_INVALID"
    )  # citation alone
    assert error_code(agent.remember(namespace="n", text="jane@example.com")) == "AGENT_MEMORY_EMPTY"  # empty alone
    assert (
        error_code(agent.remember(namespace="n", text="jane@example.com", citations=["999999"]))
        == "AGENT_MEMORY_CITATION_INVALID"
    )  # both


def test_rate_limit_120_per_hour_with_headers(agent, world):
    for i in range(120):
        response = agent.remember(namespace="n", text=f"note {i}")
        assert response.status_code == 201, (i, response.json())
    assert response["RateLimit-Limit"] == "120" and response["RateLimit-Remaining"] == "0"
    refused = agent.remember(namespace="n", text="one more")
    assert refused.status_code == 429 and error_code(refused) == "AGENT_MEMORY_RATE_LIMITED"
    assert 1 <= int(refused["Retry-After"]) <= 3600
    assert refused["RateLimit-Remaining"] == "0"


def test_forgetting_does_not_give_quota_back(agent):
    ids = [agent.remember(namespace="n", text=f"note {i}").json()["memory"]["id"] for i in range(120)]
    for memory_id in ids[:10]:
        assert agent.forget(memoryId=memory_id).status_code == 200
    assert error_code(agent.remember(namespace="n", text="again")) == "AGENT_MEMORY_RATE_LIMITED"


def test_rate_limit_window_rolls(agent, time_machine):
    from tests.limits.support import _age_redis_window, _credential_id

    for i in range(120):
        agent.remember(namespace="n", text=f"note {i}")
    assert error_code(agent.remember(namespace="n", text="refused")) == "AGENT_MEMORY_RATE_LIMITED"
    if type(get_limiter()).__name__ == "RedisRateLimiter":
        _age_redis_window(_credential_id(agent), 61 * 60)  # Redis keeps its own clock: age its scores
    else:
        time_machine.move_to(timezone.now() + timedelta(minutes=61))
    assert agent.remember(namespace="n", text="later").status_code == 201


def test_rate_limit_is_per_credential(world):
    first, second = make_agent(world.editor), make_agent(world.editor)
    for i in range(120):
        first.remember(namespace="n", text=f"note {i}")
    assert second.remember(namespace="n", text="other credential").status_code == 201


@override_settings(MAX_VERSIONS_PER_MEMBER=5)
def test_cap_counts_every_version_of_every_source(agent, world):
    from memoryapp.assistant import add_assistant_memory

    add_assistant_memory(world.editor, kind="preference", topic="tone", summary="formal")
    for i in range(3):
        assert agent.remember(namespace="n", key="k", text=f"v{i}").status_code == 201
    assert agent.remember(namespace="n", text="fifth").status_code == 201
    full = agent.remember(namespace="n", text="sixth")
    assert full.status_code == 409 and error_code(full) == "AGENT_MEMORY_FULL"


@override_settings(MAX_VERSIONS_PER_MEMBER=1)
def test_a_write_refused_by_the_cap_does_not_use_rate_limit_quota(agent):
    assert agent.remember(namespace="n", text="only").status_code == 201
    for _ in range(130):
        assert error_code(agent.remember(namespace="n", text="more")) == "AGENT_MEMORY_FULL"


def test_a_citation_must_be_a_readable_passage_of_the_workspace(world):
    agent = make_agent(world.editor)
    secret = gov_actions.create_collection(world.workspace, name="Secret", restricted=True, readers=[world.owner])
    unreadable = str(
        gov_actions.create_document(secret, title="s", text="board minutes").current_version.passages.first().pk
    )
    elsewhere_collection = gov_actions.create_collection(world.other_workspace, name="Elsewhere")
    elsewhere = str(
        gov_actions.create_document(elsewhere_collection, title="e", text="other workspace")
        .current_version.passages.first()
        .pk
    )
    readable_collection = gov_actions.create_collection(world.workspace, name="Open")
    readable = str(
        gov_actions.create_document(readable_collection, title="o", text="Open text.")
        .current_version.passages.first()
        .pk
    )
    for bad in (unreadable, elsewhere, "999999"):
        error = _refusal(
            agent.remember(namespace="n", text="x", citations=[readable, bad]), 400, "AGENT_MEMORY_CITATION_INVALID"
        )
        assert error["details"] == {"passageIds": [bad]}
    ok = agent.remember(namespace="n", text="x", citations=[readable])
    assert ok.status_code == 201 and [c["passageId"] for c in ok.json()["memory"]["citations"]] == [readable]


def test_a_collection_must_be_readable_by_the_member_and_in_the_workspace(world):
    agent = make_agent(world.editor)
    secret = gov_actions.create_collection(world.workspace, name="Secret", restricted=True, readers=[world.owner])
    elsewhere = gov_actions.create_collection(world.other_workspace, name="Elsewhere")
    gov_actions.create_collection(
        world.workspace, name="Open to all"
    )  # another collection being readable proves nothing
    for collection in (secret, elsewhere):
        error = _refusal(
            agent.remember(namespace="n", text="x", collectionId=str(collection.pk)), 400, "VALIDATION_ERROR"
        )
        assert list(error["details"]["fields"]) == ["collectionId"]
    assert make_agent(world.owner).remember(namespace="n", text="x", collectionId=str(secret.pk)).status_code == 201


def test_personal_data_in_a_name_is_refused_with_the_kinds_per_field(world):
    agent = make_agent(world.editor)
    error = _refusal(
        agent.remember(namespace="mail jane@example.com", key="call +1 212 555 0199", text="x"),
        400,
        "AGENT_MEMORY_PERSONAL_DATA",
    )
    assert error["details"] == {"fields": {"namespace": ["EMAIL"], "key": ["PHONE"]}}
    assert "jane@example.com" not in json.dumps(error)


# gates rows 1-6 (SPEC §2): who may call at all, and with what
def test_rows_1_to_3_refuse_with_their_codes_and_details(world, time_machine):
    _refusal(AgentClient("").remember(namespace="n", text="x"), 401, "UNAUTHENTICATED")
    revoked_credential, revoked_token = gov_actions.create_credential(
        world.editor, name="r", scopes=["memory:read", "memory:write"]
    )
    gov_actions.revoke_credential(revoked_credential, actor=world.editor.user)
    _refusal(AgentClient(revoked_token).list(), 401, "UNAUTHENTICATED")
    _, expiring_token = gov_actions.create_credential(
        world.editor, name="e", scopes=["memory:read"], expires_at=timezone.now() + timedelta(hours=1)
    )
    assert AgentClient(expiring_token).list().status_code == 200
    time_machine.move_to(timezone.now() + timedelta(hours=2))
    _refusal(AgentClient(expiring_token).list(), 401, "UNAUTHENTICATED")
    time_machine.move_to(timezone.now() - timedelta(hours=2))
    reader = make_agent(world.editor, scopes=("memory:read",))
    error = _refusal(reader.remember(namespace="n", text="x"), 403, "INSUFFICIENT_SCOPE")
    assert error["details"] == {"requiredScope": "memory:write"}
    writer = make_agent(world.editor)
    gov_actions.change_role(world.editor, "viewer", actor=world.owner.user)
    error = _refusal(writer.remember(namespace="n", text="x"), 403, "INSUFFICIENT_ROLE")
    assert error["details"] == {"requiredScope": "memory:write", "role": "viewer"}
    assert writer.list().status_code == 200  # reading is still allowed to a viewer


def test_row_5_names_which_switch_is_off(world):
    agent = make_agent(world.editor)
    gov_actions.set_remember_me(world.editor, False)
    assert _refusal(agent.list(), 403, "AGENT_MEMORY_DISABLED")["details"] == {"reason": "member"}
    gov_actions.update_settings(world.workspace, {"agentMemoriesEnabled": False}, actor=world.owner.user)
    assert _refusal(agent.list(), 403, "AGENT_MEMORY_DISABLED")["details"] == {"reason": "workspace"}
    gov_actions.set_ai_memory_available(world.workspace, False, actor=None)
    assert _refusal(agent.list(), 403, "AGENT_MEMORY_DISABLED")["details"] == {"reason": "organization"}


def test_row_6_a_body_that_is_not_an_object_is_a_validation_error(world):
    agent = make_agent(world.editor)
    error = _refusal(agent.call("remember", raw=b"[1, 2]"), 400, "VALIDATION_ERROR")
    assert list(error["details"]["fields"]) == ["non_field_errors"]


def test_a_query_may_hold_1000_characters_and_no_more(agent):
    assert agent.recall(query="q" * 1000).status_code == 200
    response = agent.recall(query="q" * 1001)
    assert response.status_code == 400 and "query" in response.json()["error"]["details"]["fields"]


def test_collection_id_must_be_readable(agent, world):
    restricted = actions.create_collection(world.workspace, name="Board", restricted=True, readers=[world.owner])
    response = agent.remember(namespace="n", text="x", collectionId=str(restricted.pk))
    assert error_code(response) == "VALIDATION_ERROR"
