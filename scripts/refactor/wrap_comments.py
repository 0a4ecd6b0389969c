"""Wrap comments and docstring lines over the line length.

Used once for the move to 120 columns (issue 35), after `ruff format` and split_long_strings.py:
the formatter never touches a comment or a docstring. A comment alone on its line is wrapped into
more comment lines; a trailing comment moves to its own lines above the line it ends (a `# noqa`
or `# type:` directive stays where it is, its explanation moves up); a docstring line is wrapped
at spaces with its indent (list items continue two columns in). Tables and lines with no space to
break at are printed for a person.

    python scripts/refactor/wrap_comments.py [--limit 120] FILE...
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import textwrap
import tokenize

DIRECTIVE = re.compile(r"^#\s*(?:noqa(?::\s*[A-Z0-9, ]+[A-Z0-9])?|type:\s*ignore(?:\[[^\]]*\])?)")


def _wrap(text: str, width: int, first: str, rest: str) -> list[str] | None:
    lines = textwrap.wrap(
        text, width=width, initial_indent=first, subsequent_indent=rest, break_long_words=False, break_on_hyphens=False
    )
    return lines if lines and all(len(line) <= width for line in lines) else None


def _docstring_rows(tree: ast.AST) -> set[int]:
    rows: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                rows.update(range(first.lineno, first.end_lineno + 1))
    return rows


def rewrite(source: str, limit: int) -> tuple[str, list[int]]:
    lines = source.split("\n")
    if all(len(line) <= limit for line in lines):
        return source, []
    docs = _docstring_rows(ast.parse(source))
    comments = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.start[1]
    out: list[str] = []
    left: list[int] = []
    for row, line in enumerate(lines, start=1):
        if len(line) <= limit:
            out.append(line)
            continue
        new = None
        if row in comments:
            col = comments[row]
            code, comment = line[:col].rstrip(), line[col:]
            indent = " " * (len(line) - len(line.lstrip()))
            if not code:
                body = comment.lstrip("#").strip()
                new = _wrap(body, limit, indent + "# ", indent + "# ")
            else:
                directive = DIRECTIVE.match(comment)
                keep = directive.group() if directive else ""
                why = (
                    comment[len(keep) :].strip().lstrip("-(").rstrip(")").strip()
                    if keep
                    else comment.lstrip("#").strip()
                )
                kept = code + ("  " + keep if keep else "")
                above = _wrap(why, limit, indent + "# ", indent + "# ") if why else []
                if above is not None and len(kept) <= limit:
                    new = above + [kept]
                elif above is not None:
                    new = above + [kept]  # the code itself is long: the formatter wraps it next
        elif row in docs and not line.lstrip().startswith("|"):
            stripped = line.lstrip()
            indent = " " * (len(line) - len(stripped))
            lead = re.match(r'^(?:[rRuU]?"""|- |\* |\d+\. )', stripped)
            rest = indent + (" " * len(lead.group()) if lead and not lead.group().endswith('"""') else "")
            new = _wrap(stripped, limit, indent, rest)
        if new is None:
            out.append(line)
            left.append(len(out))
        else:
            out.extend(new)
    return "\n".join(out), left


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=120)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    for name in args.files:
        with open(name, encoding="utf-8") as fh:
            source = fh.read()
        result, left = rewrite(source, args.limit)
        if result != source:
            ast.parse(result)  # still a program
            with open(name, "w", encoding="utf-8") as fh:
                fh.write(result)
        for row in left:
            print(f"{name}:{row}: left over {args.limit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
