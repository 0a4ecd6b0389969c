"""Helpers of the MCP fence tests (no tests here): the shape of one fenced memory line, and a
memory object as the agent API returns it."""

from __future__ import annotations

import re

FENCE_LINE = re.compile(r'^<memory( [A-Za-z]+="[^"<>]*")+>[^<>\n]*</memory>$')


def memory(text: str, **extra) -> dict:
    return {
        "id": "7",
        "namespace": "prefs",
        "key": "k",
        "sourceState": None,
        "createdAt": "2026-01-01T00:00:00Z",
        "text": text,
        **extra,
    }
