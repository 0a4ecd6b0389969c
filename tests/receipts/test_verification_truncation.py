"""Review finding (issue 22 row 7 follow-up): dropping the newest verification record AND setting
the shown result back to the record before it leaves no trace. Nothing anchors how many records a
receipt has, so a re-verification that found leftovers (clean: false) can be erased from the
receipt by someone with database access and `verify_chain` still says intact."""

from __future__ import annotations

import pytest

from retention import receipts as chain
from retention.models import DeletionReceipt
from tests.receipts.test_chain import forget_some


@pytest.fixture
def four(world, agent) -> list[DeletionReceipt]:
    return forget_some(agent, 4)


def test_a_dirty_reverification_truncated_with_the_shown_result_rolled_back_is_reported(world, four):
    target = DeletionReceipt.objects.get(pk=four[0].pk)
    chain.add_verification(target, {**target.verification, "clean": False, "note": "leftover found"}, trigger="reverification")
    target.save(update_fields=["verifications", "verification"])
    assert chain.verify_chain(world.workspace.pk)["intact"] is True  # the dirty result, as written
    records = target.verifications[:-1]
    DeletionReceipt.objects.filter(pk=target.pk).update(verifications=records, verification=records[-1]["verification"])
    assert chain.verify_chain(world.workspace.pk)["intact"] is False
