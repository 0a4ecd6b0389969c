"""What every embedder shares: the protocol recall calls, the error a missing model raises, the
text cleaning a C engine or tokenizer needs, and the float32 byte codec stored vectors use."""

from __future__ import annotations

import importlib.util
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    id: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:  # memories: float32 (n, dim), rows L2-normalised
        ...

    def embed_queries(self, texts: list[str]) -> np.ndarray:  # queries: same shape and space
        ...


class EmbedderUnavailable(RuntimeError):
    """The named embedder's package or weights are not installed (or do not load)."""


def _l2_normalise_rows(m: np.ndarray) -> np.ndarray:
    norms = np.sqrt(np.einsum("ij,ij->i", m, m, dtype=np.float64))
    out = m / np.maximum(norms, 1e-12)[:, None]
    return out.astype(np.float32, copy=False)


def _clean_texts(texts: list[str]) -> list[str]:
    """What a C string or a tokenizer can take: lone surrogates (from a JSON "\\ud800" escape)
    become U+FFFD, NUL (which would end a C string early) becomes a space."""
    out = []
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "replace").decode("utf-8")
        out.append(text.replace("\x00", " "))
    return out


def _package_version(distribution: str, module: str) -> str:
    from importlib import metadata

    if importlib.util.find_spec(module) is None:
        raise EmbedderUnavailable(f"package {distribution!r} is not installed")
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError as exc:
        raise EmbedderUnavailable(f"package {distribution!r} is not installed") from exc


def to_bytes(vec: np.ndarray) -> bytes:
    """float32 little-endian bytes of a 1-D vector."""
    return np.ascontiguousarray(vec, dtype="<f4").ravel().tobytes()


def from_bytes(b: bytes, dim: int) -> np.ndarray:
    """Inverse of :func:`to_bytes`; raises ValueError if the length is not ``dim`` floats."""
    if len(b) != 4 * dim:
        raise ValueError(f"expected {4 * dim} bytes for dim {dim}, got {len(b)}")
    return np.frombuffer(b, dtype="<f4").astype(np.float32)
