"""`MemoryClient` (sync) and `AsyncMemoryClient`: the agent API of governed agent memory.

Both send exactly the bodies of SPEC §3 (only the arguments given; the server validates, so its
rules and this client cannot drift), raise one exception class per error code
(`governed_memory.errors`), retry only where it is safe (`governed_memory.retry`) and answer the
typed results of `governed_memory.models`."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

import httpx

from governed_memory.errors import (
    ConfigurationError,
    ConnectionFailed,
    GovernedMemoryError,
    MalformedResponse,
    OutcomeUnknown,
    UnexpectedResponse,
    error_for,
)
from governed_memory.models import ForgetResult, ListPage, Memory, RecallResult, RememberResult, TurnResult
from governed_memory.retry import DEFAULT_RETRY, RetryPolicy

#: what the README's run command serves (`bash scripts/run.sh`)
DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = httpx.Timeout(10.0, connect=5.0)

PATHS = {
    "remember": "/api/agent/v1/memories/remember",
    "recall": "/api/agent/v1/memories/recall",
    "list": "/api/agent/v1/memories/list",
    "forget": "/api/agent/v1/memories/forget",
    "turn": "/api/agent/v1/conversations/turns",
    "reply_usage": "/api/agent/v1/usage/replies",
}

Message = Mapping[str, str] | tuple[str, str]


def _settings(base_url: str | None, token: str | None) -> tuple[str, str]:
    base_url = (base_url or os.environ.get("GAM_URL") or DEFAULT_URL).rstrip("/")
    token = token or os.environ.get("GAM_TOKEN")
    if not token:
        raise ConfigurationError(
            "No agent token: pass token=… or set GAM_TOKEN (a credential from Settings → Agent access, or the one "
            "scripts/run.sh prints)."
        )
    return base_url, token


def _body(**fields: Any) -> dict[str, Any]:
    """The given arguments under their JSON names; None means "not sent"."""
    body: dict[str, Any] = {}
    for name, value in fields.items():
        if value is None:
            continue
        if isinstance(value, datetime):
            value = value.isoformat()
        body[name] = value
    return body


def remember_body(
    namespace: str,
    text: str,
    key: str | None,
    collection_id: str | int | None,
    citations: Iterable[str | int] | None,
    source: str | None,
    kind: str | None,
    details: Iterable[str] | str | None,
) -> dict[str, Any]:
    return _body(
        namespace=namespace,
        text=text,
        key=key,
        collectionId=None if collection_id is None else str(collection_id),
        citations=None if citations is None else [str(c) for c in citations],
        source=source,
        kind=kind,
        details=details if details is None or isinstance(details, str) else list(details),
    )


def turn_body(
    agent_id: str | int, conversation_id: str, messages: Iterable[Message], anonymous: bool | None
) -> dict[str, Any]:
    def message(m: Message) -> dict[str, str]:
        return {"role": m[0], "content": m[1]} if isinstance(m, tuple) else {"role": m["role"], "content": m["content"]}

    return _body(
        agentId=str(agent_id),
        conversationId=conversation_id,
        anonymous=anonymous,
        messages=[message(m) for m in messages],
    )


def parse(response: httpx.Response) -> dict[str, Any]:
    """The answer's JSON, or the exception its error code names."""
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    if response.is_success:
        if not isinstance(data, dict):
            raise UnexpectedResponse(
                f"HTTP {response.status_code} without a JSON object",
                status=response.status_code,
                body=response.text[:500],
            )
        return data
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        raise UnexpectedResponse(
            f"HTTP {response.status_code} without the API's error body (is the base URL right?)",
            status=response.status_code,
            body=response.text[:500],
        )
    details = error.get("details")
    raise error_for(
        error["code"],
        str(error.get("message", "")),
        details if isinstance(details, dict) else {},
        status=response.status_code,
        headers={k.lower(): v for k, v in response.headers.items()},
    )


def decode(operation: str, result: Any, data: dict[str, Any]) -> Any:
    """A success answer as its typed result; an answer missing a field (or with one of another
    type) raises MalformedResponse naming it, never a bare KeyError or TypeError."""
    try:
        return result.from_json(data)
    except KeyError as exc:
        raise MalformedResponse(
            f"{operation}: the answer has no field {exc.args[0]!r}",
            operation=operation,
            field=str(exc.args[0]),
            body=json.dumps(data)[:500],
        ) from exc
    except (TypeError, ValueError, AttributeError) as exc:
        raise MalformedResponse(
            f"{operation}: the answer has a field of another type ({exc})",
            operation=operation,
            field=None,
            body=json.dumps(data)[:500],
        ) from exc


class _Usage:
    """The reply-usage answer's one field, the usage record (a plain dict)."""

    @staticmethod
    def from_json(data: dict[str, Any]) -> dict[str, Any]:
        return data["usage"]


def transport_error(operation: str, exc: httpx.TransportError) -> GovernedMemoryError:
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
        return ConnectionFailed(f"{operation}: could not connect ({type(exc).__name__}: {exc})", operation=operation)
    return OutcomeUnknown(
        f"{operation}: no answer ({type(exc).__name__}: {exc}); a write may or may not have been applied",
        operation=operation,
    )


class _Base:
    def __init__(
        self, base_url: str | None, token: str | None, timeout: float | httpx.Timeout | None, retry: RetryPolicy | None
    ):
        self.base_url, token = _settings(base_url, token)
        self.retry = retry or DEFAULT_RETRY
        self._timeout = (
            DEFAULT_TIMEOUT
            if timeout is None
            else (timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout))
        )
        self._headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json",
            "User-Agent": "governed-memory-python/0.1",
        }

    def _url(self, operation: str) -> str:
        return self.base_url + PATHS[operation]


class MemoryClient(_Base):
    """The agent API over one connection pool. `base_url` and `token` default to `GAM_URL`
    (else http://127.0.0.1:8000) and `GAM_TOKEN`; pass `http_client` to bring your own
    `httpx.Client` (proxies, event hooks); `retry=NO_RETRY` turns retries off."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = None,
        retry: RetryPolicy | None = None,
        http_client: httpx.Client | None = None,
    ):
        super().__init__(base_url, token, timeout, retry)
        self._http = http_client or httpx.Client(timeout=self._timeout)
        self._owns_http = http_client is None

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST one operation's body; the answer's JSON (retried per `self.retry`)."""
        attempt, waited = 1, 0.0
        while True:
            try:
                try:
                    response = self._http.post(
                        self._url(operation), json=body, headers=self._headers, timeout=self._timeout
                    )
                except httpx.TransportError as exc:
                    raise transport_error(operation, exc) from exc
                return parse(response)
            except GovernedMemoryError as error:
                delay = self.retry.delay(operation, error, attempt, waited)
                if delay is None:
                    raise
            self.retry.sleep(delay)
            attempt, waited = attempt + 1, waited + delay

    def remember(
        self,
        namespace: str,
        text: str,
        *,
        key: str | None = None,
        collection_id: str | int | None = None,
        citations: Iterable[str | int] | None = None,
        source: str | None = None,
        kind: str | None = None,
        details: Iterable[str] | str | None = None,
    ) -> RememberResult:
        return decode(
            "remember",
            RememberResult,
            self.call("remember", remember_body(namespace, text, key, collection_id, citations, source, kind, details)),
        )

    def recall(
        self,
        query: str,
        *,
        namespace: str | None = None,
        collection_id: str | int | None = None,
        as_of: datetime | str | None = None,
        limit: int | None = None,
    ) -> RecallResult:
        return decode(
            "recall",
            RecallResult,
            self.call(
                "recall",
                _body(
                    query=query,
                    namespace=namespace,
                    collectionId=None if collection_id is None else str(collection_id),
                    asOf=as_of,
                    limit=limit,
                ),
            ),
        )

    def list_page(
        self,
        *,
        namespace: str | None = None,
        key: str | None = None,
        collection_id: str | int | None = None,
        as_of: datetime | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ListPage:
        body = _body(
            namespace=namespace,
            key=key,
            collectionId=None if collection_id is None else str(collection_id),
            asOf=as_of,
            limit=limit,
            cursor=cursor,
        )
        return decode("list", ListPage, self.call("list", body))

    def list_pages(
        self,
        *,
        namespace: str | None = None,
        key: str | None = None,
        collection_id: str | int | None = None,
        as_of: datetime | str | None = None,
        page_size: int | None = None,
    ) -> Iterator[ListPage]:
        cursor: str | None = None
        while True:
            page = self.list_page(
                namespace=namespace, key=key, collection_id=collection_id, as_of=as_of, limit=page_size, cursor=cursor
            )
            yield page
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def list(
        self,
        *,
        namespace: str | None = None,
        key: str | None = None,
        collection_id: str | int | None = None,
        as_of: datetime | str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Memory]:
        """Every memory matching the filters, newest first, following `nextCursor` page by page
        (each page is fetched when the previous one is used up)."""
        for page in self.list_pages(
            namespace=namespace, key=key, collection_id=collection_id, as_of=as_of, page_size=page_size
        ):
            yield from page.memories

    def forget(
        self, memory_id: str | int | None = None, *, namespace: str | None = None, key: str | None = None
    ) -> ForgetResult:
        """Erase a memory (every version of its key): by `memory_id`, or by `namespace` and `key`."""
        return decode(
            "forget",
            ForgetResult,
            self.call(
                "forget", _body(memoryId=None if memory_id is None else str(memory_id), namespace=namespace, key=key)
            ),
        )

    def submit_turn(
        self, agent_id: str | int, conversation_id: str, messages: Iterable[Message], *, anonymous: bool | None = None
    ) -> TurnResult:
        """A conversation turn for consolidation into AI memories (`POST /api/agent/v1/conversations/turns`)."""
        return decode("turn", TurnResult, self.call("turn", turn_body(agent_id, conversation_id, messages, anonymous)))

    def report_reply_usage(
        self,
        conversation_id: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        *,
        memory_tokens: int | None = None,
    ) -> dict[str, Any]:
        """A reply's token usage, AI-memory tokens included in input (`POST /api/agent/v1/usage/replies`); the usage
        record."""
        body = _body(
            conversationId=conversation_id,
            model=model,
            inputTokens=input_tokens,
            outputTokens=output_tokens,
            memoryTokens=memory_tokens,
        )
        return decode("reply_usage", _Usage, self.call("reply_usage", body))


class AsyncMemoryClient(_Base):
    """`MemoryClient` for asyncio: the same operations, awaited; `list` is an async iterator."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = None,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
    ):
        super().__init__(base_url, token, timeout, retry)
        self._http = http_client or httpx.AsyncClient(timeout=self._timeout)
        self._owns_http = http_client is None

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def call(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        attempt, waited = 1, 0.0
        while True:
            try:
                try:
                    response = await self._http.post(
                        self._url(operation), json=body, headers=self._headers, timeout=self._timeout
                    )
                except httpx.TransportError as exc:
                    raise transport_error(operation, exc) from exc
                return parse(response)
            except GovernedMemoryError as error:
                delay = self.retry.delay(operation, error, attempt, waited)
                if delay is None:
                    raise
            await self.retry.async_sleep(delay)
            attempt, waited = attempt + 1, waited + delay

    async def remember(
        self,
        namespace: str,
        text: str,
        *,
        key: str | None = None,
        collection_id: str | int | None = None,
        citations: Iterable[str | int] | None = None,
        source: str | None = None,
        kind: str | None = None,
        details: Iterable[str] | str | None = None,
    ) -> RememberResult:
        return decode(
            "remember",
            RememberResult,
            await self.call(
                "remember", remember_body(namespace, text, key, collection_id, citations, source, kind, details)
            ),
        )

    async def recall(
        self,
        query: str,
        *,
        namespace: str | None = None,
        collection_id: str | int | None = None,
        as_of: datetime | str | None = None,
        limit: int | None = None,
    ) -> RecallResult:
        return decode(
            "recall",
            RecallResult,
            await self.call(
                "recall",
                _body(
                    query=query,
                    namespace=namespace,
                    collectionId=None if collection_id is None else str(collection_id),
                    asOf=as_of,
                    limit=limit,
                ),
            ),
        )

    async def list_page(
        self,
        *,
        namespace: str | None = None,
        key: str | None = None,
        collection_id: str | int | None = None,
        as_of: datetime | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ListPage:
        body = _body(
            namespace=namespace,
            key=key,
            collectionId=None if collection_id is None else str(collection_id),
            asOf=as_of,
            limit=limit,
            cursor=cursor,
        )
        return decode("list", ListPage, await self.call("list", body))

    async def list_pages(
        self,
        *,
        namespace: str | None = None,
        key: str | None = None,
        collection_id: str | int | None = None,
        as_of: datetime | str | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[ListPage]:
        cursor: str | None = None
        while True:
            page = await self.list_page(
                namespace=namespace, key=key, collection_id=collection_id, as_of=as_of, limit=page_size, cursor=cursor
            )
            yield page
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def list(
        self,
        *,
        namespace: str | None = None,
        key: str | None = None,
        collection_id: str | int | None = None,
        as_of: datetime | str | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[Memory]:
        async for page in self.list_pages(
            namespace=namespace, key=key, collection_id=collection_id, as_of=as_of, page_size=page_size
        ):
            for memory in page.memories:
                yield memory

    async def forget(
        self, memory_id: str | int | None = None, *, namespace: str | None = None, key: str | None = None
    ) -> ForgetResult:
        return decode(
            "forget",
            ForgetResult,
            await self.call(
                "forget", _body(memoryId=None if memory_id is None else str(memory_id), namespace=namespace, key=key)
            ),
        )

    async def submit_turn(
        self, agent_id: str | int, conversation_id: str, messages: Iterable[Message], *, anonymous: bool | None = None
    ) -> TurnResult:
        return decode(
            "turn", TurnResult, await self.call("turn", turn_body(agent_id, conversation_id, messages, anonymous))
        )

    async def report_reply_usage(
        self,
        conversation_id: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        *,
        memory_tokens: int | None = None,
    ) -> dict[str, Any]:
        body = _body(
            conversationId=conversation_id,
            model=model,
            inputTokens=input_tokens,
            outputTokens=output_tokens,
            memoryTokens=memory_tokens,
        )
        return decode("reply_usage", _Usage, await self.call("reply_usage", body))
