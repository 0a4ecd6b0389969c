"""Fixtures of the consolidation tests: `ready`, a workspace with credits, an agent with vector
memory and the editor's credential. Helpers are in tests/credits/support.py."""

from __future__ import annotations

import pytest

from tests.credits.support import ai_agent, grant
from tests.support import make_agent


@pytest.fixture
def ready(world):
    """Credits granted, an agent with vector memory, the editor's credential."""
    grant(world.workspace, "100")
    return ai_agent(world), make_agent(world.editor)
