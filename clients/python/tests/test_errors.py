"""Every error code the agent API answers reaches the caller as its own exception class,
provoked for real on the live product (SPEC §2 in full, and the other codes the server emits)."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx
import pytest

from governed_memory import NO_RETRY, MemoryClient, errors
from governed_memory.client import parse
from live_server import REPO, LiveServer, World

#: SPEC §2, in gate order, and the 404 beside it.
SPEC_CODES = [
    "UNAUTHENTICATED",
    "INSUFFICIENT_SCOPE",
    "INSUFFICIENT_ROLE",
    "NON_RETAINING_WORKSPACE",
    "AGENT_MEMORY_DISABLED",
    "VALIDATION_ERROR",
    "AGENT_MEMORY_PERSONAL_DATA",
    "AGENT_CONTEXT_SET_SCOPE_REFUSED",
    "AGENT_MEMORY_CITATION_INVALID",
    "AGENT_MEMORY_EMPTY",
    "AGENT_MEMORY_RATE_LIMITED",
    "AGENT_MEMORY_FULL",
    "MEMORY_NOT_FOUND",
]
#: Codes the server emits that no agent endpoint can answer, so the client has no class for them.
NOT_AGENT_API = {
    "LAST_OWNER": "workspace API: removing or demoting the last owner",
    "ALREADY_MEMBER": "workspace API: adding someone who is already a member",
    "PREVIEW_OUTDATED": "workspace API: a bulk erase whose preview changed",
    "MCP_NOT_STARTED": "the /mcp transport without its ASGI lifespan",
}
#: Classes for codes that a client sending well-formed requests cannot provoke on a healthy server.
MAPPED_ONLY = {
    "THROTTLED": "DRF's generic throttle; no throttle class is configured on the agent API (the product's limits "
    "answer AGENT_MEMORY_RATE_LIMITED)",
    "SERVICE_UNAVAILABLE": "the server's database busy or unreachable; the server's own suite provokes it "
    "(tests/operations/test_unavailable.py)",
    "INTERNAL_ERROR": "only the MCP tools name an unexpected failure; REST never answers 500 (the suite fails on any "
    "500 in the server's logs)",
}


def server_codes() -> set[str]:
    """Every error code in the server's source: ApiError(status, "CODE"…), error_body("CODE"…),
    error_response(status, "CODE"…), forbidden(code="CODE") and the DRF table."""
    pattern = re.compile(
        r"(?:ApiError\(\s*\d{3},\s*|error_body\(\s*|error_response\(\s*\d{3},\s*|code=|"
        r'\(drf\.\w+,\s*\d{3},\s*)"([A-Z][A-Z0-9_]+)"'
    )
    codes: set[str] = set()
    # Every top-level package of the server (its apps, the project wiring, the shared core), found
    # on disk, so a package added or renamed on the server side is scanned without editing this.
    packages = [init.parent for init in REPO.glob("*/__init__.py") if init.parent.name not in {"tests", "bench"}]
    assert {p.name for p in packages} >= {"memoryapp", "governance", "retention"}
    for package in packages:
        for path in package.rglob("*.py"):
            if "migrations" not in path.parts:
                codes.update(pattern.findall(path.read_text()))
    return codes


def test_every_code_the_server_emits_has_its_class():
    codes = server_codes()
    assert (
        set(SPEC_CODES) | {"RATE_LIMIT_UNAVAILABLE", "PAYLOAD_TOO_LARGE", "AGENT_NOT_FOUND", "UNKNOWN_MODEL"} <= codes
    )  # the scan itself works
    missing = codes - set(errors.ERROR_CLASSES) - set(NOT_AGENT_API)
    assert not missing, f"codes without an exception class: {sorted(missing)}"
    classes = list(errors.ERROR_CLASSES.values())
    assert len(set(classes)) == len(classes) and all(issubclass(c, errors.APIError) for c in classes)


# --- provoking each code ----------------------------------------------------------------------------
class Case:
    def __init__(self, live: LiveServer, world: World):
        self.live, self.world = live, world

    def client(self, token: str, instance: str = "main", **kwargs) -> MemoryClient:
        return MemoryClient(self.live.url(instance), token, retry=NO_RETRY, **kwargs)

    def editor(self, scopes: tuple[str, ...] = ("memory:read", "memory:write"), **kwargs) -> MemoryClient:
        return self.client(self.world.member("editor").credential(scopes), **kwargs)


def unauthenticated(c: Case) -> None:
    c.client("gam_000000000000_not-a-token").list_page()


def insufficient_scope(c: Case) -> None:
    c.editor(("memory:read",)).remember("prefs", "Prefers tea")


def insufficient_role(c: Case) -> None:
    member = c.world.member("demoted")
    token = member.credential()
    response = c.world.main.owner.api("PATCH", f"members/{member.member_id}", {"role": "viewer"})
    assert response.status_code == 200, response.text
    c.client(token).remember("prefs", "Written after the role was lowered")


def non_retaining(c: Case) -> None:
    c.client(c.world.non_retaining.owner.credential()).list_page()


def disabled_by_workspace(c: Case) -> None:
    c.client(c.world.workspace_off.owner.credential()).recall("anything")


def disabled_by_organization(c: Case) -> None:
    c.client(c.world.organization_off.owner.credential()).recall("anything")


def disabled_by_member(c: Case) -> None:
    member = c.world.member("quiet")
    assert member.api("PUT", "ai-memory/preference", {"rememberMe": False}).status_code == 200
    c.client(member.credential()).remember("prefs", "Should not be kept")


def validation(c: Case) -> None:
    c.editor().recall("anything", limit=0)


def personal_data(c: Case) -> None:
    c.editor().remember("prefs", "Prefers tea", key="ada@example.com")


def context_set_scope(c: Case) -> None:
    owner = c.world.main.owner
    collection = owner.api("POST", "collections", {"name": "Scoped handbook"}).json()["id"]
    context_set = owner.api("POST", "context-sets", {"name": "Scoped set", "collectionIds": [collection]})
    assert context_set.status_code == 201, context_set.text
    token = c.world.member("editor").credential(context_set_id=context_set.json()["id"])
    c.client(token).remember("prefs", "A note with neither a collection nor citations is outside the set")


def citation_invalid(c: Case) -> None:
    c.editor().remember("prefs", "Cites a passage that does not exist", citations=["999999999"])


def empty(c: Case) -> None:
    c.editor().remember("prefs", "ada@example.com")


def rate_limited(c: Case, member: str = "limited") -> None:
    memory = c.client(c.world.member(member).credential(), "tight")
    memory.remember("limits", "first")
    memory.remember("limits", "second")
    memory.remember("limits", "third: over AGENT_REMEMBERS_PER_HOUR=2")


def read_limited(c: Case) -> None:
    memory = c.client(c.world.member("reader").credential(("memory:read",)), "tight")
    memory.recall("first")
    memory.list_page()
    memory.recall("third")
    memory.list_page()  # the fourth read: over MEMORY_READS_PER_HOUR=3


def full(c: Case) -> None:
    member = c.world.member("full")
    first, second = (c.client(member.credential(), "tight") for _ in range(2))
    first.remember("cap", "one")
    first.remember("cap", "two")
    second.remember("cap", "three")
    second.remember("cap", "four: over MAX_VERSIONS_PER_MEMBER=3")


def not_found_memory(c: Case) -> None:
    c.editor().forget("999999999")


def limiter_unavailable(c: Case) -> None:
    c.client(c.world.member("editor").credential(), "nolimiter").remember("prefs", "The limiter is down")


def payload_too_large(c: Case) -> None:
    c.editor().remember("prefs", "x" * 70_000)


def agent_not_found(c: Case) -> None:
    c.editor().submit_turn("999999999", "conversation", [("user", "hello")])


def unknown_model(c: Case) -> None:
    c.editor().report_reply_usage("conversation", "no-such-model", 10, 5)


def not_found_route(c: Case) -> None:
    MemoryClient(c.live.url() + "/api/v0", c.world.member("editor").credential(), retry=NO_RETRY).list_page()


def raw(method: str, path: str, **kwargs) -> Callable[[Case], None]:
    """A request this client never sends, answered by the live server and read by the client's parser."""

    def provoke(c: Case) -> None:
        token = c.world.member("editor").credential()
        response = httpx.request(
            method,
            c.live.url() + path,
            headers={"Authorization": f"Bearer {token}", **kwargs.pop("headers", {})},
            **kwargs,
        )
        parse(response)

    return provoke


def forbidden(c: Case) -> None:
    response = c.world.member("editor").api("PUT", "ask-history/settings", {"agentMemoriesEnabled": False})
    parse(response)


PROVOKE: dict[str, list[tuple[str, Callable[[Case], None], dict]]] = {
    "UNAUTHENTICATED": [("unknown token", unauthenticated, {})],
    "INSUFFICIENT_SCOPE": [("read-only credential remembers", insufficient_scope, {})],
    "INSUFFICIENT_ROLE": [("role lowered after the credential", insufficient_role, {})],
    "NON_RETAINING_WORKSPACE": [("non-retaining workspace", non_retaining, {})],
    "AGENT_MEMORY_DISABLED": [
        ("owner switch off", disabled_by_workspace, {"reason": "workspace"}),
        ("platform flag off", disabled_by_organization, {"reason": "organization"}),
        ("member's remember-me off", disabled_by_member, {"reason": "member"}),
    ],
    "VALIDATION_ERROR": [("recall limit 0", validation, {})],
    "AGENT_MEMORY_PERSONAL_DATA": [("e-mail address as key", personal_data, {})],
    "AGENT_CONTEXT_SET_SCOPE_REFUSED": [("outside the bound context set", context_set_scope, {})],
    "AGENT_MEMORY_CITATION_INVALID": [("cites a missing passage", citation_invalid, {})],
    "AGENT_MEMORY_EMPTY": [("nothing left after masking", empty, {})],
    "AGENT_MEMORY_RATE_LIMITED": [
        ("third remember in the window", rate_limited, {"operation": "remember"}),
        ("fourth read in the window", read_limited, {"operation": "read"}),
    ],
    "AGENT_MEMORY_FULL": [("fourth version over the cap", full, {})],
    "MEMORY_NOT_FOUND": [("forget an unknown id", not_found_memory, {})],
    "RATE_LIMIT_UNAVAILABLE": [("rate limiter's Redis unreachable", limiter_unavailable, {})],
    "PAYLOAD_TOO_LARGE": [("70,000-character body", payload_too_large, {})],
    "AGENT_NOT_FOUND": [("turn for an unknown agent", agent_not_found, {})],
    "UNKNOWN_MODEL": [("reply usage of an unpriced model", unknown_model, {})],
    "NOT_FOUND": [("base URL with a wrong path", not_found_route, {})],
    "METHOD_NOT_ALLOWED": [("GET on an operation", raw("GET", "/api/agent/v1/memories/list"), {})],
    "UNSUPPORTED_MEDIA_TYPE": [
        ("form-encoded body", raw("POST", "/api/agent/v1/memories/list", data={"limit": "1"}), {})
    ],
    "NOT_ACCEPTABLE": [
        ("Accept: text/csv", raw("POST", "/api/agent/v1/memories/list", json={}, headers={"Accept": "text/csv"}), {})
    ],
    "FORBIDDEN": [("an editor changes the owner's settings", forbidden, {})],
}

CASES = [
    pytest.param(code, provoke, expect, id=f"{code}: {label}")
    for code, cases in PROVOKE.items()
    for label, provoke, expect in cases
]


def test_every_class_is_provoked_or_says_why_not():
    assert set(SPEC_CODES) <= set(PROVOKE)
    assert set(PROVOKE) | set(MAPPED_ONLY) == set(errors.ERROR_CLASSES)


@pytest.mark.parametrize(("code", "provoke", "expect"), CASES)
def test_error_code_reaches_the_caller_as_its_class(
    live: LiveServer, world: World, code: str, provoke: Callable[[Case], None], expect: dict
):
    with pytest.raises(errors.APIError) as raised:
        provoke(Case(live, world))
    error = raised.value
    assert type(error) is errors.ERROR_CLASSES[code], f"{type(error).__name__} for {error.code}: {error.message}"
    assert error.code == code and error.message and isinstance(error.details, dict) and 400 <= error.status < 600
    for name, value in expect.items():
        assert error.details[name] == value and getattr(error, name) == value


def test_error_details_are_carried(live: LiveServer, world: World):
    with pytest.raises(errors.ValidationError) as raised:
        MemoryClient(live.url(), world.member("editor").credential()).remember("prefs", "x" * 1001, kind="mood")
    assert set(raised.value.fields) == {"text", "kind"}, raised.value.fields
    # str() carries the reason, not just the code: which fields, and what is wrong with them
    text = str(raised.value)
    assert (
        text.startswith("VALIDATION_ERROR: ") and '"kind"' in text and '"text"' in text and "Must be one of" in text
    ), text
    assert "mood" not in text  # the server never repeats a refused value, and str() adds none
    with pytest.raises(errors.PersonalData) as personal:
        MemoryClient(live.url(), world.member("editor").credential()).remember("prefs", "x", key="ada@example.com")
    assert (
        "EMAIL" in str(personal.value) and "key" in str(personal.value) and "ada@example.com" not in str(personal.value)
    )
    with pytest.raises(errors.RateLimited) as limited:
        rate_limited(Case(live, world), "limited2")
    assert 0 < limited.value.retry_after <= 4 and limited.value.headers["ratelimit-limit"] == "2"
    assert limited.value.operation == "remember"  # the server names the budget (reads say "read")


def test_a_wrong_base_url_is_an_unexpected_response_not_a_crash(live: LiveServer, world: World):
    with pytest.raises(errors.UnexpectedResponse) as raised:
        MemoryClient(live.url() + "/accounts", world.member("editor").credential(), retry=NO_RETRY).list_page()
    assert raised.value.status == 404


def test_a_closed_port_is_a_connection_failure(world: World):
    from live_server import free_port

    with pytest.raises(errors.ConnectionFailed) as raised:
        MemoryClient(f"http://127.0.0.1:{free_port()}", "gam_x", retry=NO_RETRY).remember("prefs", "never sent")
    assert raised.value.request_sent is False
