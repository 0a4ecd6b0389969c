"""How many times one agent recall goes to the databases (issue 32, build item 2): the data
store, the key store, and the rate limiter's table when the limiter is the database one. Counted
with Django's query log of both aliases; on PostgreSQL psycopg's own cursor is counted as well,
so a statement sent on a raw cursor (outside Django's log) cannot hide from the count."""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

from django.db import connections
from django.test.utils import CaptureQueriesContext

from memoryapp.ratelimit import DatabaseRateLimiter, get_limiter
from tests.support import make_agent, on_postgres

# The credential (with its member, user, workspace and the member's usable credentials), the
# candidates with their index entries and the columns the answer needs, their data keys (key
# store), the access-log entry (one statement before the answer, which also checks the versions are
# still stored: tests/access_log/test_entry_durability.py). The database rate limiter adds its one statement.
MOST = 4


@contextmanager
def counted():
    sent: list[str] = []
    with ExitStack() as stack:
        captured = [stack.enter_context(CaptureQueriesContext(connections[alias])) for alias in ("default", "keyring")]
        if on_postgres():
            import psycopg

            original = psycopg.Cursor.execute

            def execute(self, query, *args, **kwargs):
                sent.append(query if isinstance(query, str) else query.as_string(self))
                return original(self, query, *args, **kwargs)

            stack.callback(setattr, psycopg.Cursor, "execute", original)
            psycopg.Cursor.execute = execute
        logged: list[str] = []
        yield logged, sent
        logged.extend(q["sql"] for c in captured for q in c.captured_queries)


def most_for_limiter() -> int:
    return MOST + 1 if isinstance(get_limiter(), DatabaseRateLimiter) else MOST


def test_one_recall_goes_to_the_databases_at_most_four_times(world):
    agent = make_agent(world.editor)
    for i in range(12):
        assert (
            agent.remember(
                namespace="prefs", key=f"k{i}", text=f"Note {i}: prefers aisle seats on trains to Osaka"
            ).status_code
            == 201
        )
    agent.recall(query="warm the credential's last use")  # last_used_at is written at most once a minute
    with counted() as (logged, sent):
        response = agent.recall(query="which seat on the train to Osaka")
    assert response.status_code == 200 and len(response.json()["memories"]) == 10
    assert max(len(logged), len(sent)) <= most_for_limiter(), (
        logged,
        sent,
    )  # the key store reads on a raw psycopg cursor


def test_an_mcp_recall_goes_as_few_times(world):
    from memoryapp import mcp

    agent = make_agent(world.editor)
    for i in range(12):
        assert (
            agent.remember(
                namespace="prefs", key=f"k{i}", text=f"Note {i}: prefers window seats on trains to Kyoto"
            ).status_code
            == 201
        )
    mcp.run_operation(agent.token, "recall", {"query": "warm"})
    with counted() as (logged, _sent):
        result = mcp.run_operation(agent.token, "recall", {"query": "which seat on the train to Kyoto"})
    assert not result.is_error and len(result.structured_content["memories"]) == 10
    assert max(len(logged), len(_sent)) <= most_for_limiter(), logged


def test_a_memory_citing_a_deleted_document_is_not_recalled_among_memories_that_cite_nothing(world, docs):
    """The citation re-check is skipped only for candidates that cite nothing (read from the
    citation rows with the candidates): the one that cites is still checked, and hidden."""
    from governance.models import Document

    _collection, document, passages = docs
    agent = make_agent(world.editor)
    for i in range(5):
        assert agent.remember(namespace="prefs", text=f"Note {i}: orders ship from Osaka on Mondays").status_code == 201
    cited = agent.remember(
        namespace="prefs", text="Orders ship from Osaka, says the handbook", citations=[passages[0].pk]
    )
    assert cited.status_code == 201, cited.json()
    assert cited.json()["memory"]["id"] in {
        m["id"] for m in agent.recall(query="orders ship from Osaka").json()["memories"]
    }
    Document.objects.filter(pk=document.pk).delete()  # gone before any cascade reached the memory
    body = agent.recall(query="orders ship from Osaka").json()
    assert cited.json()["memory"]["id"] not in {m["id"] for m in body["memories"]}
    assert body["hidden"] == 1 and len(body["memories"]) == 5
