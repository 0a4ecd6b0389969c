"""Exactness under concurrency, with real threads (each with its own database connection)."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.test import override_settings

from memoryapp.models import MemoryVersion
from tests.support import make_agent, on_postgres

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not on_postgres(), reason="backend: row locks and real concurrency need PostgreSQL"),
]


def run_parallel(n: int, fn):
    def wrapped(i):
        try:
            return fn(i)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=min(n, 32)) as pool:
        return list(pool.map(wrapped, range(n)))


def test_fifty_remembers_on_one_key_leave_one_current_version_and_a_gap_free_chain(world):
    agent = make_agent(world.editor)
    statuses = run_parallel(
        50, lambda i: agent.remember(namespace="prefs", key="editor", text=f"choice {i}").status_code
    )
    assert statuses == [201] * 50
    chain = list(MemoryVersion.objects.filter(member=world.editor, namespace="prefs", key="editor").order_by("version"))
    assert [v.version for v in chain] == list(range(1, 51))
    assert sum(1 for v in chain if v.valid_to is None) == 1
    for older, newer in zip(chain, chain[1:]):
        assert older.valid_to == newer.valid_from


@pytest.mark.parametrize("backend", ["redis", "database"])
def test_exactly_120_of_200_simultaneous_remembers_succeed(world, backend):
    with override_settings(RATE_LIMIT_BACKEND=backend):
        agent = make_agent(world.editor)
        statuses = run_parallel(200, lambda i: agent.remember(namespace="n", text=f"note {i}").status_code)
    assert statuses.count(201) == 120
    assert statuses.count(429) == 80
    assert MemoryVersion.objects.filter(member=world.editor).count() == 120


@override_settings(MAX_VERSIONS_PER_MEMBER=10)
def test_the_cap_is_exact_under_concurrency(world):
    agents = [make_agent(world.editor) for _ in range(3)]
    statuses = run_parallel(30, lambda i: agents[i % 3].remember(namespace="n", text=f"note {i}").status_code)
    assert statuses.count(201) == 10 and statuses.count(409) == 20
    assert MemoryVersion.objects.filter(member=world.editor).count() == 10


def test_concurrent_forgets_of_one_memory_write_one_receipt(world):
    from retention.models import DeletionReceipt

    agent = make_agent(world.editor)
    memory_id = agent.remember(namespace="n", key="k", text="to forget").json()["memory"]["id"]
    statuses = run_parallel(8, lambda i: agent.forget(memoryId=memory_id).status_code)
    assert statuses.count(200) == 1 and statuses.count(404) == 7
    assert DeletionReceipt.objects.filter(operation="forget").count() == 1


def test_simultaneous_erases_in_one_workspace_never_fork_its_receipt_chain(world):
    """Sixteen forgets and member deletes at once: the chain head's row lock serialises the
    appends, so positions are 1…16 with no gap or duplicate and every link verifies."""
    from retention import receipts as chain
    from retention.models import DeletionReceipt
    from tests.support import client_for

    agents = [make_agent(member) for member in (world.owner, world.editor)]
    ids = [
        agents[i % 2].remember(namespace="n", key=f"k{i}", text=f"note {i}").json()["memory"]["id"] for i in range(16)
    ]

    def erase(i):
        if i % 4 == 3:  # a member's delete from the pages' API, alongside the agents' forgets
            member = (world.owner, world.editor)[i % 2]
            return (
                client_for(member)
                .delete(f"/api/w/{world.workspace.pk}/ask-history/agent-memories/{ids[i]}")
                .status_code
            )
        return agents[i % 2].forget(memoryId=ids[i]).status_code

    assert run_parallel(16, erase) == [200] * 16
    receipts = list(DeletionReceipt.objects.filter(workspace_ref=world.workspace.pk).order_by("chain_seq"))
    assert [r.chain_seq for r in receipts] == list(range(1, 17))
    report = chain.verify_chain(world.workspace.pk)
    assert report["intact"] is True and report["headSeq"] == 16
