"""Seeds (once) the demo workspace a newcomer clicks through, and prints where to click.

The demo agent's token survives a restart: the database keeps only its hash (as for every
credential), and the token itself is kept in VAR_DIR/demo-agent-token (mode 600, next to the
other generated secrets), re-read and re-printed by the next run while its credential is still
usable. When it is not (revoked on the credentials page, expired, a new database under the same
VAR_DIR, or the file removed), the run issues a new one and says that the old one ended."""

import json
import os
import secrets
import stat

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from governance import actions
from governance.auth import find_credential
from governance.models import Credential, Member, Workspace
from memoryapp import gates
from memoryapp.actions import remember
from memoryapp.assistant import add_assistant_memory, add_expired_assistant_memory, has_assistant_topic

DEMO = "Demo workspace"
LOGINS = [
    ("owner@demo.test", "demo-owner-pass", "owner"),
    ("editor@demo.test", "demo-editor-pass", "editor"),
    ("viewer@demo.test", "demo-viewer-pass", "viewer"),
]
ADMIN = ("admin@demo.test", "demo-admin-pass")

HANDBOOK = """Acme Rockets ships orders from the Osaka warehouse every weekday.

The Osaka warehouse closes at 18:00 JST; orders placed later ship the next weekday.

Customer support answers in English and Japanese."""

AGENT = "demo agent"
TOKEN_FILE = "demo-agent-token"
# The expired memory the member's AI-memory page offers to reactivate (seeded again on a run after
# the grace purge erased it; left alone once reactivated).
EXPIRED_TOPIC = "delivery_window"

GUIDE = """大阪倉庫は平日18時まで出荷します。

Acme Rockets のサポートは日本語と英語で対応します。"""


class Command(BaseCommand):
    help = (
        "Create the demo workspace (once) and print the URL, logins and the demo agent token "
        "(kept across runs while valid)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--port", default="8000")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        workspace = Workspace.objects.filter(name=DEMO).first()
        if workspace is None:
            workspace = self._create()
        editor = workspace.members.get(user__username=LOGINS[1][0])
        if not has_assistant_topic(editor, EXPIRED_TOPIC):
            self._seed_expired(editor)
        token, ended = self._agent_token(editor)
        base = f"http://127.0.0.1:{opts['port']}"
        if opts["json"]:
            self.stdout.write(
                json.dumps(
                    {"workspaceId": str(workspace.pk), "url": base, "agentToken": token, "previousTokenEnded": ended}
                )
            )
            return
        lines = [
            "",
            "Governed agent memory is running.",
            f"  Open            {base}/accounts/login/",
            f"  AI memory       {base}/w/{workspace.pk}/ai-memory/",
            f"  Agent memories  {base}/w/{workspace.pk}/what-bundata-remembers/",
            f"  Admin           {base}/admin/   ({ADMIN[0]} / {ADMIN[1]})",
            f"  API docs        {base}/api/docs/",
            f"  MCP endpoint    {base}/mcp   (Authorization: Bearer <agent token>)",
            f"  Metrics         {base}/metrics   (Authorization: Bearer $METRICS_TOKEN)"
            if settings.METRICS_TOKEN
            else "  Metrics         off: start with METRICS_TOKEN=<16+ characters> to serve /metrics",
            "  Logins:",
            *[f"    {email} / {password}   ({role})" for email, password, role in LOGINS],
            f"  Agent token for {LOGINS[1][0]} (read+write):",
            f"    {token}",
            f"    {self._token_note(ended)}",
            "  Try it:",
            f"    curl -s -X POST {base}/api/agent/v1/memories/remember -H 'Authorization: Bearer {token}' \\",
            '      -H \'Content-Type: application/json\' -d \'{"namespace":"prefs","key":"editor","text":"Prefers '
            "vim; reach me at ada@example.com\"}'",
            '  Python client (README "Connect your agent"):',
            f"    export GAM_URL={base} GAM_TOKEN={token}",
            "  Ctrl-C stops the web server, the worker and beat.",
            "",
        ]
        self.stdout.write("\n".join(lines))

    def _agent_token(self, editor: Member) -> tuple[str, str | None]:
        """The kept demo token while its credential is usable, else a new one: (token, why the
        previous one ended, or None when it is kept or there was none)."""
        path = settings.VAR_DIR / TOKEN_FILE
        kept = _read_kept(path)
        ended = None
        if kept:
            credential = find_credential(kept)
            if (
                credential is not None
                and credential.member_id == editor.pk
                and credential.name == AGENT
                and credential.is_usable()
            ):
                if path.is_symlink() or path.stat().st_mode & 0o077:
                    # restored from a backup, copied under umask 022 or swapped for a symlink:
                    # put it back in a regular file this user alone reads (the link is replaced,
                    # its target left as it is)
                    _keep_secret(path, kept)
                return kept, None
            ended = self._why_ended(credential, editor)
        with transaction.atomic():
            for old in Credential.objects.not_revoked().filter(member=editor, name=AGENT):
                actions.revoke_credential(old, actor=None, reason="replaced by a new demo run")
            _, token = actions.create_credential(editor, name=AGENT, scopes=["memory:read", "memory:write"])
        _keep_secret(path, token)
        return token, ended

    @staticmethod
    def _why_ended(credential: Credential | None, editor: Member) -> str:
        if credential is None or credential.member_id != editor.pk:
            return "unknown to this database (a new database under the same VAR_DIR?)"
        if credential.revoked_at is not None:
            return "revoked"
        return "expired"

    @staticmethod
    def _token_note(ended: str | None) -> str:
        path = settings.VAR_DIR / TOKEN_FILE
        if ended is None:
            return f"Kept in {path} (mode 600): the next run prints the same token while it is valid."
        return f"NEW TOKEN: the previous demo token ended ({ended}); re-export GAM_TOKEN. Kept in {path}."

    @staticmethod
    def _seed_expired(editor: Member) -> None:
        add_expired_assistant_memory(
            editor,
            kind="preference",
            topic=EXPIRED_TOPIC,
            summary="Prefers deliveries between 9:00 and 12:00 on weekdays.",
            details=["Mornings only: the loading dock is closed after noon."],
        )

    @transaction.atomic
    def _create(self) -> Workspace:
        owner_email, owner_password, _ = LOGINS[0]
        workspace, owner = actions.create_workspace(DEMO, owner_email=owner_email, password=owner_password)
        editor = actions.add_member(workspace, LOGINS[1][0], role="editor", password=LOGINS[1][1])
        actions.add_member(workspace, LOGINS[2][0], role="viewer", password=LOGINS[2][1])
        User = get_user_model()
        admin = actions.ensure_user(ADMIN[0], ADMIN[1])
        User.objects.filter(pk=admin.pk).update(is_staff=True, is_superuser=True)
        actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=owner.user)
        collection = actions.create_collection(workspace, name="Operations handbook")
        actions.create_entity(workspace, name="Osaka warehouse", aliases=["大阪倉庫"])
        actions.create_entity(workspace, name="Acme Rockets", aliases=[])
        handbook = actions.create_document(collection, title="Shipping handbook", text=HANDBOOK)
        actions.create_document(collection, title="出荷ガイド", text=GUIDE)
        editor.refresh_from_db()
        seed, token = actions.create_credential(editor, name="seed", scopes=["memory:write"])
        cited = handbook.current_version.passages.order_by("position").first()
        for body in (
            {
                "namespace": "shipping",
                "key": "cutoff",
                "text": "Orders after 18:00 JST ship the next weekday from Osaka.",
                "citations": [cited.pk],
                "collectionId": collection.pk,
            },
            {
                "namespace": "prefs",
                "key": "language",
                "text": "The editor likes answers in Japanese first, then English.",
            },
            {"namespace": "prefs", "text": "Call me on +81 90-1234-5678 only for urgent shipping issues."},
        ):
            remember(gates.admit(token, "remember", body))
        add_assistant_memory(
            editor,
            kind="preference",
            topic="response_style",
            summary="Prefers short answers with bullet points.",
            details=["No emoji", "Metric units"],
        )
        actions.revoke_credential(seed, actor=None, reason="the demo's seed memories are written")
        return workspace


#: More than any token: what is read of the kept file at most.
_MOST_READ = 4096


def _read_kept(path) -> str:
    """The token kept at `path`, or "" when there is none to read. Only a regular file (or a link
    to one) can hold it, and only its first bytes are read: a FIFO planted there would block the
    run before the server starts, a link to /dev/zero or a huge file would fill memory. Opening
    without blocking is what lets a FIFO be told apart before it is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:  # no file, or a link to nowhere
        return ""
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return handle.read(_MOST_READ).decode("utf-8", "replace").strip()


def _keep_secret(path, value: str) -> None:
    """Writes `value` to `path`, readable by this user only (mode 600 from creation on, then
    renamed into place: no moment where another user could read it, no half-written file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    os.replace(tmp, path)
