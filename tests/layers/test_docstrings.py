"""A module docstring states the module's contract in a few lines; detail a reader needs lives in docs/.

Every tracked module of the product, the benchmarks, the scripts, the Python client and the tests
(migrations excepted) has a module docstring of at most LIMIT lines, or none; this test names every
one that is longer."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREES = (
    "memoryapp",
    "governance",
    "retention",
    "credits",
    "core",
    "config",
    "bench",
    "scripts",
    "clients/python/src",
    "tests",
)
LIMIT = 25


def _modules() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--", *(f"{tree}/*.py" for tree in TREES)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed if "/migrations/" not in name]


def docstring_lines(source: str) -> int:
    """Lines the module docstring spans in the source, quotes included; 0 when there is none."""
    body = ast.parse(source).body
    if not body or not isinstance(body[0], ast.Expr) or not isinstance(body[0].value, ast.Constant):
        return 0
    if not isinstance(body[0].value.value, str):
        return 0
    return body[0].end_lineno - body[0].lineno + 1


def test_docstring_lines_counts_the_span():
    assert docstring_lines('"""One line."""\nX = 1\n') == 1
    assert docstring_lines('"""First.\n\nMore.\n"""\n') == 4
    assert docstring_lines("X = 1\n") == 0
    assert docstring_lines("") == 0


def test_every_module_docstring_is_at_most_limit_lines():
    modules = _modules()
    assert len(modules) > 300  # the listing found the tree
    too_long = []
    for path in modules:
        lines = docstring_lines(path.read_text(encoding="utf-8"))
        if lines > LIMIT:
            too_long.append(f"{path.relative_to(ROOT)} ({lines} lines)")
    assert too_long == [], (
        f"module docstrings over {LIMIT} lines: state the contract in a few lines and move the detail "
        f'(tables, procedures, measurements) to the matching page of docs/, linked as docs/x.md "Section": '
        + ", ".join(too_long)
    )
