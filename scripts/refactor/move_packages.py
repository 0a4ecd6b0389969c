#!/usr/bin/env python3
"""Move the project wiring into `config/` and the app-free helpers into `core/`, rewriting every reference.

    python scripts/refactor/move_packages.py            move and rewrite (run from anywhere in the repo)
    python scripts/refactor/move_packages.py --check    change nothing; exit 1 if a run would change something
    python scripts/refactor/move_packages.py --no-ruff  skip the closing `ruff check --select I --fix` + `ruff format`

It `git mv`s (history kept) `memoryapp/{settings,urls,asgi,wsgi,celery}.py` into `config/` and the leaf
helpers that import no app (`errors`, `timestamps`, `params`, `cursors`, `jsontext`, `env`, `logs`,
`progress`, `task_queue`, `retention/chunks.py`) into `core/`; `memoryapp.apps`, `metrics`, `observers`
and the governance-only helpers stay. Then it rewrites by module-path rules every file `git ls-files`
lists with a suffix in SUFFIXES, so files it has never seen are rewritten too: Python imports by the
AST (split, made absolute where they reach a moved module), every other mention by text (dotted
names, paths, `celery -A`), the Celery app import into `config/__init__.py`, and pyproject.toml's
package lists and import-linter contracts (`core` the bottom layer, importing no app).

Idempotent: a moved tree has no old names left, so a second run changes nothing (`--check` proves it).
Stdlib only; ruff, when found, re-sorts the imports it touched. Lists of app labels (`STAFF_APPS`) are
left alone and printed for a reviewer: `config` and `core` are not apps.

Over ~400 lines on purpose: a one-off refactoring tool kept whole so that it can be re-run
(--check) and read as one procedure.
"""

# move_packages: names the old modules on purpose
from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

WIRING = "config"
CORE = "core"
OLD_WIRING_APP = "memoryapp"  # the package that was both the Django project and an app

MODULE_MOVES: dict[str, str] = {
    "memoryapp.settings": "config.settings",
    "memoryapp.urls": "config.urls",
    "memoryapp.asgi": "config.asgi",
    "memoryapp.wsgi": "config.wsgi",
    "memoryapp.celery": "config.celery",
    "memoryapp.errors": "core.errors",
    "memoryapp.timestamps": "core.timestamps",
    "memoryapp.params": "core.params",
    "memoryapp.cursors": "core.cursors",
    "memoryapp.jsontext": "core.jsontext",
    "memoryapp.env": "core.env",
    "memoryapp.logs": "core.logs",
    "memoryapp.progress": "core.progress",
    "memoryapp.task_queue": "core.task_queue",
    "retention.chunks": "core.chunks",
}

PACKAGE_DOCS = {
    WIRING: '"""The Django project\'s wiring: settings, the URLconf, the ASGI/WSGI entry points and the Celery\napp. '
    'It imports the apps; no app imports it (import-linter\'s layers contract)."""\n',
    CORE: '"""The leaf helpers every app uses: errors, instants, ids and limits, signed cursors, JSON '
    "text,\nenvironment settings, log lines, progress bars, queueing by name, the chunked loop. Core "
    'imports\nno app (import-linter\'s "core-imports-no-app" contract), so any app may import it."""\n',
}

SUFFIXES = (".py", ".toml", ".sh", ".md", ".cfg", ".ini", ".txt", ".html", ".yml", ".yaml", ".po", ".json")
NEW_ROOTS = (WIRING, CORE)
# A file holding this line names the old modules on purpose (this script, its tests): left alone.
KEEP_MARKER = "move_packages: " + "names the old modules on purpose"
CORE_CONTRACT_ID = "core-imports-no-app"


def _module_path(module: str) -> str:
    return module.replace(".", "/") + ".py"


# --- text rules -----------------------------------------------------------------------------------
_OLD_NAMES = sorted(MODULE_MOVES, key=len, reverse=True)
# A dotted name not preceded by a word character or a dot and not followed by one: `xmemoryapp.env`
# and `memoryapp.envelope` are other names; `memoryapp.logs.JsonFormatter` and `memoryapp.asgi:app` match.
DOTTED = re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in _OLD_NAMES) + r")(?!\w)")
PATHS = re.compile(r"(?<![\w./-])(" + "|".join(re.escape(_module_path(n)) for n in _OLD_NAMES) + r")(?!\w)")
CELERY_APP = re.compile(r"""(-A|--app)(\s+|=|["']\s*,\s*["'])""" + re.escape(OLD_WIRING_APP) + r"""(?![\w.])""")


def rewrite_text(text: str) -> str:
    text = DOTTED.sub(lambda m: MODULE_MOVES[m.group(1)], text)
    text = PATHS.sub(lambda m: _module_path(MODULE_MOVES[m.group(1)[:-3].replace("/", ".")]), text)
    return CELERY_APP.sub(lambda m: m.group(1) + m.group(2) + WIRING, text)


# --- Python rules (AST) ---------------------------------------------------------------------------
def module_of(path: str) -> tuple[str, bool]:
    """(dotted module, is a package __init__) of a repository-relative .py path."""
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _moved(name: str) -> str | None:
    """The new name of `name` if it is a moved module or inside one."""
    for old in _OLD_NAMES:
        if name == old or name.startswith(old + "."):
            return MODULE_MOVES[old] + name[len(old) :]
    return None


def _alias(alias: ast.alias) -> str:
    return alias.name + (f" as {alias.asname}" if alias.asname else "")


def _statement(module: str, aliases: list[ast.alias], indent: str) -> str:
    return f"{indent}from {module} import {', '.join(_alias(a) for a in aliases)}"


@dataclass
class Edit:
    first: int  # 0-based line index
    last: int
    lines: list[str]


@dataclass
class PythonRewrite:
    edits: list[Edit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def plan_python(source: str, path: str) -> PythonRewrite:
    """The statement-level edits of one Python file (before the text rules run)."""
    plan = PythonRewrite()
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        plan.notes.append(f"{path}: not parsed ({exc.msg}); text rules only")
        return plan
    lines = source.splitlines()
    module, is_package = module_of(path)
    in_moved_file = module in MODULE_MOVES
    used_attributes = set(re.findall(r"(?<![\w.])((?:memoryapp|retention|governance)\.\w+)", source))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            edit = _plan_import_from(node, lines, module, is_package, in_moved_file, plan)
        elif isinstance(node, ast.Import):
            edit = _plan_bare_import(node, lines, used_attributes)
        else:
            continue
        if edit is not None:
            plan.edits.append(edit)
    return plan


def _whole_lines(node: ast.stmt, lines: list[str]) -> tuple[str, str] | None:
    """(indent, trailing comment) when the statement has its lines to itself, else None."""
    first, last = lines[node.lineno - 1], lines[node.end_lineno - 1]
    before, after = first[: node.col_offset], last[node.end_col_offset :]
    if before.strip() or (after.strip() and not after.strip().startswith("#")):
        return None
    return before, after.rstrip()


def _plan_import_from(
    node: ast.ImportFrom, lines: list[str], module: str, is_package: bool, in_moved_file: bool, plan: PythonRewrite
) -> Edit | None:
    target = resolve(node, module, is_package)
    moved_whole = _moved(target)
    split = {a.name: MODULE_MOVES[f"{target}.{a.name}"] for a in node.names if f"{target}.{a.name}" in MODULE_MOVES}
    relative_to_fix = node.level > 0 and (moved_whole is not None or in_moved_file or split)
    if not split and not relative_to_fix:
        return None  # absolute `from memoryapp.errors import X` is left to the text rule
    place = _whole_lines(node, lines)
    if place is None:
        plan.notes.append(f"line {node.lineno}: import shares its line with other code; not rewritten")
        return None
    indent, comment = place
    statements: list[str] = []
    kept = [a for a in node.names if a.name not in split]
    if kept:
        # A relative import whose package moves (or any inside a moved file) is spelt absolute:
        # its dots would otherwise point into the new package.
        original = "." * node.level + (node.module or "")
        statements.append(
            _statement(moved_whole or (target if in_moved_file and node.level else original), kept, indent)
        )
    by_parent: dict[str, list[ast.alias]] = {}
    for alias in node.names:
        if alias.name in split:
            parent, _, leaf = split[alias.name].rpartition(".")
            by_parent.setdefault(parent, []).append(
                ast.alias(
                    name=leaf,
                    asname=alias.asname
                    if alias.asname and alias.asname != leaf
                    else (alias.name if leaf != alias.name else None),
                )
            )
    for parent, aliases in by_parent.items():
        statements.append(_statement(parent, aliases, indent))
    if comment:
        statements[0] += comment
    return Edit(node.lineno - 1, node.end_lineno - 1, statements)


def _plan_bare_import(node: ast.Import, lines: list[str], used_attributes: set[str]) -> Edit | None:
    """`import memoryapp` whose code says `memoryapp.errors.X`: the text rule makes that
    `core.errors.X`, which needs `import core.errors` to resolve."""
    extra = []
    for alias in node.names:
        if alias.asname is None and "." not in alias.name:
            extra += sorted(
                {MODULE_MOVES[a] for a in used_attributes if a in MODULE_MOVES and a.startswith(alias.name + ".")}
            )
    if not extra:
        return None
    place = _whole_lines(node, lines)
    if place is None:
        return None
    indent, _ = place
    original = lines[node.lineno - 1 : node.end_lineno]
    return Edit(node.lineno - 1, node.end_lineno - 1, [*original, *(f"{indent}import {name}" for name in extra)])


def rewrite_python(source: str, path: str) -> tuple[str, list[str]]:
    plan = plan_python(source, path)
    lines = source.splitlines()
    for edit in sorted(plan.edits, key=lambda e: e.first, reverse=True):
        lines[edit.first : edit.last + 1] = edit.lines
    text = "\n".join(lines) + ("\n" if source.endswith("\n") else "")
    return rewrite_text(text), plan.notes


# --- the old wiring package's __init__ ------------------------------------------------------------
def split_wiring_init(old_init: str, new_init: str | None) -> tuple[str, str]:
    """Move the statements of `memoryapp/__init__.py` that import the wiring package (after the text
    rules: `from config.celery import app as celery_app`) and their `__all__` names into
    `config/__init__.py`. Answers (old package's __init__, wiring's __init__)."""
    tree = ast.parse(old_init)
    lines = old_init.splitlines()
    moved_statements: list[str] = []
    moved_names: list[str] = []
    drop: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == WIRING and not node.level:
            moved_statements.append("\n".join(lines[node.lineno - 1 : node.end_lineno]).replace("  # noqa: E402", ""))
            moved_names += [a.asname or a.name for a in node.names]
            drop.update(range(node.lineno - 1, node.end_lineno))
    if not moved_statements:
        return old_init, new_init if new_init is not None else PACKAGE_DOCS[WIRING]
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = [e.value for e in node.value.elts] if isinstance(node.value, ast.List | ast.Tuple) else []
            rest = [n for n in names if n not in moved_names]
            drop.update(range(node.lineno - 1, node.end_lineno))
            if rest:
                lines[node.lineno - 1] = "__all__ = [" + ", ".join(repr(n).replace("'", '"') for n in rest) + "]"
                drop.discard(node.lineno - 1)
    kept = "\n".join(line for i, line in enumerate(lines) if i not in drop).rstrip() + "\n"
    wiring = (new_init if new_init is not None else PACKAGE_DOCS[WIRING]).rstrip() + "\n\n"
    wiring += (
        "# Celery's documented place for the app: loaded with the settings, so @shared_task binds to it\n"
        "# and `celery -A config` finds it.\n"
    )
    wiring += "\n".join(moved_statements) + "\n\n" + "__all__ = [" + ", ".join(f'"{n}"' for n in moved_names) + "]\n"
    return kept, wiring


# --- pyproject ------------------------------------------------------------------------------------
LIST = re.compile(r"\[([^\[\]]*)\]")


def _ensure_in_list(line: str, names: list[str], *, suffix: str = "", before: str | None = None) -> str:
    match = LIST.search(line)
    if match is None:
        return line
    items = [i.strip() for i in match.group(1).split(",") if i.strip()]
    values = [i.strip("\"'") for i in items]
    for name in names:
        if name + suffix in values:
            continue
        at = values.index(before) if before in values else len(values)
        values.insert(at, name + suffix)
        items.insert(at, f'"{name}{suffix}"')
    return line[: match.start(1)] + ", ".join(items) + line[match.end(1) :]


def rewrite_pyproject(text: str) -> str:
    lines = text.splitlines()
    section = ""
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped
        if section == "[tool.setuptools]" and stripped.startswith("packages") and "include" in stripped:
            lines[i] = _ensure_in_list(line, list(NEW_ROOTS), suffix="*")
        elif section == "[tool.importlinter]" and stripped.startswith("root_packages"):
            lines[i] = _ensure_in_list(line, list(NEW_ROOTS))
        elif section == "[tool.mutmut]" and stripped.startswith("source_paths"):
            lines[i] = _ensure_in_list(line, list(NEW_ROOTS))
        elif section == "[tool.ruff.lint.isort]" and stripped.startswith("known-first-party"):
            lines[i] = _ensure_in_list(line, list(NEW_ROOTS), before="tests")
    text = "\n".join(lines) + "\n"
    text = _rewrite_layers(text)
    return _ensure_core_contract(text)


def _rewrite_layers(text: str) -> str:
    start = text.find("\nlayers = [")
    if start < 0:
        return text
    end = text.find("\n]", start)
    block = text[start:end].split("\n")
    items = [(i, line) for i, line in enumerate(block) if line.strip().startswith('"')]
    if not items:
        return text
    for i, line in items:
        indent = line[: len(line) - len(line.lstrip())]
        body, _, tail = line.strip()[1:].partition('"')
        names = [s.strip() for s in body.split(":") if s.strip()]
        if names == [CORE]:
            continue  # the bottom layer this script added on an earlier run
        out: list[str] = []
        for name in names:
            root = name.split(".")[0]
            if root == CORE:
                continue  # core is one layer of its own, the bottom one
            if root == WIRING:
                name = WIRING  # the wiring package is one unit: its modules import each other
            if name not in out:
                out.append(name)
        block[i] = f'{indent}"{" : ".join(out)}"{tail}' if out else None
    last_indent = items[-1][1][: len(items[-1][1]) - len(items[-1][1].lstrip())]
    if not any(line is not None and line.strip() == f'"{CORE}",' for line in block):
        block += [
            f"{last_indent}# the leaf helpers every app uses; core imports no app (contract {CORE_CONTRACT_ID})",
            f'{last_indent}"{CORE}",',
        ]
    block = [line for line in block if line is not None]
    return text[:start] + "\n".join(block) + text[end:]


def _root_packages(text: str) -> list[str]:
    match = re.search(r"^root_packages\s*=\s*\[([^\]]*)\]", text, re.M)
    return [i.strip().strip("\"'") for i in match.group(1).split(",") if i.strip()] if match else []


def _block_end(text: str, start: int) -> int:
    """Where the TOML table that starts at `start` ends: the next table header or section comment."""
    match = re.compile(r"^(\[|# ---)", re.M).search(text, text.index("\n", start) + 1)
    return match.start() if match else len(text)


def _ensure_core_contract(text: str) -> str:
    others = [p for p in _root_packages(text) if p != CORE]
    marker = f'id = "{CORE_CONTRACT_ID}"'
    if marker in text:
        start = text.index(marker)
        end = _block_end(text, start)
        fixed = re.sub(
            r"^forbidden_modules\s*=.*$", lambda m: _ensure_in_list(m.group(0), others), text[start:end], flags=re.M
        )
        return text[:start] + fixed + text[end:]
    contract = (
        "[[tool.importlinter.contracts]]\n"
        f"{marker}\n"
        'name = "Core imports no app: the leaf helpers every app uses stand on Django and the libraries alone"\n'
        'type = "forbidden"\n'
        f'source_modules = ["{CORE}"]\n'
        f"forbidden_modules = [{', '.join(f'{chr(34)}{p}{chr(34)}' for p in others)}]\n\n"
    )
    headers = [m.start() for m in re.finditer(r"^\[\[tool\.importlinter\.contracts\]\]", text, re.M)]
    if not headers:
        return text.rstrip() + "\n\n" + contract
    at = _block_end(text, headers[-1])
    return text[:at] + contract + text[at:]


# --- driver ---------------------------------------------------------------------------------------
def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


APP_LIST = re.compile(
    r"""\(\s*["'](?:governance|memoryapp|retention)["'](?:\s*,\s*["'][\w]+["'])+\s*,?\s*\)"""
    r"""|\[\s*["'](?:governance|memoryapp|retention)["'](?:\s*,\s*["'][\w]+["'])+\s*,?\s*\]"""
)


def run(root: Path, *, check: bool, ruff: bool) -> int:
    changed: list[str] = []
    notes: list[str] = []
    moves = [(_module_path(old), _module_path(new)) for old, new in MODULE_MOVES.items()]
    for old, new in moves:
        if (root / old).exists() and (root / new).exists():
            print(f"both {old} and {new} exist: resolve by hand before moving", file=sys.stderr)
            return 2
    files = [f for f in git(root, "ls-files", "-z").split("\0") if f.endswith(SUFFIXES) and (root / f).is_file()]
    for path in files:
        source = (root / path).read_text(encoding="utf-8", errors="surrogateescape")
        if KEEP_MARKER in source:
            continue
        if path.endswith(".py"):
            text, file_notes = rewrite_python(source, path)
            notes += [f"{path}: {n}" if not n.startswith(path) else n for n in file_notes]
        else:
            text = rewrite_text(source)
        if path == "pyproject.toml":
            text = rewrite_pyproject(text)
        for listed in APP_LIST.findall(text):
            names = set(re.findall(r"[\w]+", listed))
            if len(names & {"governance", "memoryapp", "retention"}) >= 2 and not names & set(NEW_ROOTS):
                notes.append(
                    f"{path}: left alone (app labels, or add config/core by hand?): {' '.join(listed.split())}"
                )
        if text != source:
            changed.append(path)
            if not check:
                (root / path).write_text(text, encoding="utf-8", errors="surrogateescape")
    todo_moves = [(old, new) for old, new in moves if (root / old).exists()]
    wiring_init, old_init = root / WIRING / "__init__.py", root / OLD_WIRING_APP / "__init__.py"
    new_inits = [package for package in NEW_ROOTS if not (root / package / "__init__.py").exists()]
    init_text = old_init.read_text() if old_init.exists() else ""
    if check:
        init_text = rewrite_text(init_text)
    kept, wiring = split_wiring_init(init_text, wiring_init.read_text() if wiring_init.exists() else None)
    init_changes = kept != init_text or (wiring_init.exists() and wiring != wiring_init.read_text())
    if check:
        pending = (
            sorted(set(changed))
            + [f"git mv {o} {n}" for o, n in todo_moves]
            + [f"create {p}/__init__.py" for p in new_inits]
        )
        pending += [f"{OLD_WIRING_APP}/__init__.py → {WIRING}/__init__.py"] if init_changes else []
        for item in pending:
            print(f"would change: {item}")
        print(f"{len(pending)} change(s) pending" if pending else "nothing to do: the tree is moved")
        return 1 if pending else 0
    for package in new_inits:
        (root / package).mkdir(exist_ok=True)
        (root / package / "__init__.py").write_text(PACKAGE_DOCS[package])
        git(root, "add", f"{package}/__init__.py")
    for old, new in todo_moves:
        git(root, "mv", old, new)
    if old_init.exists() and (kept != init_text or wiring != wiring_init.read_text()):
        old_init.write_text(kept)
        wiring_init.write_text(wiring)
        changed += [f"{OLD_WIRING_APP}/__init__.py", f"{WIRING}/__init__.py"]
    git(root, "add", "-u")
    new_path = dict(moves)
    touched = sorted({new_path.get(p, p) for p in changed if p.endswith(".py")} | {n for _, n in todo_moves})
    if ruff and touched:
        ruff_bin = root / ".venv" / "bin" / "ruff"
        ruff_cmd = str(ruff_bin) if ruff_bin.exists() else shutil.which("ruff")
        if ruff_cmd:
            existing = [p for p in touched if (root / p).exists()]
            subprocess.run([ruff_cmd, "check", "--select", "I", "--fix", "--quiet", *existing], cwd=root)
            subprocess.run([ruff_cmd, "format", "--quiet", *existing], cwd=root)
            git(root, "add", "-u")
        else:
            notes.append("ruff not found: run `ruff check --select I --fix . && ruff format .`")
    for note in notes:
        print(f"note: {note}")
    print(f"moved {len(todo_moves)} module(s), rewrote {len(set(changed))} file(s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a run would change something")
    parser.add_argument("--no-ruff", action="store_true", help="do not re-sort imports and format with ruff afterwards")
    parser.add_argument("--root", type=Path, default=None, help="the repository (default: the one this script is in)")
    args = parser.parse_args(argv)
    root = args.root or Path(git(Path(__file__).resolve().parent, "rev-parse", "--show-toplevel").strip())
    return run(root.resolve(), check=args.check, ruff=not args.no_ruff)


if __name__ == "__main__":
    sys.exit(main())
