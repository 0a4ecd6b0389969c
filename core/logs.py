"""Structured logs (SPEC §11): one JSON object per line, one line per request and per task.

What a line may hold is decided here, not by the caller's good manners:

- the request line (`memoryapp.request`) and the task line (`memoryapp.task`) are built from
  fixed fields — ids, route and task names, statuses, error codes, durations — never a path, a
  query string, a body, a recall query, memory text or details;
- every other record (Django's, Celery's, a library's) goes through `JsonFormatter`, which
  turns any extra field that is not a plain JSON value into its type name (Django attaches the
  request object, whose repr holds the query string) and formats exceptions as their type and
  frames only: an exception's message can quote stored values (a database error does);
- `memoryapp.request` and `memoryapp.task` lines carry the request id; so does every other
  record logged while a request or a task runs (`RequestContextFilter`), so one request's lines
  can be found together.

python-json-logger does the JSON encoding (timestamps, levels, extras, reserved attributes): a
well-kept library for a format every log shipper reads, rather than a formatter of our own.
"""

from __future__ import annotations

import logging
import re
import traceback
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from types import TracebackType
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _LibraryJsonFormatter

request_logger = logging.getLogger("memoryapp.request")
task_logger = logging.getLogger("memoryapp.task")

# A client's own id is kept when it looks like an id (a UUID, a trace id, a load balancer's id),
# so that its lines join the caller's; anything else is replaced by a fresh one.
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{7,127}")
_PLAIN = (str, int, float, bool, type(None))

# The fields of the request or task being served in this thread or task: a dict, so that code
# deeper down (the gate) can add the credential and workspace it resolved.
_scope: ContextVar[dict[str, Any] | None] = ContextVar("memoryapp_log_scope", default=None)


def new_request_id() -> str:
    return uuid.uuid4().hex


def sane_request_id(header: str | None) -> str:
    value = (header or "").strip()
    return value if _SANE_REQUEST_ID.fullmatch(value) else new_request_id()


@contextmanager
def scope(**fields: Any) -> Iterator[dict[str, Any]]:
    """The fields of one request or task; `bind()` adds to them while it runs."""
    current: dict[str, Any] = dict(fields)
    token = _scope.set(current)
    try:
        yield current
    finally:
        _scope.reset(token)


def begin(**fields: Any) -> tuple[Any, dict[str, Any]]:
    """`scope()` for code that opens and closes it in two callbacks (Celery's task signals)."""
    current: dict[str, Any] = dict(fields)
    return _scope.set(current), current


def end(token: Any) -> None:
    try:
        _scope.reset(token)
    except ValueError:  # opened in another context (a callback run elsewhere): nothing to undo here
        _scope.set(None)


def bind(**fields: int | str | None) -> None:
    """Add ids to the current request's line (the gate binds the credential and its workspace)."""
    current = _scope.get()
    if current is not None:
        current.update({k: v for k, v in fields.items() if v is not None})


def current() -> dict[str, Any]:
    return dict(_scope.get() or {})


# --- the two lines this project writes ---------------------------------------------------------------
def request_line(
    *,
    request_id: str,
    transport: str,
    route: str,
    method: str,
    status: int,
    code: str,
    seconds: float,
    credential_id: int | None = None,
    workspace_id: int | None = None,
) -> None:
    level = logging.ERROR if status >= 500 else logging.INFO
    request_logger.log(
        level,
        "request",
        extra={
            "request_id": request_id,
            "transport": transport,
            "route": route,
            "method": method,
            "status": status,
            "code": code,
            "duration_ms": round(seconds * 1000, 2),
            "credential_id": credential_id,
            "workspace_id": workspace_id,
        },
    )


def task_line(
    *, task: str, task_id: str, outcome: str, seconds: float | None, error_type: str | None = None, retries: int = 0
) -> None:
    level = logging.ERROR if outcome == "failure" else logging.WARNING if outcome == "retry" else logging.INFO
    task_logger.log(
        level,
        "task",
        extra={
            "task": task,
            "task_id": task_id,
            "outcome": outcome,
            "duration_ms": round(seconds * 1000, 2) if seconds is not None else None,
            "error_type": error_type,
            "retries": retries,
        },
    )


def frames_only(exc_type: type[BaseException] | None, tb: TracebackType | None) -> str:
    """An exception as its frames and its type, without its message."""
    frames = "".join(traceback.format_tb(tb)) if tb is not None else ""
    return (
        f"Traceback (most recent call last):\n{frames}{exc_type.__module__}.{exc_type.__qualname__}"
        if exc_type
        else frames
    )


# --- formatting every record -------------------------------------------------------------------------
class RequestContextFilter(logging.Filter):
    """Stamps the current request's (or task's) id on every record logged while it runs."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = _scope.get()
        if fields and "request_id" in fields and not hasattr(record, "request_id"):
            record.request_id = fields["request_id"]
        return True


class JsonFormatter(_LibraryJsonFormatter):
    def formatException(self, ei) -> str:  # noqa: N802 (logging's name)
        return frames_only(ei[0], ei[2])

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        # uvicorn repeats its message with terminal colour codes: one copy is enough
        return {key: _plain(value) for key, value in log_data.items() if key != "color_message"}


def _plain(value: Any) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return f"<{type(value).__name__}>"
