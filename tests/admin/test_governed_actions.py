"""Governed admin actions: a reason page, the same action function the API uses, an audit event
with the reason, and receipts for every erasure."""

from __future__ import annotations

import pytest

from governance.models import AuditEvent, Credential, Workspace
from memoryapp.models import Citation, MemoryEmbedding, MemoryVersion
from retention.models import DeletionReceipt, Operation
from tests.admin.support import admin_url, assert_no_content, browser
from tests.support import make_agent

pytestmark = pytest.mark.django_db


def run(client, model, action: str, pks, reason: str = "ticket OPS-42"):
    return client.post(
        admin_url(model, "changelist"),
        {"action": action, "_selected_action": [str(pk) for pk in pks], "confirm": "yes", "reason": reason},
    )


def test_operator_revokes_a_credential_with_a_reason_and_the_agent_is_refused(world, staff):
    agent = make_agent(world.editor)
    credential = Credential.objects.get(member=world.editor)
    response = run(browser(staff.operator), Credential, "revoke_credential", [credential.pk])
    assert response.status_code == 302
    credential.refresh_from_db()
    assert credential.revoked_at is not None
    event = AuditEvent.objects.get(action="credential.revoked")
    assert (event.actor, event.reason, event.workspace_id) == (staff.operator, "ticket OPS-42", world.workspace.pk)
    assert agent.remember(namespace="prefs", text="after revocation").status_code == 401


def test_switching_the_platform_flag_is_audited_old_to_new(world, staff):
    client = browser(staff.superuser)
    run(client, Workspace, "disable_ai_memory", [world.workspace.pk], reason="contract paused")
    world.workspace.refresh_from_db()
    assert world.workspace.ai_memory_available is False
    event = AuditEvent.objects.get(action="workspace.ai_memory_available")
    assert (
        event.changes == {"aiMemoryAvailable": [True, False]}
        and event.reason == "contract paused"
        and event.actor == staff.superuser
    )
    run(client, Workspace, "enable_ai_memory", [world.workspace.pk])
    world.workspace.refresh_from_db()
    assert world.workspace.ai_memory_available is True


def test_making_a_workspace_non_retaining_shows_counts_then_erases_with_receipts(
    world, memories, staff, django_capture_on_commit_callbacks
):
    client = browser(staff.operator)
    versions = MemoryVersion.objects.filter(workspace=world.workspace).count()
    confirmation = client.post(
        admin_url(Workspace, "changelist"), {"action": "make_non_retaining", "_selected_action": [world.workspace.pk]}
    )
    body = confirmation.content.decode()
    assert confirmation.status_code == 200
    assert (
        f"{versions} / {Citation.objects.filter(memory__workspace=world.workspace).count()} / "
        f"{MemoryEmbedding.objects.filter(memory__workspace=world.workspace).count()}" in body
    )
    assert_no_content(body, memories)
    assert (
        MemoryVersion.objects.filter(workspace=world.workspace).count() == versions
    )  # nothing happens before the confirmation

    with django_capture_on_commit_callbacks(execute=True):
        response = run(client, Workspace, "make_non_retaining", [world.workspace.pk], reason="customer asked")
    assert response.status_code == 302
    world.workspace.refresh_from_db()
    assert world.workspace.retains_history is False
    assert not MemoryVersion.objects.filter(workspace=world.workspace).exists()
    receipts = DeletionReceipt.objects.filter(workspace_ref=world.workspace.pk, operation=Operation.NON_RETAINING)
    assert sum(r.versions_erased for r in receipts) == versions
    assert AuditEvent.objects.get(action="workspace.retains_history").reason == "customer asked"


def test_erasing_a_member_s_memories_writes_a_receipt_and_an_audit_event(world, memories, staff):
    other = make_agent(world.owner)
    other.remember(namespace="prefs", key="kept", text="the owner's own note")
    versions = MemoryVersion.objects.filter(member=world.editor).count()
    client = browser(staff.operator)
    confirmation = client.post(
        admin_url(world.editor.__class__, "changelist"),
        {"action": "erase_member_memories", "_selected_action": [world.editor.pk]},
    )
    assert f"<td>{versions}</td>" in confirmation.content.decode()
    run(client, world.editor.__class__, "erase_member_memories", [world.editor.pk], reason="right to erasure")
    assert not MemoryVersion.objects.filter(member=world.editor).exists()
    assert MemoryVersion.objects.filter(member=world.owner).exists()
    receipt = DeletionReceipt.objects.get(operation=Operation.ADMIN_ERASE)
    assert (
        receipt.member_ref == world.editor.pk
        and receipt.versions_erased == versions
        and receipt.actor == staff.operator
    )
    assert receipt.verification["clean"] is True
    assert AuditEvent.objects.get(action="memories.admin_erased").reason == "right to erasure"


def test_reverifying_a_receipt_stores_the_new_result_and_audits_it(world, memories, staff):
    from retention.previews import erase_member_memories

    erase_member_memories(world.editor, actor=staff.superuser, reason="setup")
    receipt = DeletionReceipt.objects.get(operation=Operation.ADMIN_ERASE)
    first = receipt.verification["checkedAt"]
    run(browser(staff.operator), DeletionReceipt, "reverify", [receipt.pk], reason="quarterly check")
    receipt.refresh_from_db()
    assert receipt.verification["clean"] is True and receipt.verification["checkedAt"] >= first
    event = AuditEvent.objects.get(action="receipt.reverified")
    assert (
        event.reason == "quarterly check"
        and event.target == f"receipt #{receipt.pk}"
        and event.workspace_ref == world.workspace.pk
    )


def test_reverifying_a_receipt_of_a_deleted_workspace_keeps_its_id_in_the_audit_event(world, memories, staff):
    from governance.actions import delete_workspace

    workspace_id = world.workspace.pk
    delete_workspace(world.workspace, actor=staff.superuser)
    receipt = DeletionReceipt.objects.filter(workspace_ref=workspace_id).first()
    run(browser(staff.superuser), DeletionReceipt, "reverify", [receipt.pk])
    event = AuditEvent.objects.get(action="receipt.reverified")
    assert event.workspace_id is None and event.workspace_ref == workspace_id


def test_a_superuser_creates_a_workspace_with_its_settings_row_owner_and_audit_event(db, staff):
    response = browser(staff.superuser).post(
        admin_url(Workspace, "add"),
        {"name": "Initech", "owner_email": "boss@initech.test", "ai_memory_available": "on", "retains_history": "on"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    workspace = Workspace.objects.get(name="Initech")
    assert workspace.ask_history.agent_memories_enabled is False
    assert workspace.members.get().user.email == "boss@initech.test"
    event = AuditEvent.objects.get(action="workspace.created", workspace=workspace)
    assert event.actor == staff.superuser


def test_renaming_a_workspace_is_audited_and_flags_cannot_be_edited_in_the_form(world, staff):
    browser(staff.superuser).post(
        admin_url(Workspace, "change", world.workspace.pk),
        {"name": "Acme Corp", "ai_memory_available": "", "retains_history": ""},
    )
    world.workspace.refresh_from_db()
    assert world.workspace.name == "Acme Corp"
    assert world.workspace.ai_memory_available is True and world.workspace.retains_history is True
    assert AuditEvent.objects.get(action="workspace.renamed").changes == {"name": ["Acme", "Acme Corp"]}
