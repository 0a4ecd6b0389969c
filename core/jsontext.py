"""JSON strings that are not text. JSON's `\\ud800` escapes can spell a lone UTF-16 surrogate,
which is no Unicode character: Python decodes it, but no database, log or response can encode
it. RFC 8259 §8.2 lets a parser refuse such strings; this project refuses them once, where JSON
is parsed (REST) or first judged (MCP), naming the field, as a VALIDATION_ERROR."""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
MESSAGE = "Must be valid Unicode text (no unpaired surrogate code points)."


def _name(value: str) -> str:
    # A key with a surrogate is named with the surrogate escaped, so the error itself can be sent.
    return value.encode("utf-8", "backslashreplace").decode("utf-8") if _SURROGATE.search(value) else value


def unpaired_surrogates(data: Any, path: str = "") -> dict[str, list[str]]:
    """Field path → message, for every string (key or value) that holds a lone surrogate:
    `details`, `details[2]`, `messages[0].content`; the body itself is `non_field_errors`."""
    found: dict[str, list[str]] = {}
    if isinstance(data, str):
        if _SURROGATE.search(data):
            found[path or "non_field_errors"] = [MESSAGE]
    elif isinstance(data, dict):
        for key, value in data.items():
            name = _name(str(key))
            child = f"{path}.{name}" if path else name
            if _SURROGATE.search(str(key)):
                found[child] = [MESSAGE]
            found.update(unpaired_surrogates(value, child))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found.update(unpaired_surrogates(value, f"{path}[{index}]" if path else f"[{index}]"))
    return found
