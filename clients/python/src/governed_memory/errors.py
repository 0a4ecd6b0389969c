"""One exception class per error code the agent API answers.

The server answers every refusal as `{"error": {"code", "message", "details"}}`; the client maps
the *code* (never the HTTP status alone) to a class, so a code that moves to another status, or a
new use of a code (a 429 `AGENT_MEMORY_RATE_LIMITED` for reads, `details.operation: "read"`),
still reaches the caller as the same class. A code this client does not know yet is an
`APIError` carrying it. docs/clients.md has the table."""

from __future__ import annotations

import json
from typing import Any


class GovernedMemoryError(Exception):
    """Everything this package raises."""


class ConfigurationError(GovernedMemoryError):
    """No base URL or token: pass them, or set GAM_URL / GAM_TOKEN."""


class TransportError(GovernedMemoryError):
    """No answer from the server. `request_sent` says whether the request may have reached it:
    after a connection that was never made nothing happened, after a timeout or a dropped
    connection a write may or may not have been applied."""

    request_sent: bool = True

    def __init__(self, message: str, *, operation: str):
        super().__init__(message)
        self.operation = operation


class ConnectionFailed(TransportError):
    """The connection could not be made: the request never left, so nothing was applied."""

    request_sent = False


class OutcomeUnknown(TransportError):
    """The request was sent but no answer came (timeout, connection dropped): a remember or
    forget may have been applied. Never retried blindly for writes (docs/clients.md)."""

    request_sent = True


class UnexpectedResponse(GovernedMemoryError):
    """An answer that is not the API's JSON (a proxy's error page, a wrong base URL)."""

    def __init__(self, message: str, *, status: int, body: str):
        super().__init__(message)
        self.status = status
        self.body = body


class MalformedResponse(UnexpectedResponse):
    """A success answer (2xx, JSON) without a field the result needs, or with one of another type
    (a server of another version, a proxy rewriting bodies). `field` names the missing one;
    `status` is 200 for any success status."""

    def __init__(self, message: str, *, operation: str, field: str | None, body: str, status: int = 200):
        super().__init__(message, status=status, body=body)
        self.operation = operation
        self.field = field


class APIError(GovernedMemoryError):
    """A refusal from the server, with its stable `code`, `message` and `details`."""

    code: str = ""

    def __init__(
        self,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        status: int = 0,
        headers: dict[str, str] | None = None,
    ):
        # str(error) carries the reason, not just the code: the details (which field, what is
        # wrong with it, which kinds of personal data) as the server sent them. The server never
        # puts the refused value in them, so this is safe to log.
        reason = f" Details: {json.dumps(details, ensure_ascii=False, sort_keys=True, default=str)}" if details else ""
        super().__init__(f"{code}: {message}{reason}")
        self.code = code
        self.message = message
        self.details = details or {}
        self.status = status
        self.headers = headers or {}

    @property
    def retry_after(self) -> float | None:
        """Seconds the server asked us to wait (Retry-After, else RateLimit-Reset, else
        details.retryAfterSeconds), or None."""
        for name in ("retry-after", "ratelimit-reset"):
            value = self.headers.get(name)
            if value is not None:
                try:
                    return max(0.0, float(value))
                except ValueError:
                    pass  # an HTTP-date or garbage: try the next header, then the body's details
        value = self.details.get("retryAfterSeconds")
        return float(value) if isinstance(value, (int, float)) else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, code={self.code!r}, message={self.message!r})"


# --- SPEC §2, in gate order -----------------------------------------------------------------------
class Unauthenticated(APIError):
    """401: token missing, unknown, revoked, expired, or its member left the workspace."""

    code = "UNAUTHENTICATED"


class InsufficientScope(APIError):
    """403: the credential lacks memory:read (recall, list) or memory:write (remember, forget)."""

    code = "INSUFFICIENT_SCOPE"


class InsufficientRole(APIError):
    """403: the member's current role is below the scope's minimum."""

    code = "INSUFFICIENT_ROLE"


class NonRetainingWorkspace(APIError):
    """403: the workspace keeps no history, so no memories."""

    code = "NON_RETAINING_WORKSPACE"


class AgentMemoryDisabled(APIError):
    """403: agent memory is off; `reason` is organization, workspace or member."""

    code = "AGENT_MEMORY_DISABLED"

    @property
    def reason(self) -> str | None:
        return self.details.get("reason")


class ValidationError(APIError):
    """400: malformed body, wrong types or lengths; `fields` holds the per-field messages."""

    code = "VALIDATION_ERROR"

    @property
    def fields(self) -> dict[str, Any]:
        return self.details.get("fields") or {}


class PersonalData(APIError):
    """400: namespace or key holds personal data (they are never masked, so they are refused)."""

    code = "AGENT_MEMORY_PERSONAL_DATA"


class ContextSetScopeRefused(APIError):
    """403: outside the credential's bound context set."""

    code = "AGENT_CONTEXT_SET_SCOPE_REFUSED"


class CitationInvalid(APIError):
    """400: a cited passage does not exist or is not readable by the member."""

    code = "AGENT_MEMORY_CITATION_INVALID"


class MemoryEmpty(APIError):
    """400: nothing is left of the text once personal data is masked."""

    code = "AGENT_MEMORY_EMPTY"


class RateLimited(APIError):
    """429: too many remembers (or turns, or reads) by this credential in the rolling window.
    The server refused the request, so retrying after `retry_after` is safe."""

    code = "AGENT_MEMORY_RATE_LIMITED"

    @property
    def operation(self) -> str | None:
        """`details.operation` when the server names it (e.g. "read")."""
        return self.details.get("operation")


class MemoryFull(APIError):
    """409: the member already has the maximum number of stored memory versions."""

    code = "AGENT_MEMORY_FULL"


# --- the other codes the agent API answers ----------------------------------------------------------
class MemoryNotFound(APIError):
    """404: no such memory, or not this member's (the same answer for both)."""

    code = "MEMORY_NOT_FOUND"


class RateLimitUnavailable(APIError):
    """503: the rate limiter is unavailable; nothing was applied, retried with jittered back-off."""

    code = "RATE_LIMIT_UNAVAILABLE"


class ServiceUnavailable(APIError):
    """503: the server's database cannot serve now (no pooled connection free in time, the
    connection lost, a lock not granted). Reads are retried after `retry_after` with jittered
    back-off; a remember or forget is raised, since a step before the failing one may have been
    applied (list the key to see whether it landed)."""

    code = "SERVICE_UNAVAILABLE"


class PayloadTooLarge(APIError):
    """413: the body is over the server's limit (64 KiB)."""

    code = "PAYLOAD_TOO_LARGE"


class AgentNotFound(APIError):
    """404: a conversation turn named an agent that is not in the credential's workspace."""

    code = "AGENT_NOT_FOUND"


class UnknownModel(APIError):
    """400: a reply usage report named a model without a price."""

    code = "UNKNOWN_MODEL"


class NotFound(APIError):
    """404: no such route (check the base URL)."""

    code = "NOT_FOUND"


class Forbidden(APIError):
    code = "FORBIDDEN"


class MethodNotAllowed(APIError):
    code = "METHOD_NOT_ALLOWED"


class NotAcceptable(APIError):
    code = "NOT_ACCEPTABLE"


class UnsupportedMediaType(APIError):
    code = "UNSUPPORTED_MEDIA_TYPE"


class Throttled(APIError):
    """429 from a generic request throttle; refused, so safe to retry after `retry_after`."""

    code = "THROTTLED"


class InternalError(APIError):
    code = "INTERNAL_ERROR"


#: code → class, for every code above.
ERROR_CLASSES: dict[str, type[APIError]] = {cls.code: cls for cls in APIError.__subclasses__() if cls.code}


def error_for(
    code: str, message: str, details: dict[str, Any] | None, *, status: int, headers: dict[str, str]
) -> APIError:
    cls = ERROR_CLASSES.get(code, APIError)
    return cls(code, message, details, status=status, headers=headers)
