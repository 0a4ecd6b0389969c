"""The one error type. Every refusal carries a stable code and renders as
`{"error": {"code", "message", "details"}}` (REST) or a tool error with the same code (MCP)."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}
        self.headers = headers or {}

    def as_json(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}

    def __repr__(self) -> str:
        return f"ApiError({self.status}, {self.code!r})"


def unauthenticated(message: str = "A valid credential is required.") -> ApiError:
    return ApiError(401, "UNAUTHENTICATED", message, headers={"WWW-Authenticate": 'Bearer realm="agent-memory"'})


def validation_error(details: dict[str, Any], message: str = "The request is not valid.") -> ApiError:
    return ApiError(400, "VALIDATION_ERROR", message, {"fields": details})


def memory_not_found() -> ApiError:
    # One answer for "does not exist" and "is not yours": existence is never revealed.
    return ApiError(404, "MEMORY_NOT_FOUND", "No such memory.")


def not_found(what: str = "resource") -> ApiError:
    return ApiError(404, "NOT_FOUND", f"No such {what}.")


def forbidden(message: str = "You may not do this.", code: str = "FORBIDDEN") -> ApiError:
    return ApiError(403, code, message)
