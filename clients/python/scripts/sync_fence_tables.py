"""Regenerates governed_memory/fence_tables.json from the server's fence (memoryapp/mcp/fence.py).

The server decides what its fence escapes from Unicode's own data (UTS #39 confusables, the
Bidi_Mirrored property); the client, whose only dependency is httpx, reads the decisions from
this file instead: which code points are shown as numeric references, and how the letters that
can spell the tag word fold. Run it with the server's environment after the fence changes:

    .venv/bin/python clients/python/scripts/sync_fence_tables.py

The client suite compares both renderings over MCP, so a stale file fails it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()
# needs the repository on sys.path and Django set up
from memoryapp.mcp import fence as _fence_package  # noqa: E402, F401

fence = sys.modules["memoryapp.mcp.fence"]


def escaped_ranges() -> list[list[int]]:
    ranges: list[list[int]] = []
    for code in range(0x110000):
        if fence._needs_numeric_escape(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return ranges


def folds() -> dict[str, str]:
    target = set(fence._tag_folded())
    out: dict[str, str] = {}
    for code in range(0x110000):
        char = chr(code)
        folded = fence._fold(char)
        if folded != char and (folded == "" or char in target or target & set(folded)):
            out[str(code)] = folded
    return out


def main() -> None:
    tables = {"tagWord": fence.TAG_WORD, "tagFolded": fence._tag_folded(), "escaped": escaped_ranges(), "fold": folds()}
    path = ROOT / "clients" / "python" / "src" / "governed_memory" / "fence_tables.json"
    path.write_text(json.dumps(tables, ensure_ascii=True, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{path}: {len(tables['escaped'])} escaped ranges, {len(tables['fold'])} folds")


if __name__ == "__main__":
    main()
