"""The client against the live product: round trips, masking, paging, the turn endpoint."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from governed_memory import AsyncMemoryClient, Memory, MemoryClient, RecalledMemory, errors
from live_server import LiveServer, World


def test_remember_recall_list_forget_round_trip(client: MemoryClient, namespace: str):
    remembered = client.remember(
        namespace,
        "Prefers vim over emacs for quick edits",
        key="editor",
        kind="preference",
        details=["uses vim keybindings everywhere"],
    )
    memory = remembered.memory
    assert isinstance(memory, Memory) and remembered.superseded == 0
    assert (memory.namespace, memory.key, memory.kind, memory.version) == (namespace, "editor", "preference", 1)
    assert memory.details == ["uses vim keybindings everywhere"]
    assert (memory.trust, memory.evidence, memory.type) == ("untrusted", False, "memory")
    assert memory.created_at.tzinfo is not None and memory.expires_at > memory.created_at

    recalled = client.recall("which text editor does she like?", namespace=namespace)
    assert [m.id for m in recalled] == [memory.id]
    best = recalled.memories[0]
    assert isinstance(best, RecalledMemory) and best.score > 0 and (best.trust, best.evidence) == ("untrusted", False)
    assert any(rank is not None for rank in (best.ranks.bm25, best.ranks.semantic, best.ranks.entity))

    assert [m.id for m in client.list(namespace=namespace)] == [memory.id]
    assert [m.id for m in client.list(namespace=namespace, key="editor")] == [memory.id]

    forgotten = client.forget(namespace=namespace, key="editor")
    assert forgotten.forgotten == 1 and forgotten.receipt_id
    assert list(client.list(namespace=namespace)) == []
    assert client.recall("which text editor", namespace=namespace).memories == []


def test_same_key_supersedes_and_as_of_sees_the_old_version(client: MemoryClient, namespace: str):
    first = client.remember(namespace, "Drinks green tea", key="drink").memory
    between = datetime.now(timezone.utc)
    time.sleep(0.01)  # asOf is an instant: the second version must start after it
    second = client.remember(namespace, "Drinks jasmine tea", key="drink")
    assert second.superseded == 1 and second.memory.version == 2
    assert [m.text for m in client.list(namespace=namespace)] == ["Drinks jasmine tea"]
    assert [m.id for m in client.list(namespace=namespace, as_of=between)] == [first.id]
    assert client.forget(first.id).forgotten == 2  # any version's id forgets the whole key


def test_masking_is_visible_in_every_result(client: MemoryClient, namespace: str):
    memory = client.remember(
        namespace, "Reach Ada at ada.lovelace@example.com or +81 90-1234-5678", key="contact"
    ).memory
    assert "example.com" not in memory.text and "1234" not in memory.text
    assert "[EMAIL]" in memory.text and "[PHONE]" in memory.text
    assert set(memory.masked) >= {"EMAIL", "PHONE"}
    listed = next(iter(client.list(namespace=namespace)))
    recalled = client.recall("how do I reach Ada", namespace=namespace).memories[0]
    for seen in (listed, recalled):
        assert seen.text == memory.text and seen.masked == memory.masked
        assert "ada.lovelace" not in seen.fenced()


def test_list_follows_cursors_over_250_memories(live: LiveServer, world: World, namespace: str):
    pager = world.member("pager")
    # 120 remembers per credential per hour: three credentials of the same member write 250.
    tokens = [pager.credential() for _ in range(3)]
    written: list[str] = []
    for share, token in zip((100, 100, 50), tokens):
        with MemoryClient(live.url(), token) as writer:
            for _ in range(share):
                written.append(
                    writer.remember(
                        namespace, f"Paging note number {len(written)} about topic {len(written) % 7}"
                    ).memory.id
                )
    with MemoryClient(live.url(), tokens[0]) as reader:
        pages = list(reader.list_pages(namespace=namespace, page_size=40))
        seen = [m.id for page in pages for m in page.memories]
        assert len(pages) == 7 and all(page.next_cursor for page in pages[:-1]) and pages[-1].next_cursor is None
        assert seen == list(reversed(written))  # newest first, each exactly once
        assert [m.id for m in reader.list(namespace=namespace)] == seen  # default page size (20): 13 pages


def test_async_client_round_trip(live: LiveServer, editor_token: str, namespace: str):
    import anyio

    async def scenario() -> None:
        async with AsyncMemoryClient(live.url(), editor_token) as memory:
            stored = [
                (await memory.remember(namespace, f"Async note {i} on shipping cutoffs", key=f"k{i}")).memory
                for i in range(3)
            ]
            listed = [m.id async for m in memory.list(namespace=namespace, page_size=2)]
            assert listed == [m.id for m in reversed(stored)]
            recalled = await memory.recall("shipping cutoffs", namespace=namespace)
            assert {m.id for m in recalled} == {m.id for m in stored}
            assert (await memory.forget(stored[0].id)).forgotten == 1
            with pytest.raises(errors.MemoryNotFound):
                await memory.forget(stored[0].id)

    anyio.run(scenario)


def test_base_url_and_token_come_from_the_environment(
    live: LiveServer, editor_token: str, namespace: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("GAM_URL", live.url())
    monkeypatch.setenv("GAM_TOKEN", editor_token)
    with MemoryClient() as memory:
        assert memory.remember(namespace, "Configured from GAM_URL and GAM_TOKEN").memory.namespace == namespace
    monkeypatch.delenv("GAM_TOKEN")
    with pytest.raises(errors.ConfigurationError):
        MemoryClient()
    monkeypatch.setenv("GAM_TOKEN", "gam_unknown_token")
    with MemoryClient(token=editor_token) as memory:  # an argument wins over the environment
        assert list(memory.list(namespace=namespace))


def test_a_conversation_turn_is_consolidated_by_the_worker(live: LiveServer, world: World):
    member = world.member("turns")
    owner = world.main.owner
    agent = owner.api("POST", "agents", {"name": "support bot", "vectorMemory": True})
    assert agent.status_code == 201, agent.text
    live.manage(["grant_credits", world.main.id, "100"])
    with MemoryClient(live.url(), member.credential()) as memory:
        turn = memory.submit_turn(
            agent.json()["id"],
            "conv-1",
            [("user", "Please remember that I prefer aisle seats on long flights."), ("assistant", "Noted.")],
        )
        assert turn.queued and turn.reason is None
        skipped = memory.submit_turn(
            agent.json()["id"], "conv-2", [{"role": "user", "content": "Mail me at ada@example.com"}]
        )
        assert (skipped.status, skipped.reason) == ("skipped", "personal_data") and skipped.personal_data[0][
            "kinds"
        ] == ["EMAIL"]
        deadline = time.monotonic() + 90  # a deadlock guard, not a timing assertion
        while not (extracted := [m for m in memory.list(namespace="assistant") if m.source == "ai_extracted"]):
            assert time.monotonic() < deadline, live.log("worker")[-2000:]
            time.sleep(0.5)
        assert "aisle" in extracted[0].text and extracted[0].trust == "untrusted"
        with pytest.raises(errors.AgentNotFound):
            memory.submit_turn("999999999", "conv-3", [("user", "hello")])
        usage = memory.report_reply_usage("conv-1", "offline-rules-v1", 120, 30, memory_tokens=20)
        assert usage["conversationId"] == "conv-1" and usage["category"]


def test_the_product_runs_on_the_backend_the_environment_names(live: LiveServer):
    import os

    import httpx

    ready = httpx.get(f"{live.url()}/readyz", timeout=10).json()
    assert ready["checks"]["database"]["vendor"] == ("postgresql" if os.environ.get("DATABASE_URL") else "sqlite")
