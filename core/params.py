"""Ids and numbers as clients send them in paths, query strings and bodies: one parser each.

Ids are strings of 1–18 ASCII digits in JSON and URLs (integers are accepted in JSON bodies) and
positive 63-bit integers in the database. Anything else is no id: a path with one answers 404,
a query parameter or body field with one answers 400."""

from __future__ import annotations

from collections.abc import Mapping

from core.errors import validation_error

ID_PATTERN = "[0-9]{1,18}"
MAX_ID = 2**63 - 1


def parse_id(value: object) -> int | None:
    """The id `value` names, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 < value <= MAX_ID else None
    if isinstance(value, str) and value.isascii() and value.isdigit() and 0 < len(value) <= 18:
        parsed = int(value)
        return parsed if parsed > 0 else None
    return None


class IdConverter:
    """`<id:name>` in the URLconf: a path whose id is malformed or out of range matches no
    route, so it answers 404 (never a database error)."""

    regex = ID_PATTERN

    def to_python(self, value: str) -> int:
        parsed = parse_id(value)
        if parsed is None:
            raise ValueError(value)  # Django: this route does not match
        return parsed

    def to_url(self, value: int | str) -> str:
        return str(value)


def query_int(params: Mapping[str, str], name: str, *, default: int, minimum: int, maximum: int) -> int:
    """An optional bounded integer in a query string (`limit`, `offset`)."""
    raw = params.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or not minimum <= int(raw) <= maximum:
        raise validation_error({name: [f"Must be an integer between {minimum} and {maximum}."]})
    return int(raw)


DRY_RUN = "dryRun"
_QUERY_FLAGS = {"1": True, "true": True, "0": False, "false": False}


def body_dry_run(body: object) -> bool:
    """`dryRun` in a JSON body: absent → False; only the JSON booleans are accepted (a string
    "true" or a 1 is refused, not guessed at)."""
    if not isinstance(body, Mapping) or DRY_RUN not in body:
        return False
    value = body[DRY_RUN]
    if not isinstance(value, bool):
        raise validation_error({DRY_RUN: ["Must be true or false."]}, "dryRun must be a JSON boolean.")
    return value


def query_dry_run(params: Mapping[str, str]) -> bool:
    """`?dryRun=` on a DELETE: 1/true or 0/false; absent → False; anything else → 400."""
    if DRY_RUN not in params:
        return False
    values = params.getlist(DRY_RUN) if hasattr(params, "getlist") else [params[DRY_RUN]]
    flags = {_QUERY_FLAGS.get(str(v).strip().lower()) for v in values}
    if None in flags or len(flags) != 1:
        raise validation_error(
            {DRY_RUN: ["Must be 1, true, 0 or false (once)."]}, "dryRun must be 1, true, 0 or false."
        )
    return flags.pop()
