"""Authentication for the workspace API (session or personal token) and agent credential lookup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from rest_framework import authentication, exceptions

from core.prepared import Prepared
from governance import tokens
from governance.models import Credential, CredentialQuerySet, Member, PersonalToken

PERSONAL_TOKEN_KIND = "gpt"
CREDENTIAL_TOKEN_KIND = "gam"
_LAST_USED_RESOLUTION = timedelta(seconds=60)
SESSION_AUTHENTICATED_AT = "governance.authenticated_at"


class PersonalTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed token header.")
        try:
            raw = header[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("Malformed token header.") from exc
        prefix = tokens.split_prefix(raw, PERSONAL_TOKEN_KIND)
        row = PersonalToken.objects.active().select_related("user").filter(prefix=prefix).first() if prefix else None
        if not tokens.matches(raw, row.token_hash if row else None) or not row.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid token.")
        _touch(PersonalToken, row)
        return (row.user, row)

    def authenticate_header(self, request):
        return self.keyword


def audited_step_allowed(user: Any) -> bool:
    """Whether `user` may take the audited step (SPEC §10): read one memory's content, or act on a
    member's account (set its password). Only when the deployment allows it
    (`ADMIN_MAY_VIEW_MEMORY_CONTENT`), only for an active superuser, and each use asks for a reason
    and writes an audit event."""
    return (
        bool(settings.ADMIN_MAY_VIEW_MEMORY_CONTENT)
        and bool(getattr(user, "is_superuser", False))
        and bool(getattr(user, "is_active", False))
    )


def may_set_password(actor: Any, target: Any) -> bool:
    """Whether `actor` may set `target`'s password in the admin: their own always; a member's
    account (or a removed member's) only through the audited step; a superuser's or another
    admin's only as a superuser (staff setting it would become them)."""
    if target.pk == actor.pk:
        return True
    if is_member_account(target) and not audited_step_allowed(actor):
        return False
    return not ((target.is_superuser or target.is_staff) and not actor.is_superuser)


def is_member_account(user: object) -> bool:
    """Whether the account is or was a workspace member's: its password, login and API access are
    the member's, and no admin path sets them outside the audited step (SPEC §10). A removed
    member counts: re-added, a password the admin knew would open their next period."""
    return getattr(user, "pk", None) is not None and Member.objects.filter(user_id=user.pk).exists()


class MembershipRestarted(Exception):
    """The caller is an active member, but authenticated with a personal token or session issued
    before their current membership period began (they were removed and re-added since): the
    workspace API answers 401, a page asks for a new login."""

    def __init__(self, member: Member):
        super().__init__(f"credential predates membership period {member.period} of member #{member.pk}")
        self.member = member


def record_login_time(sender: type, request: HttpRequest, user: object, **kwargs: Any) -> None:
    """`user_logged_in` receiver: the session remembers when it logged in (`Member.opens_for`)."""
    if request is not None and hasattr(request, "session"):
        request.session[SESSION_AUTHENTICATED_AT] = timezone.now().isoformat()


def credential_issued_at(request: HttpRequest) -> datetime | None:
    """When what the request authenticates with was issued: a personal token's creation, else the
    session's login (None for a session from before login times were recorded)."""
    auth = getattr(request, "auth", None)
    if isinstance(auth, PersonalToken):
        return auth.created_at
    session = getattr(request, "session", None)
    stamp = session.get(SESSION_AUTHENTICATED_AT) if session is not None else None
    try:
        return datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
    except ValueError:
        return None


def active_membership(request: HttpRequest, workspace_id: int) -> Member | None:
    """The caller's active membership of the workspace, with what every page and workspace API
    handler reads, or None: a workspace you do not belong to looks like one that does not exist.
    Raises `MembershipRestarted` when the caller's token or session is older than the current
    membership period."""
    user = getattr(request, "user", None)
    if not getattr(user, "is_authenticated", False):
        return None
    member = (
        Member.objects.active()
        .select_related("workspace", "workspace__ask_history", "user")
        .filter(workspace_id=workspace_id, user=user)
        .first()
    )
    if member is not None and not member.opens_for(credential_issued_at(request)):
        raise MembershipRestarted(member)
    return member


def _credential_by_prefix(prefix: str, at: datetime) -> CredentialQuerySet:
    # Only what the gate reads, and the member's usable credentials (the read and remember limits'
    # member bound). Compiled once per process (core.prepared): compiling cost more than the query.
    return (
        Credential.objects.select_related("member", "member__user", "workspace", "workspace__ask_history")
        .with_usable_siblings(at)
        .filter(prefix=prefix)
        .order_by("pk")
    )


_CREDENTIAL = Prepared(_credential_by_prefix, "\x00prefix", datetime(2000, 1, 2, 3, 4, 5, 678901, tzinfo=UTC))


def find_credential(raw_token: str | None) -> Credential | None:
    """The credential a bearer token names, with everything the gate needs, or None.

    Revocation, expiry and membership are judged by the gate, not here."""
    if not raw_token:
        tokens.matches("", None)
        return None
    prefix = tokens.split_prefix(raw_token, CREDENTIAL_TOKEN_KIND)
    row = _CREDENTIAL.first(prefix, timezone.now()) if prefix else None
    if not tokens.matches(raw_token, row.token_hash if row else None):
        return None
    return row


def touch_credential(credential: Credential) -> None:
    _touch(Credential, credential)


def _touch(model, row) -> None:
    now = timezone.now()
    # Written at most once a minute per token: "last used" must not turn every read into a write.
    if row.last_used_at is None or now - row.last_used_at > _LAST_USED_RESOLUTION:
        model.objects.filter(pk=row.pk).update(last_used_at=now)
        row.last_used_at = now


def bearer_token(authorization_header: str | None) -> str | None:
    if not authorization_header:
        return None
    scheme, _, value = authorization_header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


class AgentBearerAuthentication(authentication.BaseAuthentication):
    """Declares the agent API's bearer scheme (OpenAPI, WWW-Authenticate). The credential itself
    is judged by the SPEC §2 gate (`memoryapp.gates.admit`), in order, not here."""

    def authenticate(self, request):
        return None

    def authenticate_header(self, request):
        return 'Bearer realm="agent-memory"'
