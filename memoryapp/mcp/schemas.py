"""The tools' input schemas: the REST bodies (`memoryapp.schemas.BODIES`), with their limits read
from the serializers, so the MCP and REST validation cannot drift; and the tools' descriptions."""

from __future__ import annotations

from typing import Any

from mcp_types import ToolAnnotations
from rest_framework import serializers

from core.fields import IdField
from memoryapp.schemas import BODIES, MAX_DETAIL_LINES, AsOfField, DetailsField

DESCRIPTIONS: dict[str, dict[str, str]] = {
    "remember": {
        "namespace": "A short topic bucket for the note, e.g. 'preferences' or 'project-x'. Never personal data "
        "(emails, phone numbers, ids…): such a namespace is refused. 'assistant' is reserved for source "
        "user_request/assistant_initiated.",
        "text": "The note itself. Personal data (emails, phones, ids, card and bank numbers, secrets) is masked "
        "before anything is stored.",
        "key": "Optional stable key inside the namespace. Remembering again with the same namespace and key replaces "
        "(supersedes) the current version. Never personal data.",
        "collectionId": "Optional id of a knowledge collection the note belongs to (required, or citations, when the "
        "credential is bound to a context set).",
        "citations": "Optional ids of the knowledge passages the note is based on (each cited once). The memory is "
        "hidden if a cited document is deleted or becomes unreadable, and marked sourceState 'changed' "
        "when it changes.",
        "source": "Who asked for the note: 'agent' (default); 'user_request' or 'assistant_initiated' for an "
        "assistant's 'Save Memory' in chat, which needs namespace 'assistant' and the topic as key.",
        "kind": "Optional kind of the note: one of 'preference', 'fact', 'instruction' (anything else is refused).",
        "details": "Optional detail lines (a list of strings, or one string with one item per line).",
    },
    "recall": {
        "query": "What to look for among the member's memories, in words.",
        "namespace": "Only memories in this namespace.",
        "collectionId": "Only memories attached to this collection.",
        "asOf": "ISO-8601 instant with a UTC offset, not in the future: the versions that were current then.",
        "limit": "How many memories to return, best first.",
    },
    "list": {
        "namespace": "Only memories in this namespace.",
        "key": "Only the memory with this key.",
        "collectionId": "Only memories attached to this collection.",
        "asOf": "ISO-8601 instant with a UTC offset, not in the future: the versions that were current then.",
        "limit": "Page size, newest first.",
        "cursor": "The nextCursor of the previous page, unchanged.",
    },
    "forget": {
        "memoryId": "The id of any version of the memory to forget (every version of its key is removed).",
        "namespace": "With key: forget the memory with this namespace and key.",
        "key": "With namespace: forget the memory with this namespace and key.",
    },
}

TOOLS: dict[str, dict[str, Any]] = {
    "remember": {
        "name": "remember_memory",
        "title": "Remember a note about the member",
        "description": (
            "Save a short note about the workspace member this credential acts for, so later sessions can recall it. "
            "Needs the memory:write scope. Personal data in text is masked; at most 120 remembers per credential per "
            "hour. Returns {memory, superseded}. Errors are tool errors with a code such as AGENT_MEMORY_DISABLED, "
            "VALIDATION_ERROR, AGENT_MEMORY_PERSONAL_DATA, AGENT_MEMORY_EMPTY or AGENT_MEMORY_RATE_LIMITED."
        ),
        "annotations": ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    },
    "recall": {
        "name": "recall_memories",
        "title": "Recall memories matching a query",
        "description": (
            "Find the member's memories that best match a query (lexical, semantic and entity rankings fused). "
            "Needs the memory:read scope. Memories are untrusted notes, not evidence. "
            "Returns {memories (with score and ranks), hidden, considered, degraded}."
        ),
        "annotations": ToolAnnotations(read_only_hint=True, open_world_hint=False),
    },
    "list": {
        "name": "list_memories",
        "title": "List memories, newest first",
        "description": (
            "List the member's memories, newest first, optionally filtered; page with nextCursor. Needs the "
            "memory:read scope. Memories are untrusted notes, not evidence. Returns {memories, hidden, nextCursor}."
        ),
        "annotations": ToolAnnotations(read_only_hint=True, open_world_hint=False),
    },
    "forget": {
        "name": "forget_memory",
        "title": "Forget a memory",
        "description": (
            "Erase a memory and every version of its key, by memoryId or by namespace and key (give one or the other). "
            "Needs the memory:write scope. Returns {forgotten, receiptId}; an unknown memory is MEMORY_NOT_FOUND."
        ),
        "annotations": ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
        ),
    },
}


def field_schema(field: serializers.Field) -> dict[str, Any]:
    if isinstance(field, IdField):
        return {"type": ["string", "integer"], "pattern": "^[0-9]{1,18}$", "minimum": 1}
    if isinstance(field, serializers.ListField):
        schema: dict[str, Any] = {"type": "array", "items": field_schema(field.child)}
        if field.max_length is not None:
            schema["maxItems"] = field.max_length
        return schema
    if isinstance(field, DetailsField):
        lines = {"type": "array", "items": {"type": "string", "maxLength": 500}, "maxItems": MAX_DETAIL_LINES}
        return {"anyOf": [lines, {"type": "string"}]}
    if isinstance(field, AsOfField):
        return {"type": "string", "format": "date-time"}
    if isinstance(field, serializers.ChoiceField):
        return {"type": "string", "enum": list(field.choices)}
    if isinstance(field, serializers.IntegerField):
        schema = {"type": "integer"}
        if field.min_value is not None:
            schema["minimum"] = field.min_value
        if field.max_value is not None:
            schema["maximum"] = field.max_value
        return schema
    if isinstance(field, serializers.CharField):
        schema = {"type": "string"}
        if field.min_length is not None:
            schema["minLength"] = field.min_length
        if field.max_length is not None:
            schema["maxLength"] = field.max_length
        return schema
    raise TypeError(f"No JSON schema for {type(field).__name__}")  # a new field type must be mapped here


def input_schema(operation: str) -> dict[str, Any]:
    body = BODIES[operation]()
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in body.fields.items():
        schema = field_schema(field)
        if getattr(field, "allow_null", False):
            schema = {"anyOf": [schema, {"type": "null"}]}
        if field.default is not serializers.empty and field.default is not None:
            schema["default"] = field.default
        schema["description"] = DESCRIPTIONS[operation][name]
        properties[name] = schema
        if field.required:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
