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
    settings_page = api.get(
        f"/api/w/{created['workspaceId']}/ask-history/settings", HTTP_AUTHORIZATION=f"Token {token}"
    )
    assert settings_page.status_code == 200 and settings_page.json()["agentMemoriesEnabled"] is False
    assert api.get(
        f"/api/w/{created['workspaceId']}/ask-history/settings", HTTP_AUTHORIZATION="Token gpt_nope_nope"
    ).status_code in (401, 403)
    bare = _command("createworkspace", "Quiet", "--owner", "q@q.test", "--non-retaining", "--ai-memory-unavailable")
    from governance.models import Workspace

    quiet = Workspace.objects.get(pk=int(bare["workspaceId"]))
    assert quiet.retains_history is False and quiet.ai_memory_available is False


def test_seed_demo_keeps_its_agent_token_across_runs_and_revokes_the_seed_credential(db, settings, tmp_path):
    """`seed_demo` (the run command) seeds through the agent API with a credential it then revokes
    the way every credential is revoked, with its audit event. A second run (a restart) keeps the
    workspace AND the demo agent's token: the builder's exported GAM_TOKEN still works. The token
    is kept in VAR_DIR, mode 600; the database holds its hash only."""
    from rest_framework.test import APIClient

    from governance.models import AuditEvent, Credential

    settings.MEMORY_EMBEDDER = "hashing"
    settings.VAR_DIR = tmp_path
    first = _command("seed_demo")
    second = _command("seed_demo")
    token = first["agentToken"]
    assert first["workspaceId"] == second["workspaceId"] and second["agentToken"] == token
    assert first["previousTokenEnded"] is None and second["previousTokenEnded"] is None
    kept = tmp_path / "demo-agent-token"
    assert kept.read_text().strip() == token and kept.stat().st_mode & 0o777 == 0o600
    credentials = Credential.objects.filter(member__workspace_id=int(first["workspaceId"]))
    assert not credentials.active().filter(name="seed").exists()
    assert list(credentials.active().values_list("name", flat=True)) == ["demo agent"]
    assert not any(
        token in str(row) for row in credentials.values_list(*[f.attname for f in Credential._meta.concrete_fields])
    )
    revoked = AuditEvent.objects.filter(action="credential.revoked", workspace_id=int(first["workspaceId"]))
    assert list(revoked.values_list("reason", flat=True)) == ["the demo's seed memories are written"]
    api = APIClient(HTTP_AUTHORIZATION=f"Bearer {token}")
    stored = api.post(
        "/api/agent/v1/memories/remember",
        {"namespace": "restart", "key": "check", "text": "Still here after a restart."},
        format="json",
    )
    assert stored.status_code == 201, stored.content
    found = api.post(
        "/api/agent/v1/memories/recall", {"query": "still here after a restart", "namespace": "restart"}, format="json"
    )
    assert found.status_code == 200 and [m["key"] for m in found.json()["memories"]] == ["check"]


@pytest.mark.parametrize("how", ["revoked", "expired", "unknown", "removed"])
def test_seed_demo_says_when_the_kept_token_ended_and_issues_a_new_one(db, settings, tmp_path, how):
    """A kept token whose credential is revoked (the credentials page), expired, unknown to the
    database (a new database under the same VAR_DIR) or whose file is gone: the next run issues a
    new one, says why the old one ended, and the old one stays refused."""
    from datetime import timedelta

    from django.utils import timezone
    from rest_framework.test import APIClient

    from governance import actions
    from governance.auth import find_credential
    from governance.models import Credential

    settings.MEMORY_EMBEDDER = "hashing"
    settings.VAR_DIR = tmp_path
    kept = tmp_path / "demo-agent-token"
    old = _command("seed_demo")["agentToken"]
    if how == "revoked":
        actions.revoke_credential(find_credential(old), actor=None, reason="revoked on the credentials page")
    elif how == "expired":
        Credential.objects.filter(pk=find_credential(old).pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    elif how == "unknown":
        kept.write_text("gam_" + "x" * 40 + "\n")
    else:
        kept.unlink()
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    text = out.getvalue()
    new = kept.read_text().strip()
    assert new != old and new in text and kept.stat().st_mode & 0o777 == 0o600
    if how == "removed":
        assert "NEW TOKEN" not in text  # nothing was kept, so nothing ended that the builder had
    else:
        assert (
            "NEW TOKEN: the previous demo token ended" in text
            and (how if how != "unknown" else "unknown to this database") in text
        )
    assert _command("seed_demo")["agentToken"] == new
    assert (
        APIClient(HTTP_AUTHORIZATION=f"Bearer {old}").post("/api/agent/v1/memories/list", {}, format="json").status_code
        == 401
    )
    assert (
        APIClient(HTTP_AUTHORIZATION=f"Bearer {new}").post("/api/agent/v1/memories/list", {}, format="json").status_code
        == 200
    )


def test_seed_demo_seeds_an_expired_assistant_memory_that_can_be_reactivated(db, settings, tmp_path):
    """The member's AI-memory page shows an expired memory to reactivate; reactivating it works
    and a restart leaves it as the member left it (no second copy)."""
    from governance.models import Member
    from memoryapp.assistant import list_assistant_memories, reactivate_assistant_memory

    settings.MEMORY_EMBEDDER = "hashing"
    settings.VAR_DIR = tmp_path
    _command("seed_demo")
    editor = Member.objects.get(user__username="editor@demo.test")
    listed = list_assistant_memories(editor)
    assert [m["topic"] for m in listed["expired"]] == ["delivery_window"]
    assert "delivery_window" not in [m["topic"] for m in listed["memories"]]
    reactivate_assistant_memory(editor, listed["expired"][0]["id"])
    _command("seed_demo")
    again = list_assistant_memories(editor)
    assert again["expired"] == [] and [m["topic"] for m in again["memories"]].count("delivery_window") == 1
