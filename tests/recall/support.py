"""Helpers of the recall tests (no tests here): a small BM25 corpus, an agent's remember and
recall that must succeed, the texts of a recall in order, and django.setup() in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_CORPUS = [["ship", "osaka", "ship"], ["osaka"], ["tea", "kyoto", "green", "tea", "cup"], ["cup"], ["kyoto"], ["rain"]]


def recall_ok(agent, **body) -> dict:
    response = agent.recall(**body)
    assert response.status_code == 200, response.json()
    return response.json()


def texts(body: dict) -> list[str]:
    return [m["text"] for m in body["memories"]]


def position(body: dict, text: str) -> int:
    return texts(body).index(text)


def remember_ok(agent, **body) -> dict:
    response = agent.remember(**body)
    assert response.status_code == 201, response.json()
    return response.json()["memory"]


REPO_ROOT = Path(__file__).resolve().parents[2]


def _django_setup(
    env_extra: dict[str, str], prelude: str = "", code: str = "print('started')"
) -> subprocess.CompletedProcess:
    """django.setup() in a fresh interpreter, with MEMORY_EMBEDDER only as given."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "MEMORY_EMBEDDER")}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", **env_extra})
    code = f"{prelude}import django; django.setup(); {code}"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
