"""The layers run one way and stay that way (issue 16): no import cycle among the project's
modules, even counting imports inside functions; few function-level imports, each explained;
the import-linter contracts hold; work queued by name resolves to a registered task."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
# The project's own packages and its contracts, as import-linter reads them: a package or a contract
# added there is covered here without editing this file (scripts/refactor/move_packages.py adds some).
LINTER = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
PACKAGES = tuple(LINTER["root_packages"])
MAX_FUNCTION_LEVEL_IMPORTS = 12


def project_graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def cycles(graph: grimp.ImportGraph, packages: tuple[str, ...] = PACKAGES) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), i.e. import cycles."""
    modules = sorted(m for m in graph.modules if m.split(".")[0] in packages)
    edges = {
        m: sorted(d for d in graph.find_modules_directly_imported_by(m) if d.split(".")[0] in packages) for m in modules
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    return found


def test_grimp_counts_imports_inside_functions(tmp_path, monkeypatch):
    package = tmp_path / "layerprobe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text(
        textwrap.dedent("""
        def helper():
            from layerprobe import high  # hidden inside a function
            return high
    """)
    )
    (package / "high.py").write_text("from layerprobe import low\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("layerprobe", cache_dir=None)
    assert graph.direct_import_exists(importer="layerprobe.low", imported="layerprobe.high")
    assert cycles(graph, ("layerprobe",)) == [["layerprobe.high", "layerprobe.low"]]


def test_no_import_cycle_among_project_modules_counting_imports_inside_functions():
    graph = project_graph()
    # The project's own function-level import (retention.matrix, see below) is in the graph.
    assert graph.direct_import_exists(importer="retention.matrix", imported="memoryapp.ratelimit")
    assert cycles(graph) == [], "import cycle(s) among project modules; queue work by name or send a signal instead"


def function_level_imports() -> list[tuple[str, int, str, bool]]:
    """(file, line, imported module, explained) for every import of a project module inside a function."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            source = path.read_text()
            lines = source.splitlines()
            for function in ast.walk(ast.parse(source)):
                if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(function):
                    names = (
                        [node.module]
                        if isinstance(node, ast.ImportFrom) and node.module
                        else [a.name for a in node.names]
                        if isinstance(node, ast.Import)
                        else []
                    )
                    for name in names:
                        if name.split(".")[0] in PACKAGES:
                            previous = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
                            explained = previous.startswith("#") or "#" in lines[node.lineno - 1]
                            found.append((str(path.relative_to(ROOT)), node.lineno, name, explained))
    return sorted(set(found))


def test_function_level_imports_are_few_and_each_says_why():
    found = function_level_imports()
    assert len(found) <= MAX_FUNCTION_LEVEL_IMPORTS, found
    assert [f for f in found if not f[3]] == [], "a function-level import needs a comment saying why"


def test_import_linter_contracts_hold():
    # In a subprocess: import-linter's CLI reconfigures logging (dictConfig disables every
    # existing logger), which would silence the loggers other tests read.
    linter = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(linter), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(LINTER['contracts'])} kept, 0 broken." in result.stdout


@pytest.mark.parametrize("name", ["memoryapp.consolidation.CONSOLIDATE_TASK", "retention.cascades.ERASE_TASK"])
def test_every_task_queued_by_name_is_registered(name):
    from celery import current_app

    module_name, attribute = name.rsplit(".", 1)
    task_name = getattr(importlib.import_module(module_name), attribute)
    assert task_name in current_app.tasks
