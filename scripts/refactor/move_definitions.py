"""Move top-level definitions from one module of the suite to another, with their imports.

Used for issue 35 step 5 (no test module imports another test module or a conftest): the helpers
and fixtures test modules shared moved to `tests/support.py`, `tests/<area>/support.py` and
`tests/<area>/conftest.py`. Re-run it after a reformat or on a branch that still has the old
imports: it is a move, never an edit.

    python scripts/refactor/move_definitions.py SRC DST NAME...        (run from the repository)

Moves the statements defining NAME (with decorators, the comment lines above them unless a
`# --` section header, and `NAME.attr = ...` lines) from SRC to DST (created if missing, with
the module docstring given in the environment as DST_DOC, which a new DST requires), copies the
imports they use, imports back into SRC what it still uses, and rewrites every `from SRC import
...` line under tests/ and bench/. It refuses when the moved code uses a definition of SRC left behind (add it to
NAME..., or set ALLOW_SRC_IMPORT=1 when SRC is a
helper module DST may import). A fixture's importers need their import line deleted by hand, and
multi-line imports are left alone (it prints them). Then run `ruff check --fix`, `ruff format`,
`ruff check --select F821` and tests/layers/test_test_layout.py.
"""

import ast
import os
import re
import sys
from pathlib import Path

ROOT = Path.cwd()
if len(sys.argv) < 4:
    sys.exit(__doc__)
src, dst, *names = sys.argv[1:]
names = set(names)
src_path, dst_path = ROOT / src, ROOT / dst
src_mod = src[:-3].replace("/", ".")
if not dst_path.exists() and not os.environ.get("DST_DOC"):
    sys.exit(f"{dst} does not exist yet: say what it holds in DST_DOC (its module docstring)")
dst_mod = dst[:-3].replace("/", ".")
text = src_path.read_text()
lines = text.splitlines(keepends=True)
tree = ast.parse(text)


def defined(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return set()
    return set()


def used(nodes):
    out = set()
    for n in nodes:
        for sub in ast.walk(n):
            if isinstance(sub, ast.Name):
                out.add(sub.id)
    return out


def bound(node):
    if isinstance(node, ast.Import):
        return {(a.asname or a.name.split(".")[0]) for a in node.names}
    return {(a.asname or a.name) for a in node.names}


moved, kept = [], []
# attribute statements like `name.__test__ = False` follow their definition
for node in tree.body:
    d = defined(node)
    if d and d <= names:
        moved.append(node)
    elif d & names:
        sys.exit(f"statement at line {node.lineno} defines {d}, only part moved")
    elif (
        isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Attribute)
        and isinstance(node.targets[0].value, ast.Name)
        and node.targets[0].value.id in names
    ):
        moved.append(node)
    else:
        kept.append(node)
found = set().union(*(defined(n) for n in moved))
if found != names:
    sys.exit(f"not found in {src}: {names - found}")

imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
top_defs = set().union(*(defined(n) for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))))
need = used(moved)
local = set()
for n in moved:
    for sub in ast.walk(n):
        if isinstance(sub, ast.arg):
            local.add(sub.arg)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and sub is not n:
            local.add(sub.id)
missing = (need & top_defs) - names - local
if missing and not os.environ.get("ALLOW_SRC_IMPORT"):
    sys.exit(f"moved code uses names of {src} not moved: {sorted(missing)}")


def start_of(node):
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    i = first - 1
    while i > 0 and lines[i - 1].lstrip().startswith("#") and not lines[i - 1].lstrip().startswith("# --"):
        i -= 1
    return i


def segment(node):
    return "".join(lines[start_of(node) : node.end_lineno])


# imports the moved code needs
need_imports = []
for imp in imports:
    b = bound(imp) & need
    if not b:
        continue
    if isinstance(imp, ast.ImportFrom) and imp.module == dst_mod:
        continue
    if isinstance(imp, ast.ImportFrom):
        mod = "." * imp.level + (imp.module or "")
        aliases = [a for a in imp.names if (a.asname or a.name) in b]
        need_imports.append(
            f"from {mod} import " + ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in aliases) + "\n"
        )
    else:
        for a in imp.names:
            if (a.asname or a.name.split(".")[0]) in b:
                need_imports.append(f"import {a.name}" + (f" as {a.asname}" if a.asname else "") + "\n")

if missing:
    need_imports.append(f"from {src_mod} import {', '.join(sorted(missing))}\n")

# remove the moved code from SRC
drop = set()
for node in moved:
    drop.update(range(start_of(node), node.end_lineno))
new_src = [line for i, line in enumerate(lines) if i not in drop]
new_src_text = re.sub(r"\n{4,}", "\n\n\n", "".join(new_src))
kept_local = set()
for n in kept:
    for sub in ast.walk(n):
        if isinstance(sub, ast.arg):
            kept_local.add(sub.arg)
still = (used(kept) - kept_local) & names
# names SRC still uses, imported back (after its last top-level import)
if still:
    t2 = ast.parse(new_src_text)
    last = max(n.end_lineno for n in t2.body if isinstance(n, (ast.Import, ast.ImportFrom)))
    l2 = new_src_text.splitlines(keepends=True)
    l2.insert(last, f"from {dst_mod} import {', '.join(sorted(still))}\n")
    new_src_text = "".join(l2)
src_path.write_text(new_src_text)

body = "".join(segment(n).rstrip("\n") + "\n\n\n" for n in moved).rstrip("\n") + "\n"
if dst_path.exists():
    d = dst_path.read_text()
    dt = ast.parse(d)
    dl = d.splitlines(keepends=True)
    last_imp = max([n.end_lineno for n in dt.body if isinstance(n, (ast.Import, ast.ImportFrom))] or [1])
    dl[last_imp:last_imp] = need_imports
    dst_path.write_text("".join(dl).rstrip("\n") + "\n\n\n" + body)
else:
    doc = os.environ["DST_DOC"].strip()
    dst_path.write_text(
        f'"""{doc}"""\n\nfrom __future__ import annotations\n\n' + "".join(need_imports) + "\n\n" + body
    )

# importers
pat = re.compile(r"^(\s*)from " + re.escape(src_mod) + r" import (.+?)(\s*#.*)?$")
for path in list(ROOT.glob("tests/**/*.py")) + list(ROOT.glob("bench/**/*.py")):
    if path == src_path:
        continue
    t = path.read_text()
    out, changed = [], False
    for line in t.splitlines(keepends=True):
        m = pat.match(line.rstrip("\n"))
        if not m:
            out.append(line)
            continue
        indent, imported, comment = m.group(1), m.group(2), m.group(3) or ""
        if imported.startswith("("):
            print(f"WARNING multi-line import left alone in {path}")
            out.append(line)
            continue
        parts = [p.strip() for p in imported.split(",")]
        to_dst = [p for p in parts if p.split(" as ")[0] in names]
        to_src = [p for p in parts if p.split(" as ")[0] not in names]
        if not to_dst:
            out.append(line)
            continue
        changed = True
        if to_src:
            out.append(f"{indent}from {src_mod} import {', '.join(to_src)}{comment}\n")
        out.append(f"{indent}from {dst_mod} import {', '.join(to_dst)}{comment}\n")
    if changed:
        path.write_text("".join(out))
        print("rewrote", path.relative_to(ROOT))
print("moved", sorted(names), "from", src, "to", dst, "; src still uses", sorted(still))
