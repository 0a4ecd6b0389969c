"""A success answer missing a field raises the client's own MalformedResponse naming the field,
not a bare KeyError (issue 32 row 5). The live product never answers so, which is why this one
test stands a server of another shape in for it: httpx's MockTransport, answering every operation
with a real answer of the product's shape minus one field."""

from __future__ import annotations

import anyio
import httpx
import pytest

from governed_memory import AsyncMemoryClient, MemoryClient, errors

MEMORY = {
    "id": "1",
    "namespace": "notes",
    "key": None,
    "text": "t",
    "kind": None,
    "details": [],
    "source": "agent",
    "collectionId": None,
    "citations": [],
    "sourceState": None,
    "version": 1,
    "validFrom": "2026-01-01T00:00:00Z",
    "validTo": None,
    "createdAt": "2026-01-01T00:00:00Z",
    "expiresAt": None,
    "masked": [],
}
ANSWERS = {
    "remember": (201, {"memory": MEMORY, "superseded": 0}),
    "recall": (
        200,
        {"memories": [{**MEMORY, "score": 1.0, "ranks": {}}], "hidden": 0, "considered": 1, "degraded": []},
    ),
    "list": (200, {"memories": [MEMORY], "hidden": 0, "nextCursor": None}),
    "forget": (200, {"forgotten": 1, "receiptId": "r"}),
    "reply_usage": (201, {"usage": {"id": "1"}}),
}
CASES = [
    ("remember", "superseded"),
    ("recall", "hidden"),
    ("list", "nextCursor"),
    ("forget", "receiptId"),
    ("list", "createdAt"),
    ("recall", "score"),
    ("reply_usage", "usage"),
]


def answering(operation: str, missing: str) -> httpx.MockTransport:
    status, body = ANSWERS[operation]

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != missing}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return httpx.MockTransport(lambda request: httpx.Response(status, json=strip(body)))


def call(client, operation: str):
    return {
        "remember": lambda: client.remember("notes", "t"),
        "recall": lambda: client.recall("t"),
        "list": lambda: client.list_page(),
        "reply_usage": lambda: client.report_reply_usage("c", "m", 1, 1),
        "forget": lambda: client.forget(memory_id=1),
    }[operation]()


@pytest.mark.parametrize(("operation", "missing"), CASES)
def test_a_success_answer_missing_a_field_names_it(operation, missing):
    with (
        MemoryClient(
            "http://gam.test", "gam_x_y", http_client=httpx.Client(transport=answering(operation, missing))
        ) as client,
        pytest.raises(errors.MalformedResponse) as raised,
    ):
        call(client, operation)
    assert raised.value.field == missing and missing in str(raised.value) and raised.value.operation == operation
    assert isinstance(raised.value, errors.UnexpectedResponse) and isinstance(raised.value, errors.GovernedMemoryError)
    assert not isinstance(raised.value, KeyError)


def test_the_async_client_names_it_too():
    async def go():
        async with AsyncMemoryClient(
            "http://gam.test", "gam_x_y", http_client=httpx.AsyncClient(transport=answering("recall", "hidden"))
        ) as client:
            await client.recall("t")

    with pytest.raises(errors.MalformedResponse, match="hidden"):
        anyio.run(go)


def test_a_field_of_another_type_is_malformed_too():
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, json={"memories": None, "hidden": 0, "nextCursor": None})
    )
    with (
        MemoryClient("http://gam.test", "gam_x_y", http_client=httpx.Client(transport=transport)) as client,
        pytest.raises(errors.MalformedResponse),
    ):
        client.list_page()


def test_a_complete_answer_still_reads():
    with MemoryClient(
        "http://gam.test", "gam_x_y", http_client=httpx.Client(transport=answering("list", "no-such-field"))
    ) as client:
        assert [m.id for m in client.list_page().memories] == ["1"]
