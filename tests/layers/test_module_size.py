"""No module of the product over ~400 lines without a reason in its docstring (issue 23 step 5).

A module that grows past the limit either splits along a seam or says, in its docstring, why it
is one seam ("... on purpose: ..."); this test names every one that does neither."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("memoryapp", "governance", "retention", "credits", "core", "config")
# "~400" at 200 columns; the move to 120 (issue 35) made the product 14 % longer in lines
# (26,898 -> 30,760), so ~460, and a module a few lines over is not a god-module
LIMIT = 480


def _modules() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--", *(f"{p}/*.py" for p in PACKAGES)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed if "/migrations/" not in name]


def test_every_long_module_says_why_it_is_one():
    modules = _modules()
    assert len(modules) > 100  # the listing found the tree
    unexplained = []
    for path in modules:
        source = path.read_text(encoding="utf-8")
        if source.count("\n") <= LIMIT:
            continue
        docstring = ast.get_docstring(ast.parse(source)) or ""
        if "on purpose" not in docstring:
            unexplained.append(f"{path.relative_to(ROOT)} ({source.count(chr(10))} lines)")
    assert unexplained == [], (
        'split these along a seam, or say in the docstring why each is one ("Over ~400 lines on purpose: ..."): '
        + ", ".join(unexplained)
    )
