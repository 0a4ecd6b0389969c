"""Instants as the APIs write and read them: one formatter and one validator (SPEC §3 `asOf`,
every `…At` field and date filter).

An instant is ISO-8601 with a UTC offset. Accepted instants lie between `EARLIEST` and `LATEST`:
far enough inside Python's `datetime` range that converting one to UTC or to any zone, or moving
it by a day, can never overflow (`0001-01-01T00:00:00+14:00` is a valid string but no instant a
database, a template or `astimezone` can hold)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

EARLIEST = datetime(2, 1, 1, tzinfo=UTC)
LATEST = datetime(9998, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
RANGE_MESSAGE = f"Must lie between {EARLIEST.date().isoformat()} and {LATEST.date().isoformat()} (UTC)."
FORMAT_MESSAGE = "Must be ISO-8601 with a UTC offset (for example 2026-01-01T00:00:00Z)."


class InvalidInstant(ValueError):
    """The message says what is wrong, in words a client can act on."""


def iso(value: datetime | None) -> str | None:
    """The API's form of an instant: ISO-8601, `Z` for UTC."""
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")


def check_range(value: datetime) -> datetime:
    """`value` (aware) if it lies in the accepted range, else `InvalidInstant`."""
    try:
        in_utc = value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise InvalidInstant(RANGE_MESSAGE) from None
    if not EARLIEST <= in_utc <= LATEST:
        raise InvalidInstant(RANGE_MESSAGE)
    return value


def parse_instant(value: object) -> datetime:
    """An ISO-8601 instant with a UTC offset, in range; `InvalidInstant` otherwise."""
    if not isinstance(value, str) or "T" not in value:
        raise InvalidInstant(FORMAT_MESSAGE)
    try:
        parsed = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        raise InvalidInstant(FORMAT_MESSAGE) from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise InvalidInstant(FORMAT_MESSAGE)
    return check_range(parsed)


def end_of_day(day: date) -> datetime:
    """The instant a day-granular choice (a credential that works "until" a date) ends: the
    next midnight, UTC; `InvalidInstant` past the accepted range."""
    if not EARLIEST.date() <= day < LATEST.date():
        raise InvalidInstant(RANGE_MESSAGE)
    return datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)
