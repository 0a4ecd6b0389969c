"""No input answers 500 (SPEC §2, issue 13 §5), tried with generated inputs: lone surrogates in
any JSON string, instants at and past the edges of what a datetime can hold, cursors the API did
not issue, and ids that are no ids in every route with an id in its path."""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime, timedelta, timezone

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryapp import mcp
from memoryapp.models import MemoryVersion
from tests.support import client_for, error_code, make_agent

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
EXTREMES = [
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999Z",
    "0001-01-01T00:00:00-14:00",
]


def fields_of(response) -> dict:
    assert response.status_code == 400, (response.status_code, response.content[:300])
    body = response.json()["error"]
    assert body["code"] == "VALIDATION_ERROR"
    return body["details"]["fields"]


# --- lone surrogates ---------------------------------------------------------------------------------
surrogates = st.integers(min_value=0xD800, max_value=0xDFFF).map(lambda c: f"\\u{c:04x}")
around = st.text(
    alphabet=st.characters(codec="ascii", exclude_characters='"\\', exclude_categories=("Cc",)), max_size=8
)
broken_text = st.tuples(around, surrogates, around).map(lambda parts: "".join(parts))


def body_with(template: dict, field: str, escaped: str, *, as_list: bool = False) -> bytes:
    """`template` as JSON with `field` set to a string holding a lone-surrogate escape."""
    placeholder = "@@BROKEN@@"
    data = dict(template, **{field: [placeholder] if as_list else placeholder})
    return json.dumps(data).replace(f'"{placeholder}"', f'"{escaped}"').encode()


AGENT_BODIES = {
    "remember": {"namespace": "n", "text": "hello", "details": "line"},
    "recall": {"query": "hello", "namespace": "n"},
    "list": {"namespace": "n", "key": "k"},
    "forget": {"namespace": "n", "key": "k"},
}


@FUZZ
@given(operation=st.sampled_from(sorted(AGENT_BODIES)), data=st.data(), escaped=broken_text)
def test_a_lone_surrogate_in_any_agent_field_is_a_validation_error_naming_it(agent, operation, data, escaped):
    field = data.draw(st.sampled_from(sorted(AGENT_BODIES[operation])))
    fields = fields_of(agent.call(operation, raw=body_with(AGENT_BODIES[operation], field, escaped)))
    assert field in fields
    assert MemoryVersion.objects.count() == 0


WORKSPACE_BODIES = {
    "ai-memory/memories": ({"kind": "fact", "topic": "tea", "summary": "Likes tea", "details": ["green"]}, "editor"),
    "collections": ({"name": "Handbook"}, "owner"),
    "entities": ({"name": "Contoso", "aliases": ["C"]}, "owner"),
    "context-sets": ({"name": "Set"}, "owner"),
    "agent-credentials": ({"name": "bot", "scopes": ["memory:read"]}, "editor"),
    "agents": ({"name": "Helper"}, "owner"),
}


@FUZZ
@given(path=st.sampled_from(sorted(WORKSPACE_BODIES)), data=st.data(), escaped=broken_text, as_list=st.booleans())
def test_a_lone_surrogate_in_any_workspace_api_body_is_a_validation_error_naming_it(
    world, path, data, escaped, as_list
):
    template, who = WORKSPACE_BODIES[path]
    field = data.draw(st.sampled_from(sorted(template)))
    response = client_for(getattr(world, who)).generic(
        "POST",
        f"/api/w/{world.workspace.pk}/{path}",
        body_with(template, field, escaped, as_list=as_list),
        content_type="application/json",
    )
    assert any(name == field or name.startswith(f"{field}[") for name in fields_of(response))


def test_lone_surrogates_in_details_keys_and_turns_are_refused_on_every_surface(world, agent):
    assert "details" in fields_of(agent.call("remember", raw=b'{"namespace": "n", "text": "t", "details": "\\udfff"}'))
    assert any("\\udfff" in name for name in fields_of(agent.call("list", raw=b'{"\\udfff": 1}')))
    client = client_for(world.editor)
    ai = client.generic(
        "POST",
        f"/api/w/{world.workspace.pk}/ai-memory/memories",
        b'{"kind": "fact", "topic": "tea", "summary": "s", "details": "\\ud800"}',
        content_type="application/json",
    )
    assert "details" in fields_of(ai)
    turn = b'{"agentId": "1", "conversationId": "c", "messages": [{"role": "user", "content": "hi \\udbff"}]}'
    response = agent.client.generic(
        "POST",
        "/api/agent/v1/conversations/turns",
        turn,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {agent.token}",
    )
    assert "messages[0].content" in fields_of(response)
    # MCP arguments are judged by the same gate, with the same answer.
    result = mcp.run_operation(agent.token, "remember", {"namespace": "n", "text": "ok", "details": ["\udfff"]})
    assert result.is_error and result.structured_content["error"]["code"] == "VALIDATION_ERROR"
    assert "details[0]" in result.structured_content["error"]["details"]["fields"]
    assert MemoryVersion.objects.count() == 0


def test_paired_surrogate_escapes_are_text_and_are_stored(agent):
    response = agent.call(
        "remember", raw=b'{"namespace": "n", "text": "smile \\ud83d\\ude00", "details": ["\\ud83d\\ude00"]}'
    )
    assert response.status_code == 201, response.content
    assert response.json()["memory"]["text"] == "smile \U0001f600"


# --- instants -------------------------------------------------------------------------------------
offsets = st.integers(min_value=-14 * 60, max_value=14 * 60).map(lambda minutes: timezone(timedelta(minutes=minutes)))
any_instant = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59), timezones=offsets
).map(lambda d: d.isoformat())
edge_instant = st.one_of(
    st.sampled_from(EXTREMES),
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(2, 1, 3), timezones=offsets).map(
        lambda d: d.isoformat()
    ),
    st.datetimes(min_value=datetime(9998, 12, 30), max_value=datetime(9999, 12, 31, 23, 59, 59), timezones=offsets).map(
        lambda d: d.isoformat()
    ),
)
instants = st.one_of(any_instant, edge_instant)


def answer_is_clear(response) -> None:
    assert response.status_code < 500, (response.status_code, response.content[:300])
    if response.status_code == 400:
        assert error_code(response) == "VALIDATION_ERROR"


@pytest.mark.parametrize("value", EXTREMES)
def test_instants_past_what_a_datetime_holds_are_validation_errors_on_recall_and_list(agent, value):
    assert "asOf" in fields_of(agent.recall(query="anything", asOf=value))
    assert "asOf" in fields_of(agent.list(asOf=value))


@FUZZ
@given(value=instants)
def test_any_instant_on_recall_list_and_every_datetime_field_answers_clearly(world, agent, value):
    answer_is_clear(agent.recall(query="anything", asOf=value))
    answer_is_clear(agent.list(asOf=value))
    owner, editor = client_for(world.owner), client_for(world.editor)
    answer_is_clear(
        editor.post(
            f"/api/w/{world.workspace.pk}/agent-credentials",
            {"name": "bot", "scopes": ["memory:read"], "expiresAt": value},
            format="json",
        )
    )
    answer_is_clear(owner.get(f"/api/w/{world.workspace.pk}/usage", {"since": value, "until": value}))


def test_extreme_expiry_dates_and_filters_are_validation_errors(world):
    owner = client_for(world.owner)
    collection = owner.post(f"/api/w/{world.workspace.pk}/collections", {"name": "c"}, format="json").json()["id"]
    for value in EXTREMES:
        assert "expiresAt" in fields_of(
            client_for(world.editor).post(
                f"/api/w/{world.workspace.pk}/agent-credentials",
                {"name": "b", "scopes": ["memory:read"], "expiresAt": value},
                format="json",
            )
        )
        assert "expiresAt" in fields_of(
            owner.post(
                f"/api/w/{world.workspace.pk}/documents",
                {"collectionId": collection, "title": "t", "text": "x", "expiresAt": value},
                format="json",
            )
        )
        assert "since" in fields_of(owner.get(f"/api/w/{world.workspace.pk}/usage", {"since": value}))
    for period in ("9999-12", "9999-12-31", "0001-01", "0001-01-01"):
        assert "period" in fields_of(owner.get(f"/api/w/{world.workspace.pk}/usage", {"period": period}))


@FUZZ
@given(day=st.dates(min_value=datetime(1, 1, 1).date(), max_value=datetime(9999, 12, 31).date()))
def test_any_expiry_date_on_the_agent_access_page_answers_a_page(world, day):
    client = Client()
    client.force_login(world.editor.user)
    response = client.post(
        f"/w/{world.workspace.pk}/settings/agent-access/",
        {"name": "bot", "scopes": ["memory:read"], "expires_on": day.isoformat()},
    )
    assert response.status_code == 200, response.status_code


# --- cursors --------------------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30) | instants,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6,
)
forged = st.one_of(
    json_values.map(lambda v: base64.urlsafe_b64encode(json.dumps(v).encode()).decode().rstrip("=")),
    st.tuples(instants, st.integers()).map(
        lambda v: base64.urlsafe_b64encode(json.dumps(list(v)).encode()).decode().rstrip("=")
    ),
    st.text(max_size=200),
)


@FUZZ
@given(cursor=forged)
def test_a_cursor_the_api_did_not_issue_is_a_validation_error(world, agent, cursor):
    assert (
        "cursor" in fields_of(agent.list(cursor=cursor))
        if cursor
        else agent.list(cursor=cursor).status_code in (200, 400)
    )
    if cursor:
        member_api = client_for(world.editor).get(
            f"/api/w/{world.workspace.pk}/ask-history/agent-memories", {"cursor": cursor}
        )
        assert "cursor" in fields_of(member_api)
        receipts = client_for(world.owner).get(
            f"/api/w/{world.workspace.pk}/ask-history/deletion-receipts", {"cursor": cursor}
        )
        assert "cursor" in fields_of(receipts)


def test_cursors_are_signed_and_bound_to_the_reader(world, agent):
    for i in range(3):
        agent.remember(namespace="n", text=f"note {i}")
    cursor = agent.list(limit=1).json()["nextCursor"]
    assert agent.list(limit=1, cursor=cursor).status_code == 200
    tampered = cursor[:-2] + ("AA" if not cursor.endswith("AA") else "BB")
    assert "cursor" in fields_of(agent.list(limit=1, cursor=tampered))
    other = make_agent(world.owner)
    assert "cursor" in fields_of(other.list(limit=1, cursor=cursor))  # issued for another member's list
    page = Client()
    page.force_login(world.editor.user)
    assert page.get(f"/w/{world.workspace.pk}/what-bundata-remembers/", {"cursor": cursor}).status_code == 200


# --- ids in paths -------------------------------------------------------------------------------------
def id_routes() -> list[str]:
    """Every route whose path holds an id (`<id:…>`), as a template, admin excluded (its own)."""
    found: list[str] = []

    def walk(patterns, prefix: str) -> None:
        for entry in patterns:
            route = str(entry.pattern)
            if isinstance(entry, URLResolver):
                if not route.startswith("admin/"):
                    walk(entry.url_patterns, prefix + route)
            elif isinstance(entry, URLPattern) and "<id:" in prefix + route:
                found.append("/" + prefix + route)

    walk(get_resolver().url_patterns, "")
    return sorted(set(found))


ID_ROUTES = id_routes()
not_an_id = st.one_of(
    st.text(
        alphabet=st.characters(exclude_characters="/?#%", exclude_categories=("Cs", "Cc")), min_size=1, max_size=30
    ).filter(lambda s: not re.fullmatch(r"[0-9]{1,18}", s) and s not in (".", "..")),
    st.integers(min_value=2**63).map(str),
    st.integers(min_value=10**18, max_value=10**40).map(str),
    st.sampled_from(["0", "-1", "abc", "1e3", "99999999999999999999999", "00000000000000000000001", "１２３"]),
)


def test_every_id_route_is_covered():
    assert len(ID_ROUTES) >= 15, ID_ROUTES
    assert any(r.startswith("/api/w/<id:ws_id>/") for r in ID_ROUTES) and any(
        r.startswith("/w/<id:ws_id>/") for r in ID_ROUTES
    )


@FUZZ
@given(route=st.sampled_from(ID_ROUTES), data=st.data(), bad=not_an_id)
def test_an_id_that_is_no_id_in_any_path_answers_404_never_500(world, route, data, bad):
    slots = re.findall(r"<id:(\w+)>", route)
    broken = data.draw(st.sampled_from(slots))
    path = route
    for slot in slots:
        path = path.replace(f"<id:{slot}>", bad if slot == broken else str(world.workspace.pk))
    path = path.replace("<str:role>", "editor")
    client = Client()
    client.force_login(world.owner.user)
    for method in ("get", "post", "delete"):
        response = getattr(client, method)(path)
        assert response.status_code == 404, (method, path, response.status_code)
        if path.startswith("/api/"):
            assert response.json()["error"]["code"] == "NOT_FOUND"


@pytest.mark.parametrize(
    "path", ["/api/w/abc/ask-history/settings", "/api/w/99999999999999999999999/ask-history/settings", "/api/w/0/usage"]
)
def test_workspace_ids_that_are_no_ids_answer_404_json(world, path):
    response = client_for(world.owner).get(path)
    assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"
