"""Split string literals on lines over the line length into implicit concatenations.

Used once for the move to 120 columns (issue 35): `ruff format` wraps code but never a string,
so a message longer than the line stays one line. This splits such a literal at spaces into
pieces that fit, one piece per line, inside the brackets it already sits in (the value is
unchanged: adjacent literals are one string). It leaves alone what it cannot split safely
(triple-quoted strings, a literal outside brackets, a space inside an f-string's braces or a
`\\N{...}` escape) and prints those for a person to shorten.

    python scripts/refactor/split_long_strings.py [--limit 120] FILE...
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize

PREFIX = re.compile(r"^([rRbBuUfF]*)(['\"])")


def _split_points(body: str, is_f: bool) -> list[int]:
    """Offsets in `body` just after a space where the literal may be cut."""
    points, depth, i = [], 0, 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            if body.startswith("\\N{", i):
                i = body.index("}", i) + 1
                continue
            i += 2
            continue
        if is_f and ch in "{}":
            if i + 1 < len(body) and body[i + 1] == ch:
                i += 2
                continue
            depth += 1 if ch == "{" else -1
        elif ch == " " and depth == 0 and i + 1 < len(body) and body[i + 1] != " ":
            points.append(i + 1)
        i += 1
    return points


def split_literal(token: str, first_width: int, width: int) -> list[str] | None:
    """`token` as pieces whose first fits `first_width` characters and the rest `width`."""
    m = PREFIX.match(token)
    if not m or token[m.end() :].startswith(m.group(2) * 2):
        return None  # triple-quoted or not a plain literal
    prefix, quote = m.groups()
    body = token[m.end() : -1]
    is_f = "f" in prefix.lower()
    points = _split_points(body, is_f)
    pieces, start, room = [], 0, first_width
    while len(prefix) + len(body) - start + 2 > room:
        fitting = [p for p in points if start < p and len(prefix) + p - start + 2 <= room]
        if not fitting:
            later = [p for p in points if p > start]
            if not later:
                break
            cut = later[0]  # one word longer than the room: cut after it anyway
        else:
            cut = fitting[-1]
        pieces.append(body[start:cut])
        start, room = cut, width
    pieces.append(body[start:])
    if len(pieces) == 1:
        return None
    out = []
    for piece in pieces:
        piece_prefix = (
            prefix if (not is_f or "{" in piece or "}" in piece) else prefix.replace("f", "").replace("F", "")
        )
        out.append(f"{piece_prefix}{quote}{piece}{quote}")
    return out


def _groups(source: str) -> list[list[tokenize.TokenInfo]]:
    """Runs of string literals inside brackets, one per line, nothing else between them: the
    pieces of one implicitly concatenated string, re-cut together so no piece is a word."""
    groups: list[list[tokenize.TokenInfo]] = []
    depth, run = 0, []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.STRING and depth > 0 and tok.start[0] == tok.end[0]:
            if run and tok.start[0] == run[-1].end[0]:
                groups.append(run)  # two literals on one line: leave the line as it is
                run = []
                continue
            run.append(tok)
            continue
        if tok.type in (tokenize.NL, tokenize.COMMENT) and run:
            if tok.type == tokenize.COMMENT:
                groups.append(run)
                run = []
            continue
        if run:
            groups.append(run)
            run = []
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
    return groups


def _joined(run: list[tokenize.TokenInfo]) -> str | None:
    """The run as one literal, when its pieces share quote and prefix (an f-string's plain
    pieces join it with their braces doubled)."""
    shapes = [PREFIX.match(t.string).groups() if PREFIX.match(t.string) else None for t in run]
    if None in shapes or len({(p.lower().replace("f", ""), q) for p, q in shapes}) != 1:
        return None
    any_f = any("f" in p.lower() for p, _ in shapes)
    bodies = []
    for (prefix, _), tok in zip(shapes, run):
        body = tok.string[len(prefix) + 1 : -1]
        if any_f and "f" not in prefix.lower():
            body = body.replace("{", "{{").replace("}", "}}")
        bodies.append(body)
    prefix = shapes[0][0].lower().replace("f", "") + ("f" if any_f else "")
    return prefix + shapes[0][1] + "".join(bodies) + shapes[0][1]


def rewrite(source: str, limit: int) -> tuple[str, list[int]]:
    lines = source.split("\n")
    long_rows = {i + 1 for i, line in enumerate(lines) if len(line) > limit}
    if not long_rows:
        return source, []
    edits = []
    for run in _groups(source):
        rows = range(run[0].start[0], run[-1].end[0] + 1)
        if not long_rows.intersection(rows):
            continue
        literal = _joined(run) if len(run) > 1 else run[0].string
        if literal is None:
            continue
        first_row, col = run[0].start
        last_row, end = run[-1].end
        line = lines[first_row - 1]
        indent = len(line) - len(line.lstrip())
        tail = lines[last_row - 1][end:]
        pieces = split_literal(literal, limit - col - 1, limit - max(col, indent) - 1 - len(tail))
        if pieces:
            edits.append((first_row, last_row, col, pieces, indent, tail))
    for first_row, last_row, col, pieces, indent, tail in sorted(edits, reverse=True):
        head = lines[first_row - 1][:col]
        new = [head + pieces[0]] + [" " * max(col, indent) + p for p in pieces[1:]]
        new[-1] += tail
        lines[first_row - 1 : last_row] = new
    result = "\n".join(lines)
    left = [i + 1 for i, line in enumerate(result.split("\n")) if len(line) > limit]
    return result, left


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
            # The same program, or nothing is written: adjacent literals parse to one constant.
            try:
                same = ast.dump(ast.parse(result)) == ast.dump(ast.parse(source))
            except SyntaxError:  # a piece landed where a new line ends the statement
                same = False
            if not same:
                print(f"{name}: splitting would change the program; left as it is")
                continue
            with open(name, "w", encoding="utf-8") as fh:
                fh.write(result)
        for row in left:
            print(f"{name}:{row}: still over {args.limit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
