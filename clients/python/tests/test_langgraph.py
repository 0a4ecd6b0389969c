"""GovernedStore against the live product: LangGraph's BaseStore contract (LangGraph publishes no
store conformance suite — `langgraph-checkpoint-conformance` covers checkpointers only — so these
follow the behaviour its own InMemoryStore tests pin down), the mapping's limits, and a graph that
writes in one run and recalls in the next."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import anyio
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    PutOp,
    SearchItem,
    SearchOp,
)

from governed_memory import AsyncMemoryClient, MemoryClient, errors
from governed_memory.langgraph import GovernedStore, PrefixSearchUnsupported, render_items
from live_server import LiveServer, World


@pytest.fixture
def store(live: LiveServer, world: World) -> GovernedStore:
    return GovernedStore(MemoryClient(live.url(), world.member("graph").credential()))


def test_put_get_search_delete(store: GovernedStore, namespace: str):
    ns = (namespace, "prefs")
    store.put(
        ns,
        "editor",
        {"text": "Prefers vim for quick edits", "kind": "preference", "details": ["keybindings everywhere"]},
    )
    item = store.get(ns, "editor")
    assert isinstance(item, Item) and (item.namespace, item.key) == (ns, "editor")
    assert (
        item.value["text"] == "Prefers vim for quick edits"
        and item.value["kind"] == "preference"
        and item.value["details"] == ["keybindings everywhere"]
    )
    assert item.value["memory"]["trust"] == "untrusted" and item.value["memory"]["evidence"] is False
    assert item.created_at.tzinfo is not None

    found = store.search(ns, query="which text editor")
    assert [i.key for i in found] == ["editor"] and isinstance(found[0], SearchItem) and found[0].score > 0
    listed = store.search(ns)  # no query: a list, newest first, unranked
    assert [i.key for i in listed] == ["editor"] and listed[0].score is None

    store.put(ns, "editor", {**item.value, "text": "Prefers helix now"})  # the read-only "memory" entry is ignored
    assert store.get(ns, "editor").value["text"] == "Prefers helix now"
    assert store.get(ns, "editor").value["memory"]["version"] == 2

    store.delete(ns, "editor")
    assert store.get(ns, "editor") is None and store.search(ns) == []
    store.delete(ns, "editor")  # deleting what is not there is a no-op
    assert store.get(ns, "missing") is None


def test_batch_runs_in_order_and_answers_one_result_per_op(store: GovernedStore, namespace: str):
    ns = (namespace,)
    results = store.batch(
        [
            PutOp(ns, "a", {"text": "Alpha note about shipping"}),
            GetOp(ns, "a"),
            PutOp(ns, "b", {"text": "Beta note about invoices"}),
            SearchOp(ns, None, 10, 0, None),
            PutOp(ns, "a", None),
            GetOp(ns, "a"),
            ListNamespacesOp(None, None, 100, 0),
        ]
    )
    assert results[0] is None and results[1].value["text"] == "Alpha note about shipping"
    assert [i.key for i in results[3]] == ["b", "a"] and results[5] is None
    assert ns in results[6]


def test_async_variants(live: LiveServer, world: World, namespace: str):
    store = GovernedStore(async_client=AsyncMemoryClient(live.url(), world.member("graph").credential()))

    async def scenario() -> None:
        ns = (namespace, "async")
        await store.aput(ns, "tea", {"text": "Drinks jasmine tea in the afternoon"})
        assert (await store.aget(ns, "tea")).value["text"] == "Drinks jasmine tea in the afternoon"
        assert [i.key for i in await store.asearch(ns, query="what tea")] == ["tea"]
        assert ns in await store.alist_namespaces(prefix=(namespace,))
        results = await store.abatch([GetOp(ns, "tea"), PutOp(ns, "tea", None), GetOp(ns, "tea")])
        assert results[0].key == "tea" and results[2] is None

    anyio.run(scenario)


def test_search_offset_limit_and_filters(store: GovernedStore, namespace: str):
    ns = (namespace,)
    for index, kind in enumerate(["fact", "preference", "fact", "instruction", "fact"]):
        store.put(ns, f"k{index}", {"text": f"Note {index} about the warehouse", "kind": kind})
    newest_first = [i.key for i in store.search(ns, limit=10)]
    assert newest_first == ["k4", "k3", "k2", "k1", "k0"]
    assert [i.key for i in store.search(ns, limit=2, offset=1)] == ["k3", "k2"]
    assert [i.key for i in store.search(ns, filter={"kind": "fact"})] == ["k4", "k2", "k0"]
    assert [i.key for i in store.search(ns, filter={"kind": {"$ne": "fact"}})] == ["k3", "k1"]
    assert [i.key for i in store.search(ns, filter={"memory.version": {"$gte": 1}, "kind": "instruction"})] == ["k3"]
    ranked = store.search(ns, query="warehouse note", filter={"kind": "fact"}, limit=2)
    assert len(ranked) == 2 and all(i.value["kind"] == "fact" and i.score > 0 for i in ranked)


def test_list_namespaces_with_prefix_suffix_wildcards_depth(store: GovernedStore, namespace: str):
    for path in [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "c", "f"), ("b", "a", "f"), ("users", "one")]:
        store.put((namespace, *path), "k", {"text": f"note in {'/'.join(path)}"})
    root = (namespace,)
    assert store.list_namespaces(prefix=(namespace, "a")) == [
        (namespace, "a", "b", "c"),
        (namespace, "a", "b", "d", "e"),
        (namespace, "a", "c", "f"),
    ]
    assert store.list_namespaces(prefix=root, suffix=("f",)) == [(namespace, "a", "c", "f"), (namespace, "b", "a", "f")]
    assert store.list_namespaces(prefix=(namespace, "*", "a")) == [(namespace, "b", "a", "f")]
    assert store.list_namespaces(prefix=root, max_depth=2) == [(namespace, "a"), (namespace, "b"), (namespace, "users")]
    assert store.list_namespaces(prefix=root, limit=2, offset=1) == [
        (namespace, "a", "b", "d", "e"),
        (namespace, "a", "c", "f"),
    ]
    assert store.list_namespaces(prefix=("nothing-here",)) == []


def test_the_mappings_limits(store: GovernedStore, namespace: str):
    ns = (namespace,)
    with pytest.raises(InvalidNamespaceError):
        store.put((namespace, "dotted.label"), "k", {"text": "x"})  # LangGraph's own rule, which makes the join exact
    with pytest.raises(InvalidNamespaceError):
        store.put((), "k", {"text": "x"})
    with pytest.raises(ValueError, match="text, details and kind only"):
        store.put(ns, "k", {"text": "x", "score": 3})
    with pytest.raises(ValueError, match="text, details and kind only"):
        store.put(ns, "k", {"content": "LangMem-style values are not mapped"})
    with pytest.raises(ValueError, match="needs 'text'"):
        store.put(ns, "k", {"details": ["no text"]})
    with pytest.raises(NotImplementedError):
        store.put(ns, "k", {"text": "x"}, ttl=5)
    uuid_key = "550e8400-e29b-41d4-a716-446655440000"  # 12 digits in a row: an identifier, not a phone number
    store.put(ns, uuid_key, {"text": "LangGraph's own examples key items by uuid4"})
    assert store.get(ns, uuid_key).key == uuid_key
    with pytest.raises(errors.PersonalData, match="PHONE"):  # str() carries the kinds found
        store.put(ns, f"{uuid_key}_+81 90-1234-5678", {"text": "a phone number beside it is still refused"})
    with pytest.raises(errors.ValidationError):
        store.put(("x" * 65,), "k", {"text": "namespace over 64 characters"})
    store.put(ns, "contact", {"text": "Reach Ada at ada@example.com", "details": ["call +81 90-1234-5678"]})
    masked = store.get(ns, "contact")
    assert masked.value["text"] == "Reach Ada at [EMAIL]" and masked.value["details"] == ["call [PHONE]"]
    assert set(masked.value["memory"]["masked"]) == {"EMAIL", "PHONE"}
    fenced = render_items([masked])
    assert 'trust="untrusted" evidence="false">Reach Ada at [EMAIL]' in fenced and "ada@example.com" not in fenced


def test_search_finds_every_namespace_under_the_prefix_as_langgraph_does(store: GovernedStore, namespace: str):
    """LangGraph's namespace_prefix is a hierarchical path prefix: ("a",) finds ("a",) and
    ("a", "b"), not ("ab",). With and without a query, sync and async."""
    for path, key in [(("a",), "k1"), (("a", "b"), "k2"), (("ab",), "k3"), (("a", "b", "c"), "k4"), (("b", "a"), "k5")]:
        store.put((namespace, *path), key, {"text": f"Warehouse note {key} about pallets"})
    assert [i.key for i in store.search((namespace, "a"))] == ["k4", "k2", "k1"]
    assert [i.key for i in store.search((namespace, "a", "b"))] == ["k4", "k2"]
    assert [i.namespace for i in store.search((namespace, "a"), limit=1, offset=1)] == [(namespace, "a", "b")]
    ranked = store.search((namespace, "a"), query="warehouse pallets note")
    assert sorted(i.key for i in ranked) == ["k1", "k2", "k4"] and all(i.score > 0 for i in ranked)
    assert sorted(i.key for i in store.search((namespace,), query="warehouse pallets note")) == [
        "k1",
        "k2",
        "k3",
        "k4",
        "k5",
    ]

    async def scenario() -> tuple[list[str], list[str]]:
        listed = [i.key for i in await store.asearch((namespace, "a"))]
        found = sorted(i.key for i in await store.asearch((namespace, "a"), query="warehouse pallets note"))
        return listed, found

    assert anyio.run(scenario) == (["k4", "k2", "k1"], ["k1", "k2", "k4"])


def test_a_ranked_prefix_search_the_server_cannot_rank_is_refused_loudly(
    live: LiveServer, world: World, namespace: str
):
    """The server ranks at most 50 memories across namespaces and filters by one namespace only.
    When those 50 hold too few items under a prefix that spans several namespaces, the store
    raises PrefixSearchUnsupported instead of answering part of the ranking as the whole; under a
    prefix holding one namespace it recalls that namespace exactly."""
    store = GovernedStore(MemoryClient(live.url(), world.member("prefixes").credential()))
    for index in range(55):
        store.put(
            (namespace, "crowd"),
            f"c{index}",
            {"text": f"Shipping note {index}: shipping pallets leave the shipping dock"},
        )
    store.put((namespace, "few"), "f1", {"text": "A shipping remark"})
    store.put((namespace, "few", "deeper"), "f2", {"text": "Another shipping remark"})
    store.put((namespace, "one"), "o1", {"text": "One more shipping remark"})
    with pytest.raises(PrefixSearchUnsupported, match="spans 2 namespaces") as refused:
        store.search((namespace, "few"), query="shipping note pallets", limit=10)
    assert isinstance(refused.value, NotImplementedError)
    assert [i.key for i in store.search((namespace, "one"), query="shipping note pallets", limit=10)] == ["o1"]
    assert sorted(i.key for i in store.search((namespace, "few"))) == [
        "f1",
        "f2",
    ]  # without a query: every item under it

    async def scenario() -> None:
        with pytest.raises(PrefixSearchUnsupported):
            await store.asearch((namespace, "few"), query="shipping note pallets", limit=10)

    anyio.run(scenario)


class State(TypedDict, total=False):
    user_says: str
    question: str
    remembered: Annotated[list[str], operator.add]
    recalled: list[str]


def build_graph() -> StateGraph:
    def remember(state: State, *, store: BaseStore) -> State:
        if not state.get("user_says"):
            return {}
        store.put(("assistant-notes", "user"), "preference", {"text": state["user_says"], "kind": "preference"})
        return {"remembered": [state["user_says"]]}

    def recall(state: State, *, store: BaseStore) -> State:
        if not state.get("question"):
            return {}
        return {
            "recalled": [
                item.value["text"]
                for item in store.search(("assistant-notes", "user"), query=state["question"], limit=3)
            ]
        }

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder


def test_a_graph_writes_in_one_run_and_recalls_in_the_next(live: LiveServer, world: World):
    token = world.member("graph").credential(name="graph runs")
    first = build_graph().compile(store=GovernedStore(base_url=live.url(), token=token))
    out = first.invoke(
        {"user_says": "I prefer window seats and vegetarian meals on flights; email me at ada@example.com"}
    )
    assert out["remembered"] and not out.get("recalled")

    # A new process would start here: a new graph, a new store, only the server remembers.
    second = build_graph().compile(store=GovernedStore(base_url=live.url(), token=token))
    answer = second.invoke({"question": "what seat does the user like on flights?"})
    assert answer["recalled"][0] == "I prefer window seats and vegetarian meals on flights; email me at [EMAIL]"
