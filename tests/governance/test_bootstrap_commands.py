"""The bootstrap commands (SPEC §5.1) print their JSON and work together."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from governance.models import Member

pytestmark = pytest.mark.django_db


def _command(*args) -> dict:
    out = io.StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_the_bootstrap_commands_print_their_json_and_work_together(db):
    created = _command("createworkspace", "Initech", "--owner", "boss@initech.test", "--password", "pw-boss-1234")
    assert set(created) == {"workspaceId", "ownerMemberId"}
    owner = Member.objects.get(pk=int(created["ownerMemberId"]))
    assert str(owner.workspace_id) == created["workspaceId"] and owner.role == "owner"
    added = _command("addmember", created["workspaceId"], "milton@initech.test", "--role", "editor")
    assert set(added) == {"memberId"} and Member.objects.get(pk=int(added["memberId"])).role == "editor"
    token = _command("issue_api_token", "milton@initech.test")["token"]
    from rest_framework.test import APIClient

    api = APIClient()
    settings_page = api.get(f"/api/w/{created['workspaceId']}/ask-history/settings", HTTP_AUTHORIZATION=f"Token {token}")
    assert settings_page.status_code == 200 and settings_page.json()["agentMemoriesEnabled"] is False
    assert api.get(f"/api/w/{created['workspaceId']}/ask-history/settings", HTTP_AUTHORIZATION="Token gpt_nope_nope").status_code in (401, 403)
    bare = _command("createworkspace", "Quiet", "--owner", "q@q.test", "--non-retaining", "--ai-memory-unavailable")
    from governance.models import Workspace

    quiet = Workspace.objects.get(pk=int(bare["workspaceId"]))
    assert quiet.retains_history is False and quiet.ai_memory_available is False


def test_seed_demo_revokes_through_the_action_and_replaces_its_agent_token(db, settings):
    """`seed_demo` (the README's run command) seeds through the agent API with a credential it then
    revokes the way every credential is revoked: with its audit event. A second run keeps the
    workspace and replaces the demo agent's token (the old one is revoked, audited too)."""
    from governance.models import AuditEvent, Credential

    settings.MEMORY_EMBEDDER = "hashing"
    first = _command("seed_demo")
    second = _command("seed_demo")
    assert first["workspaceId"] == second["workspaceId"] and first["agentToken"] != second["agentToken"]
    credentials = Credential.objects.filter(member__workspace_id=int(first["workspaceId"]))
    assert not credentials.active().filter(name="seed").exists()
    assert list(credentials.active().values_list("name", flat=True)) == ["demo agent"]
    revoked = AuditEvent.objects.filter(action="credential.revoked", workspace_id=int(first["workspaceId"]))
    assert sorted(revoked.values_list("reason", flat=True)) == ["replaced by a new demo run", "the demo's seed memories are written"]
