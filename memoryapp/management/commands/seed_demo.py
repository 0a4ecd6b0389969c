"""Seeds (once) the demo workspace a newcomer clicks through, and prints where to click.

Every run revokes the previous demo agent credential and issues a fresh one, because a token
is shown only once and never stored in clear."""

import json

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from governance import actions
from governance.models import Credential, Workspace
from memoryapp import gates
from memoryapp.actions import remember
from memoryapp.assistant import add_assistant_memory

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

GUIDE = """大阪倉庫は平日18時まで出荷します。

Acme Rockets のサポートは日本語と英語で対応します。"""


class Command(BaseCommand):
    help = "Create the demo workspace (once) and print the URL, logins and a fresh agent token."

    def add_arguments(self, parser):
        parser.add_argument("--port", default="8000")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        workspace = Workspace.objects.filter(name=DEMO).first()
        if workspace is None:
            workspace = self._create()
        editor = workspace.members.get(user__username=LOGINS[1][0])
        with transaction.atomic():
            for old in Credential.objects.not_revoked().filter(member=editor, name="demo agent"):
                actions.revoke_credential(old, actor=None, reason="replaced by a new demo run")
            _, token = actions.create_credential(editor, name="demo agent", scopes=["memory:read", "memory:write"])
        base = f"http://127.0.0.1:{opts['port']}"
        if opts["json"]:
            self.stdout.write(json.dumps({"workspaceId": str(workspace.pk), "url": base, "agentToken": token}))
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
            f"  Agent token for {LOGINS[1][0]} (read+write, shown once):",
            f"    {token}",
            "  Try it:",
            f"    curl -s -X POST {base}/api/agent/v1/memories/remember -H 'Authorization: Bearer {token}' \\",
            '      -H \'Content-Type: application/json\' -d \'{"namespace":"prefs","key":"editor","text":"Prefers vim; reach me at ada@example.com"}\'',
            '  Python client (README "Connect your agent"):',
            f"    export GAM_URL={base} GAM_TOKEN={token}",
            "  Ctrl-C stops the web server, the worker and beat.",
            "",
        ]
        self.stdout.write("\n".join(lines))

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
            {"namespace": "shipping", "key": "cutoff", "text": "Orders after 18:00 JST ship the next weekday from Osaka.", "citations": [cited.pk], "collectionId": collection.pk},
            {"namespace": "prefs", "key": "language", "text": "The editor likes answers in Japanese first, then English."},
            {"namespace": "prefs", "text": "Call me on +81 90-1234-5678 only for urgent shipping issues."},
        ):
            remember(gates.admit(token, "remember", body))
        add_assistant_memory(editor, kind="preference", topic="response_style", summary="Prefers short answers with bullet points.", details=["No emoji", "Metric units"])
        actions.revoke_credential(seed, actor=None, reason="the demo's seed memories are written")
        return workspace
