"""A module docstring states the module's contract in a few lines; detail a reader needs lives in docs/.

Every tracked module of the product, the benchmarks, the scripts, the Python client and the tests
(migrations excepted) has a module docstring of at most LIMIT lines, or none; this test names every
one that is longer."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
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


# --- no measurement or history in the product's comments and docstrings ---------------------------
# Figures live in docs/benchmarks.md with their date and load, decisions in docs/decisions.md, history
# in commits; a comment keeps the rule and, if useful, a pointer (docs/benchmarks.md "Section").
PRODUCT = ("memoryapp", "governance", "retention", "credits", "core", "config", "clients/python/src")
MEASUREMENT = re.compile(
    r"\d+(\.\d+)?\s?(ms|µs|req/s)\b"  # a latency or a throughput
    r"|\bR@\d|\brecall@\d|\bMRR@\d|\bhit@\d"  # a recall figure
    r"|\bp(50|95|99)\b"  # a percentile
    r"|\d\s?[×x]\s(faster|slower)\b|\b\d+\.\d+\s?[×x]"  # a speed ratio (not "4 x a cap", "20 × 500")
    r"|\b(issue|stop)\s+\d+"  # history: the issue or the session that changed it
    r"|\bLoCoMo tuning conversations \(\d"  # a tuning result
    r"|\(measured\)|\bmeasured (on|under|with|in)\b",
    re.IGNORECASE,
)
# (path, text the line holds): limits that are part of the contract, not measurements
ALLOWED = (
    ("memoryapp/metrics.py", "800 ms budget"),  # SPEC §4.4's query-embedding budget
    ("retention/forgetting.py", "800 ms query-embedding budget"),  # the same budget
)


def commented_lines(source: str) -> list[tuple[int, str]]:
    """(line number, text) of every comment and every docstring line (module, class, function)."""
    lines = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    text = source.split("\n")
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) or not node.body:
            continue
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            lines += [(n, text[n - 1]) for n in range(first.lineno, first.end_lineno + 1)]
    return sorted(lines)


def test_the_measurement_pattern_finds_figures_and_history():
    found = [
        "# p50 20.8 / p95 26.3 ms",
        "# 0.1-0.2 ms instead of 0.7-4 ms",
        "# fusion R@5 0.706",
        "# recall@5 .849",
        "# (issue 32, row 3)",
        "# stop 12's CI",
        "# 5-20x slower (measured)",
        "# 2.7x a median one",
        "# LoCoMo tuning conversations (26, 30)",
        "# 62.6 req/s",
    ]
    kept = [
        "# SPEC §4.4: the newest 300",
        "# 4 x a capped query's worst cost",
        "# the next 1, 2 or 5 × a power of ten",
        "# at most 5,000 memories",
        "# timeout 20 s",
        "# row 6",
        "# 64 KiB",
    ]
    assert [line for line in found if not MEASUREMENT.search(line)] == []
    assert [line for line in kept if MEASUREMENT.search(line)] == []


def test_no_measurement_or_history_in_product_comments():
    listed = subprocess.run(
        ["git", "ls-files", "--", *(f"{tree}/*.py" for tree in PRODUCT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    modules = [ROOT / name for name in listed if "/migrations/" not in name]
    assert len(modules) > 100  # the listing found the tree
    found = []
    for path in modules:
        name = str(path.relative_to(ROOT))
        for number, line in commented_lines(path.read_text(encoding="utf-8")):
            if MEASUREMENT.search(line) and not any(name == where and what in line for where, what in ALLOWED):
                found.append(f"{name}:{number}: {line.strip()}")
    assert found == [], (
        "measurement figures or history in product comments: move figures to docs/benchmarks.md (with date and load) "
        'and decisions to docs/decisions.md, keep the rule and a pointer (docs/benchmarks.md "Section"):\n'
        + "\n".join(found)
    )
