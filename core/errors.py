"""The one error type. Every refusal carries a stable code and renders as
`{"error": {"code", "message", "details"}}` (REST, middleware, the MCP transport) or a tool error
with the same code (MCP tools). `error_body` is the one place that shape is built."""

from __future__ import annotations

from typing import Any


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}
        self.headers = headers or {}

    def as_json(self) -> dict[str, Any]:
        return error_body(self.code, self.message, self.details)

    def __repr__(self) -> str:
        return f"ApiError({self.status}, {self.code!r})"


def plain_details(detail: Any) -> Any:
    """A validation error tree (DRF's ErrorDetail strings, lists, dicts) as plain JSON values."""
    if isinstance(detail, dict):
        return {str(k): plain_details(v) for k, v in detail.items()}
    if isinstance(detail, list):
        return [plain_details(v) for v in detail]
    return str(detail)


def unauthenticated(message: str = "A valid credential is required.") -> ApiError:
    return ApiError(401, "UNAUTHENTICATED", message, headers={"WWW-Authenticate": 'Bearer realm="agent-memory"'})


def validation_error(details: dict[str, Any], message: str = "The request is not valid.") -> ApiError:
    return ApiError(400, "VALIDATION_ERROR", message, {"fields": details})


def memory_disabled(reason: str, message: str) -> ApiError:
    """SPEC §2 row 5: `reason` is `organization`, `workspace` or `member`."""
    return ApiError(403, "AGENT_MEMORY_DISABLED", message, {"reason": reason})


def memory_not_found() -> ApiError:
    # One answer for "does not exist" and "is not yours": existence is never revealed.
    return ApiError(404, "MEMORY_NOT_FOUND", "No such memory.")


def not_found(what: str = "resource") -> ApiError:
    return ApiError(404, "NOT_FOUND", f"No such {what}.")


def forbidden(message: str = "You may not do this.", code: str = "FORBIDDEN") -> ApiError:
    return ApiError(403, code, message)
