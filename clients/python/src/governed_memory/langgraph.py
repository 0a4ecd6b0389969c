"""Governed memory as LangGraph's long-term store: `GovernedStore`, a `langgraph.store.base.BaseStore`.

    pip install './clients/python[langgraph]'      # from the project's checkout

    from governed_memory.langgraph import GovernedStore
    graph = builder.compile(store=GovernedStore())      # GAM_URL / GAM_TOKEN

A namespace tuple is the dotted namespace string (exact both ways: LangGraph labels hold no period),
a key is a key, and a value is `{"text", "details"?, "kind"?}` — any other key is refused
(`ValueError`) before anything is sent. What you read back is masked, with the server's `"memory"`
object beside it (read-only, ignored when put back). `put` on a key stores a new version; `delete`
forgets every version, with a deletion receipt. `search` applies LangGraph's hierarchical prefix
here; with a query it is the server's recall, and when the prefix spans several namespaces whose
ranking the server's 50 do not cover it raises `PrefixSearchUnsupported` rather than answer a
partial ranking as the whole. TTL is not supported: retention is the workspace owner's rule.

The mapping, its limits and every case: docs/clients.md "LangGraph store".
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
except ImportError as exc:  # pragma: no cover - exercised by installing without the extra
    raise ImportError(
        "governed_memory.langgraph needs LangGraph: pip install './clients/python[langgraph]' (from the project's "
        "checkout)"
    ) from exc

from governed_memory.client import AsyncMemoryClient, MemoryClient
from governed_memory.errors import GovernedMemoryError, MemoryNotFound
from governed_memory.fence import render_memories
from governed_memory.models import Memory, RecalledMemory

VALUE_KEYS = frozenset({"text", "details", "kind"})
READ_ONLY_KEYS = frozenset({"memory"})
RECALL_MAX = 50
LIST_PAGE = 100


def namespace_string(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def namespace_tuple(namespace: str) -> tuple[str, ...]:
    return tuple(namespace.split("."))


def under(namespace: str, prefix: tuple[str, ...]) -> bool:
    """Whether the namespace string lies under the LangGraph prefix (label by label: "ab" is not
    under ("a",))."""
    return namespace_tuple(namespace)[: len(prefix)] == tuple(prefix)


class PrefixSearchUnsupported(GovernedMemoryError, NotImplementedError):
    """A ranked search (`query=`) under a prefix that spans several namespaces, when the server's
    one ranking across namespaces (at most 50) holds too few items under the prefix: the ranking
    under the prefix is not known, so nothing is answered rather than a part of it."""


def remember_arguments(value: Mapping[str, Any]) -> dict[str, Any]:
    """A LangGraph value as remember's text, details and kind; refuses what it cannot hold."""
    if not isinstance(value, Mapping):
        raise ValueError("A governed memory value is a mapping: {'text': str, 'details'?: [str], 'kind'?: str}.")
    unknown = sorted(set(value) - VALUE_KEYS - READ_ONLY_KEYS)
    if unknown:
        raise ValueError(
            f"A governed memory value holds text, details and kind only; not {', '.join(map(repr, unknown))} "
            "(docs/clients.md)."
        )
    text = value.get("text")
    if not isinstance(text, str):
        raise ValueError("A governed memory value needs 'text' (a string).")
    return {"text": text, "details": value.get("details"), "kind": value.get("kind")}


def item_of(memory: Memory) -> Item | SearchItem:
    value = {"text": memory.text, "details": list(memory.details), "kind": memory.kind, "memory": dict(memory.raw)}
    key = memory.key if memory.key is not None else memory.id  # a memory written without a key elsewhere
    namespace = namespace_tuple(memory.namespace)
    if isinstance(memory, RecalledMemory):
        return SearchItem(namespace, key, value, memory.created_at, memory.created_at, score=memory.score)
    return Item(value=value, key=key, namespace=namespace, created_at=memory.created_at, updated_at=memory.created_at)


def search_item(item: Item) -> SearchItem:
    return (
        item
        if isinstance(item, SearchItem)
        else SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at)
    )


_MISSING = object()


def _lookup(value: Mapping[str, Any], path: str) -> Any:
    current: Any = value
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return _MISSING
        current = current[part]
    return current


def _compare(actual: Any, operator: str, expected: Any) -> bool:
    if operator == "$eq":
        return actual == expected
    if operator == "$ne":
        return actual != expected
    if actual is _MISSING or actual is None:
        return False
    try:
        return {
            "$gt": actual > expected,
            "$gte": actual >= expected,
            "$lt": actual < expected,
            "$lte": actual <= expected,
        }[operator]
    except TypeError:
        return False
    except KeyError:
        raise ValueError(f"Unsupported filter operator {operator!r}") from None


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    for path, condition in (filter or {}).items():
        actual = _lookup(value, path)
        if isinstance(condition, Mapping) and condition and all(str(k).startswith("$") for k in condition):
            if not all(_compare(actual, op, expected) for op, expected in condition.items()):
                return False
        elif actual is _MISSING or actual != condition:
            return False
    return True


def _fits(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part))


def select_namespaces(namespaces: Iterable[str], op: ListNamespacesOp) -> list[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for name in namespaces:
        namespace = namespace_tuple(name)
        if all(_fits(namespace, condition) for condition in op.match_conditions or ()):
            found.add(namespace[: op.max_depth] if op.max_depth is not None else namespace)
    return sorted(found)[op.offset : op.offset + op.limit]


def render_items(items: Iterable[Item]) -> str:
    """Items from this store fenced for a prompt, exactly like the MCP text output."""
    return render_memories(item.value["memory"] for item in items)


class GovernedStore(BaseStore):
    """LangGraph's `BaseStore` over the governed agent API (one credential, one member).

    Pass a `MemoryClient` and/or an `AsyncMemoryClient`, or let it make them from `base_url`,
    `token` (else GAM_URL / GAM_TOKEN). Sync methods use the sync client, async ones the async
    client; operations of one batch run in order, so a get after a put sees it."""

    supports_ttl = False

    def __init__(
        self,
        client: MemoryClient | None = None,
        *,
        async_client: AsyncMemoryClient | None = None,
        base_url: str | None = None,
        token: str | None = None,
    ):
        self._settings = {"base_url": base_url, "token": token}
        self._client = client
        self._async_client = async_client
        if client is None and async_client is None:
            self._client = MemoryClient(base_url, token)

    @property
    def client(self) -> MemoryClient:
        if self._client is None:
            self._client = MemoryClient(
                self._async_client.base_url if self._async_client else self._settings["base_url"],
                self._settings["token"] or _token_of(self._async_client),
            )
        return self._client

    @property
    def async_client(self) -> AsyncMemoryClient:
        if self._async_client is None:
            self._async_client = AsyncMemoryClient(
                self.client.base_url, self._settings["token"] or _token_of(self.client)
            )
        return self._async_client

    render = staticmethod(render_items)

    # --- sync ---------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(op) for op in ops]

    def _run(self, op: Op) -> Result:
        memory = self.client
        if isinstance(op, GetOp):
            page = memory.list_page(namespace=namespace_string(op.namespace), key=str(op.key), limit=1)
            return item_of(page.memories[0]) if page.memories else None
        if isinstance(op, PutOp):
            _no_ttl(op)
            if op.value is None:
                try:
                    memory.forget(namespace=namespace_string(op.namespace), key=str(op.key))
                except MemoryNotFound:
                    pass  # deleting what is not there is a no-op, as in every BaseStore
            else:
                memory.remember(namespace_string(op.namespace), key=str(op.key), **remember_arguments(op.value))
            return None
        if isinstance(op, SearchOp):
            prefix = tuple(op.namespace_prefix)
            if op.query:
                found = memory.recall(op.query, limit=RECALL_MAX).memories
                answer = _ranked_under(found, prefix, op)
                if answer is None:
                    exact = _one_namespace_under(
                        {m.namespace for m in memory.list(page_size=LIST_PAGE)}, prefix, op, len(found)
                    )
                    answer = _page(memory.recall(op.query, namespace=exact, limit=_recall_limit(op)).memories, op)
                return answer
            return _scan((item_of(m) for m in memory.list(page_size=LIST_PAGE) if under(m.namespace, prefix)), op)
        if isinstance(op, ListNamespacesOp):
            return select_namespaces({m.namespace for m in memory.list(page_size=LIST_PAGE)}, op)
        raise TypeError(f"Unknown operation {type(op).__name__}")

    # --- async --------------------------------------------------------------------------------
    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return [await self._arun(op) for op in ops]

    async def _arun(self, op: Op) -> Result:
        memory = self.async_client
        if isinstance(op, GetOp):
            page = await memory.list_page(namespace=namespace_string(op.namespace), key=str(op.key), limit=1)
            return item_of(page.memories[0]) if page.memories else None
        if isinstance(op, PutOp):
            _no_ttl(op)
            if op.value is None:
                try:
                    await memory.forget(namespace=namespace_string(op.namespace), key=str(op.key))
                except MemoryNotFound:
                    pass  # deleting what is not there is a no-op, as in every BaseStore
            else:
                await memory.remember(namespace_string(op.namespace), key=str(op.key), **remember_arguments(op.value))
            return None
        if isinstance(op, SearchOp):
            prefix = tuple(op.namespace_prefix)
            if op.query:
                found = (await memory.recall(op.query, limit=RECALL_MAX)).memories
                answer = _ranked_under(found, prefix, op)
                if answer is None:
                    exact = _one_namespace_under(
                        {m.namespace async for m in memory.list(page_size=LIST_PAGE)}, prefix, op, len(found)
                    )
                    answer = _page(
                        (await memory.recall(op.query, namespace=exact, limit=_recall_limit(op))).memories, op
                    )
                return answer
            out: list[SearchItem] = []
            skipped = 0
            async for found in memory.list(page_size=LIST_PAGE):
                if not under(found.namespace, prefix):
                    continue
                item = item_of(found)
                if not matches(item.value, op.filter):
                    continue
                if skipped < op.offset:
                    skipped += 1
                    continue
                out.append(search_item(item))
                if len(out) >= op.limit:
                    break
            return out
        if isinstance(op, ListNamespacesOp):
            return select_namespaces({m.namespace async for m in memory.list(page_size=LIST_PAGE)}, op)
        raise TypeError(f"Unknown operation {type(op).__name__}")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        if self._async_client is not None:
            await self._async_client.aclose()
        if self._client is not None:
            await asyncio.to_thread(self._client.close)


def _token_of(client: MemoryClient | AsyncMemoryClient | None) -> str | None:
    return client._headers["Authorization"].removeprefix("Bearer ") if client is not None else None


def _no_ttl(op: PutOp) -> None:
    if op.ttl is not None:
        raise NotImplementedError("GovernedStore does not support TTL: retention is set by the workspace owner.")


def _recall_limit(op: SearchOp) -> int:
    return RECALL_MAX if op.filter else max(1, min(RECALL_MAX, op.offset + op.limit))


def _ranked_under(found: list[RecalledMemory], prefix: tuple[str, ...], op: SearchOp) -> list[SearchItem] | None:
    """The page of the server's ranking across namespaces (`found`, asked for RECALL_MAX) that lies
    under the prefix, or None when it may be incomplete: the server ranked as many as it could
    (RECALL_MAX), and fewer of them than the page needs (a filter needs them all) are under it."""
    kept = [m for m in found if under(m.namespace, prefix)]
    complete = (
        len(found) < RECALL_MAX or len(kept) == len(found) or (not op.filter and len(kept) >= op.offset + op.limit)
    )
    return _page(kept, op) if complete else None


def _one_namespace_under(namespaces: Iterable[str], prefix: tuple[str, ...], op: SearchOp, ranked: int) -> str:
    """The one namespace under the prefix, to be recalled exactly; else PrefixSearchUnsupported."""
    inside = sorted(n for n in namespaces if under(n, prefix))
    if len(inside) <= 1:
        return inside[0] if inside else namespace_string(prefix)
    raise PrefixSearchUnsupported(
        f"search({prefix!r}, query=…) spans {len(inside)} namespaces "
        f"({', '.join(inside[:5])}{', …' if len(inside) > 5 else ''}): the server ranks at most {RECALL_MAX} memories "
        f"across namespaces ({ranked} ranked) and too few of them lie under the prefix for offset {op.offset} + limit "
        f"{op.limit}{' with a filter' if op.filter else ''}. Search one of those namespaces, search without a query "
        "(every item under the prefix, newest first), or ask a narrower query."
    )


def _page(found: list[RecalledMemory], op: SearchOp) -> list[SearchItem]:
    items = [item_of(m) for m in found]
    return [i for i in items if matches(i.value, op.filter)][op.offset : op.offset + op.limit]


def _scan(items: Iterable[Item], op: SearchOp) -> list[SearchItem]:
    out: list[SearchItem] = []
    skipped = 0
    for item in items:
        if not matches(item.value, op.filter):
            continue
        if skipped < op.offset:
            skipped += 1
            continue
        out.append(search_item(item))
        if len(out) >= op.limit:
            break
    return out
