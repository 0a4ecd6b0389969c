"""The typed results are the response components of the live server's /api/schema/, field for
field (names, which may be null), and real answers validate against those components."""

from __future__ import annotations

import dataclasses
import re
import typing

import httpx
import jsonschema
import pytest

from governed_memory import (
    Citation,
    ForgetResult,
    ListPage,
    Memory,
    MemoryClient,
    Ranks,
    RecalledMemory,
    RecallResult,
    RememberResult,
    TurnResult,
)
from governed_memory.tools import json_schema
from live_server import LiveServer, World

PAIRS = [
    (Memory, "MemoryObject"),
    (RecalledMemory, "RecalledMemoryObject"),
    (Citation, "CitationObject"),
    (Ranks, "RankObject"),
    (RememberResult, "RememberResponse"),
    (RecallResult, "RecallResponse"),
    (ListPage, "ListResponse"),
    (ForgetResult, "ForgetResponse"),
    (TurnResult, "ConsolidationObject"),  # TurnResult is {"consolidation": …} flattened
]


@pytest.fixture(scope="module")
def components(live: LiveServer) -> dict[str, typing.Any]:
    return (
        httpx.get(f"{live.url()}/api/schema/", params={"format": "json"}, timeout=30)
        .raise_for_status()
        .json()["components"]["schemas"]
    )


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def nullable(schema: dict[str, typing.Any]) -> bool:
    return bool(schema.get("nullable")) or any(
        branch.get("enum") == [None] or branch.get("$ref", "").endswith("/NullEnum")
        for branch in schema.get("oneOf", [])
    )


@pytest.mark.parametrize(("cls", "component"), PAIRS, ids=[c for _, c in PAIRS])
def test_each_result_type_is_its_schema_component(components, cls, component: str):
    schema = components[component]
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)} - {"raw"}
    assert fields == {snake(name) for name in schema["properties"]}
    for name, prop in schema["properties"].items():
        optional = type(None) in typing.get_args(hints[snake(name)])
        # a component field that may be null is Optional here; one that may not, is not (fixed markers aside)
        assert optional == nullable(prop) or name not in schema.get("required", []), name


def test_real_answers_validate_against_the_components(live: LiveServer, world: World, components, namespace: str):
    validator = {
        name: jsonschema.Draft202012Validator(json_schema(components[name], components))
        for name in ("RememberResponse", "RecallResponse", "ListResponse", "ForgetResponse", "ErrorResponse")
    }
    with MemoryClient(live.url(), world.member("editor").credential()) as memory:
        answers = {
            "RememberResponse": memory.call(
                "remember",
                {
                    "namespace": namespace,
                    "key": "k",
                    "text": "Mail ada@example.com about invoices",
                    "kind": "fact",
                    "details": ["one"],
                },
            ),
            "RecallResponse": memory.call("recall", {"query": "invoices", "namespace": namespace}),
            "ListResponse": memory.call("list", {"namespace": namespace, "limit": 1}),
            "ForgetResponse": memory.call("forget", {"namespace": namespace, "key": "k"}),
        }
        refused = httpx.post(
            f"{live.url()}/api/agent/v1/memories/recall", json={"query": ""}, headers={"Authorization": "Bearer gam_x"}
        ).json()
    for name, answer in answers.items():
        validator[name].validate(answer)
    validator["ErrorResponse"].validate(refused)
    assert (
        answers["RecallResponse"]["memories"][0]["trust"] == "untrusted"
        and answers["RecallResponse"]["memories"][0]["evidence"] is False
    )
