"""What verifying a receipt chain costs the server per request (issue 22 review, hole B).

The verify endpoint walked the whole chain on every GET, and any member may call it: repeated
calls made the server do O(chain) work each. Now each request checks the receipts appended since
the signed checkpoint plus a rotating window of the verified prefix (docs/receipts.md), so its
work is bounded by the window and the appends, not the chain; `verify_receipts` and the daily job
check every receipt. Work is counted (calls of `receipts.check`), never timed.

And a member could mint unbounded credentials, each with its own remember and read budgets (more
receipts per hour, more reads): now MAX_CREDENTIALS_PER_MEMBER usable ones at most.
"""

from __future__ import annotations

import math
import threading
from datetime import datetime

import pytest
from django.db import connection
from django.utils import timezone

from governance import actions
from governance.models import Credential
from retention import receipt_checks, receipt_keys
from retention import receipts as chain
from retention.jobs import JOBS
from retention.models import DeletionReceipt, ReceiptChain
from tests.receipts.support import api_report, forget_some, run_verify
from tests.support import client_for, error_code, make_agent, on_postgres

WINDOW = 3


@pytest.fixture
def counted(monkeypatch):
    """The positions of the receipts each request checks."""
    seen: list[int] = []
    original = chain.check

    def counting(receipt, **kwargs):
        seen.append(receipt.chain_seq)
        return original(receipt, **kwargs)

    monkeypatch.setattr(chain, "check", counting)
    monkeypatch.setattr(receipt_checks, "SWEEP_WINDOW", WINDOW)
    return seen


@pytest.fixture
def twelve(world, agent):
    return forget_some(agent, 12)


def test_repeated_requests_check_the_window_and_the_appends_not_the_chain(world, agent, twelve, counted):
    assert api_report(world.owner)["intact"] is True  # no checkpoint yet: the first request checks all 12
    assert sorted(counted) == list(range(1, 13))
    for _ in range(6):
        counted.clear()
        report = api_report(world.editor)
        assert report["intact"] is True
        assert len(counted) <= WINDOW + 1, f"one request checked {len(counted)} receipts of a 12-receipt chain"
    forget_some(agent, 2, tag="later")
    counted.clear()
    report = api_report(world.owner)
    assert report["intact"] is True and report["headSeq"] == 14 and report["verifiedThroughSeq"] == 14
    assert {13, 14} <= set(counted) and len(counted) <= WINDOW + 1 + 2


def test_the_window_rotates_over_the_whole_prefix(world, twelve, counted):
    api_report(world.owner)
    covered: set[int] = set()
    for _ in range(math.ceil(12 / WINDOW)):
        counted.clear()
        api_report(world.owner)
        covered |= set(counted)
    assert covered == set(range(1, 13))


def test_a_receipt_changed_below_the_checkpoint_is_found_within_a_rotation_and_then_always(world, twelve, counted):
    api_report(world.owner)
    api_report(world.owner)  # the window now starts past receipt 2
    DeletionReceipt.objects.filter(pk=twelve[1].pk).update(actor_label="edited")
    reports = [api_report(world.owner) for _ in range(math.ceil(12 / WINDOW) + 1)]
    assert any(not r["intact"] for r in reports)
    expected = {"receiptId": str(twelve[1].pk), "chainSeq": 2, "reason": chain.HASH_MISMATCH}
    assert reports[-1]["firstBreak"] == expected
    for _ in range(3):  # once found, every request reports it, and cheaply: the checkpoint sits below it
        counted.clear()
        assert api_report(world.owner)["firstBreak"] == expected
        assert len(counted) <= WINDOW + 2
    assert api_report(world.editor)["firstBreak"] == {**expected, "own": True}


def test_a_checkpoint_moved_by_a_database_edit_is_not_trusted(world, twelve, counted):
    api_report(world.owner)
    DeletionReceipt.objects.filter(pk=twelve[10].pk).update(actor_label="edited")
    head = ReceiptChain.objects.get(workspace_ref=world.workspace.pk)
    # someone with database access claims everything was verified, and rewinds the window past the edit
    ReceiptChain.objects.filter(pk=head.pk).update(
        verified_seq=12, verified_hash=twelve[11].sha256, sweep_seq=1, checkpoint_signature="00" * 64
    )
    report = api_report(world.owner)
    assert report["firstBreak"] == {"receiptId": str(twelve[10].pk), "chainSeq": 11, "reason": chain.HASH_MISMATCH}


def test_the_command_and_the_daily_job_check_every_receipt_and_rewrite_the_checkpoint(world, twelve, counted, settings):
    api_report(world.owner)
    api_report(world.owner)
    DeletionReceipt.objects.filter(pk=twelve[0].pk).update(actor_label="edited")
    counted.clear()
    status, report = run_verify("--workspace", str(world.workspace.pk))
    assert status == 1 and sorted(counted) == [1]  # stops at the first break, from the first receipt
    checked_at = datetime.fromisoformat(report["checkedAt"].replace("Z", "+00:00"))
    assert abs((timezone.now() - checked_at).total_seconds()) < 300
    assert report["keyIds"] == list(receipt_keys.public_keys())
    head = ReceiptChain.objects.get(workspace_ref=world.workspace.pk)
    assert head.verified_seq == 0 and head.full_check_at is not None
    assert api_report(world.owner)["firstBreak"]["chainSeq"] == 1
    DeletionReceipt.objects.filter(pk=twelve[0].pk).update(actor_label=twelve[0].actor_label)
    summary = JOBS["receipt_chain_check"]()
    assert summary["broken"] == 0 and summary["workspaces"] >= 1
    assert ReceiptChain.objects.get(workspace_ref=world.workspace.pk).verified_seq == 12
    assert settings.CELERY_BEAT_SCHEDULE["receipt-chain-check"]["task"] == "retention.tasks.receipt_chain_check"
    assert "expires" in settings.CELERY_BEAT_SCHEDULE["receipt-chain-check"]["options"]


def test_a_short_chain_is_checked_whole_at_every_request(world, agent, counted, monkeypatch):
    monkeypatch.setattr(receipt_checks, "SWEEP_WINDOW", 500)
    four = forget_some(agent, 4)
    api_report(world.owner)
    DeletionReceipt.objects.filter(pk=four[0].pk).update(actor_label="edited")
    assert api_report(world.owner)["firstBreak"]["chainSeq"] == 1


# --- credentials per member ---------------------------------------------------------------------------
def test_credentials_past_the_cap_are_refused_and_revoking_frees_a_slot(world, settings):
    settings.MAX_CREDENTIALS_PER_MEMBER = 3
    client = client_for(world.editor)
    url = f"/api/w/{world.workspace.pk}/agent-credentials"
    made = [client.post(url, {"name": f"c{i}", "scopes": ["memory:read"]}, format="json") for i in range(3)]
    assert [r.status_code for r in made] == [201] * 3
    refused = client.post(url, {"name": "one too many", "scopes": ["memory:read"]}, format="json")
    assert refused.status_code == 409 and error_code(refused) == "CREDENTIAL_LIMIT_REACHED"
    assert refused.json()["error"]["details"] == {"limit": 3} and "token" not in refused.json()
    assert client.delete(f"{url}/{made[0].json()['id']}").status_code in (200, 204)
    assert client.post(url, {"name": "after a revoke", "scopes": ["memory:read"]}, format="json").status_code == 201
    # an expired credential opens nothing, so it does not count either
    oldest = Credential.objects.filter(member=world.editor).active().order_by("id").first()
    Credential.objects.filter(pk=oldest.pk).update(expires_at=timezone.now())
    assert client.post(url, {"name": "after an expiry", "scopes": ["memory:read"]}, format="json").status_code == 201
    # per member: another member still has their own allowance
    make_agent(world.viewer, scopes=("memory:read",))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not on_postgres(), reason="backend: row locks and real concurrency need PostgreSQL")
def test_the_credential_cap_is_exact_under_concurrent_creation(world, settings):
    settings.MAX_CREDENTIALS_PER_MEMBER = 4
    for i in range(2):
        actions.create_credential(world.editor, name=f"existing {i}", scopes=["memory:read"])
    barrier = threading.Barrier(8, timeout=60)
    outcomes: list[str] = []

    def create(i: int) -> None:
        try:
            barrier.wait()
            actions.create_credential(world.editor, name=f"racer {i}", scopes=["memory:read"])
            outcomes.append("created")
        except Exception as exc:  # noqa: BLE001 - the code is what the test reads
            outcomes.append(getattr(exc, "code", type(exc).__name__))
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["CREDENTIAL_LIMIT_REACHED"] * 6 + ["created"] * 2
    assert Credential.objects.filter(member=world.editor).active().count() == 4


def test_the_daily_job_counts_every_chain_and_names_each_broken_one(world, agent, twelve):
    """`check_all_chains`'s summary, exactly: every workspace with receipts or a chain head, every
    receipt checked up to its chain's first break, and the broken workspaces by id."""
    outsider = make_agent(world.outsider)
    three = forget_some(outsider, 3, tag="globex")
    DeletionReceipt.objects.filter(pk=three[1].pk).update(actor_label="edited")
    summary = JOBS["receipt_chain_check"]()
    assert summary == {
        "workspaces": 2,
        "receipts": 12 + 2,  # the broken chain is checked up to its break
        "broken": 1,
        "brokenWorkspaceIds": [str(world.other_workspace.pk)],
    }
    assert receipt_checks.chained_workspaces() == sorted([world.workspace.pk, world.other_workspace.pk])
    # every receipt of a chain deleted: its head still names the workspace, and the deletion is a break
    DeletionReceipt.objects.filter(workspace_ref=world.other_workspace.pk).delete()
    assert receipt_checks.chained_workspaces() == sorted([world.workspace.pk, world.other_workspace.pk])
    assert JOBS["receipt_chain_check"]()["brokenWorkspaceIds"] == [str(world.other_workspace.pk)]
