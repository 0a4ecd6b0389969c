"""Fixtures of the receipt tests: `four`, the editor's agent forgetting four memories (four
receipts, chain positions 1-4 of the workspace's chain). Helpers are in tests/receipts/support.py."""

from __future__ import annotations

import pytest

from retention.models import DeletionReceipt
from tests.receipts.support import forget_some


@pytest.fixture
def four(world, agent) -> list[DeletionReceipt]:
    return forget_some(agent, 4)
