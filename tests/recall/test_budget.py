"""The query embedding's budget (SPEC §4.4): 800 ms by default; past it recall degrades to the other rankings
instead of waiting."""

from __future__ import annotations

import threading

import pytest

pytestmark = pytest.mark.django_db


def test_the_query_embedding_budget_is_800_ms_by_default(agent, monkeypatch):
    from django.conf import settings

    from memoryapp.recall.embedders import PendingQuery

    assert settings.SEMANTIC_BUDGET_SECONDS == 0.8
    started, budgets = [], []
    real_init, real_result = PendingQuery.__init__, PendingQuery.result
    monkeypatch.setattr(
        PendingQuery, "__init__", lambda self, embedder, text: started.append(text) or real_init(self, embedder, text)
    )
    monkeypatch.setattr(
        PendingQuery, "result", lambda self, budget: budgets.append(budget) or real_result(self, budget)
    )
    agent.remember(namespace="n", text="a note")
    assert agent.recall(query="note").status_code == 200
    assert started == ["note"] and budgets == [0.8]  # the query embedded once per request, within 800 ms


def test_a_query_embedding_past_its_budget_degrades_recall_instead_of_waiting(agent, monkeypatch, settings):
    agent.remember(namespace="n", text="apricot jam")
    release = threading.Event()

    class Stuck:
        id, dim = "stuck", 4

        def embed(self, texts):
            release.wait(30)  # never answers within the budget: no race with the clock
            raise RuntimeError("released")

    monkeypatch.setattr("memoryapp.recall.service.get_embedder", lambda name: Stuck())
    settings.SEMANTIC_BUDGET_SECONDS = 0.05
    try:
        response = agent.recall(query="apricot").json()
    finally:
        release.set()
    assert response["degraded"] == ["semantic"]
    assert [m["text"] for m in response["memories"]] == ["apricot jam"]  # BM25 still answers
    assert all(m["ranks"]["semantic"] is None for m in response["memories"])
