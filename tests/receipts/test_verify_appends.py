"""Issue 22 review, F4: the verify endpoint checked every receipt appended since the checkpoint,
so many receipts written between two requests (a burst of forgets, or no request for a long
time) made one request walk all of them. Now a request checks at most `APPEND_CAP` appended
receipts beyond the window; the rest is reported as not verified yet (`complete: false`,
`verifiedThroughSeq`, a note naming the daily job and `verify_receipts`), and the checkpoint moves
to what was checked, so the next requests go on from there. Work is counted, never timed."""

from __future__ import annotations

import pytest

from retention import receipt_checks
from retention import receipts as chain
from retention.models import DeletionReceipt
from tests.receipts.support import api_report, forget_some, run_verify

WINDOW, CAP = 3, 4


@pytest.fixture
def counted(monkeypatch):
    seen: list[int] = []
    original = chain.check

    def counting(receipt, **kwargs):
        seen.append(receipt.chain_seq)
        return original(receipt, **kwargs)

    monkeypatch.setattr(chain, "check", counting)
    monkeypatch.setattr(receipt_checks, "SWEEP_WINDOW", WINDOW)
    monkeypatch.setattr(receipt_checks, "APPEND_CAP", CAP, raising=False)  # raising: the test predates the cap
    return seen


def test_a_burst_of_appends_is_checked_a_cap_at_a_time(world, agent, counted):
    forget_some(agent, 2)
    assert api_report(world.owner)["complete"] is True
    forget_some(agent, 12, tag="burst")  # 12 receipts between two requests
    reports = []
    for _ in range(4):
        counted.clear()
        reports.append(api_report(world.owner))
        assert len(counted) <= WINDOW + 1 + CAP, f"one request checked {len(counted)} receipts"
    assert [r["verifiedThroughSeq"] for r in reports] == [6, 10, 14, 14]
    assert [r["complete"] for r in reports] == [False, False, True, True]
    assert all(r["intact"] is True and r["firstBreak"] is None for r in reports)  # not a break: not checked yet
    first = reports[0]
    assert first["notVerifiedBeyondSeq"] == 6 and first["headSeq"] == 14
    assert "receipt_chain_check" in first["note"] and "verify_receipts" in first["note"]
    assert reports[-1]["notVerifiedBeyondSeq"] is None and reports[-1]["note"] is None


def test_without_a_checkpoint_the_first_request_is_bounded_too(world, agent, counted):
    forget_some(agent, 10)
    counted.clear()
    report = api_report(world.editor)  # a member's view says so as well
    assert sorted(counted) == [1, 2, 3, 4]
    assert report["intact"] is True and report["complete"] is False


def test_a_break_beyond_the_cap_is_found_by_a_later_request_and_at_once_by_the_command(world, agent, counted):
    made = forget_some(agent, 10)
    DeletionReceipt.objects.filter(pk=made[8].pk).update(actor_label="edited")
    first = api_report(world.owner)
    assert first["intact"] is True and first["complete"] is False  # receipt 9 is past the cap
    later = [api_report(world.owner) for _ in range(2)]
    expected = {"receiptId": str(made[8].pk), "chainSeq": 9, "reason": chain.HASH_MISMATCH}
    assert later[-1]["intact"] is False and later[-1]["firstBreak"] == expected
    status, report = run_verify("--workspace", str(world.workspace.pk))
    assert status == 1
