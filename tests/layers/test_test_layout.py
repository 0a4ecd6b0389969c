"""No test module imports another test module or a conftest (issue 35 step 5).

Fixtures live in `tests/conftest.py` (many areas) or `tests/<area>/conftest.py` (one area), where
pytest finds them by name; helpers that tests share live in modules that hold no tests
(`tests/support.py`, `tests/<area>/support.py`, the masking corpora). Every Python file of the
server's suite, the client's suite and `bench/` is parsed, and every import - at the top or inside
a function - is resolved to a file of the repository: none may be a `test_*.py` or a `conftest.py`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT_TESTS = ROOT / "clients" / "python" / "tests"
TREES = (ROOT / "tests", CLIENT_TESTS, ROOT / "bench")


def _is_test_module(path: Path) -> bool:
    return path.name == "conftest.py" or (path.name.startswith("test_") and path.suffix == ".py")


def _file_of(dotted: str, search: tuple[Path, ...]) -> Path | None:
    """The repository file a dotted module name names, looked up from each directory in turn."""
    for base in search:
        stem = base.joinpath(*dotted.split("."))
        for candidate in (stem.with_name(stem.name + ".py"), stem / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _imported_files(path: Path, source: str) -> list[tuple[int, Path]]:
    """(line, file) for every import in `source` that names a file of the repository.

    Absolute names are looked up from the repository root (`tests.x.y`, `bench.z`) and from the
    client suite's own directory, which its conftest puts on sys.path (`from live_server import`);
    relative names from the importing file's package. `from a import b` names `a` and `a.b`."""
    search = (ROOT, CLIENT_TESTS) if path.is_relative_to(CLIENT_TESTS) else (ROOT,)
    found = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
            bases = search
        elif isinstance(node, ast.ImportFrom):
            package = node.module or ""
            names = [package] if package else []
            names += [f"{package}.{alias.name}" if package else alias.name for alias in node.names]
            bases = (path.parents[node.level - 1],) if node.level else search
        else:
            continue
        for name in names:
            target = _file_of(name, bases)
            if target is not None:
                found.append((node.lineno, target))
    return found


def _violations(path: Path, source: str) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {target.relative_to(ROOT)}"
        for line, target in _imported_files(path, source)
        if _is_test_module(target)
    ]


def _python_files() -> list[Path]:
    return sorted(file for tree in TREES for file in tree.rglob("*.py") if "__pycache__" not in file.parts)


def test_no_test_module_imports_a_test_module_or_a_conftest():
    files = _python_files()
    assert sum(_is_test_module(file) for file in files) > 100  # the walk found the suites
    violations = [found for file in files for found in _violations(file, file.read_text(encoding="utf-8"))]
    assert violations == [], (
        "move what these share into a conftest.py (fixtures) or a support module (helpers):\n" + "\n".join(violations)
    )


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("from tests.conftest import error_code", ROOT / "tests" / "api" / "x.py"),
        ("from tests.receipts.test_chain import forget_some", ROOT / "tests" / "api" / "x.py"),
        ("from tests.erasure import test_encryption as suite", ROOT / "tests" / "api" / "x.py"),
        ("import tests.conftest", ROOT / "bench" / "x.py"),
        ("def f():\n    from tests.recall.test_math import _CORPUS", ROOT / "tests" / "api" / "x.py"),
        ("from .test_chain import forget_some", ROOT / "tests" / "receipts" / "x.py"),
        ("from conftest import World", CLIENT_TESTS / "x.py"),
    ],
    ids=[
        "conftest",
        "test module",
        "test module by name",
        "import conftest",
        "inside a function",
        "relative",
        "client conftest",
    ],
)
def test_the_check_sees_every_way_of_importing_a_test_module(source, where):
    assert len(_violations(where, source)) == 1


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("from tests.processes import stop", ROOT / "tests" / "api" / "x.py"),
        ("from tests.masking import everyday_corpus", ROOT / "bench" / "x.py"),
        ("from live_server import LiveServer", CLIENT_TESTS / "x.py"),
        ("import pytest\nfrom memoryapp import gates", ROOT / "tests" / "api" / "x.py"),
    ],
    ids=["helper module", "corpus from bench", "client helper", "product"],
)
def test_the_check_lets_helper_modules_be_imported(source, where):
    assert _violations(where, source) == []
