"""Helpers of the admin-console tests (no tests here; the fixtures are in conftest.py): the
canary words, a browser client per user, the check that a page shows no memory content, the
product's admin pages and their URLs, and the digests of the admin's CSV export."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from django.contrib import admin
from django.test import Client

from memoryapp.models import MemoryVersion

CANARY_TEXT = "Canary zebrafinch prefers periwinkle umbrellas"
CANARY_DETAIL = "Canary detail marmalade quokka"
CANARY_WORDS = ("zebrafinch", "periwinkle", "marmalade", "quokka")

PRODUCT_APPS = ("governance", "memoryapp", "retention", "credits")


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@dataclass
class Memories:
    agent_version: MemoryVersion
    assistant_version: MemoryVersion

    @property
    def texts(self) -> list[str]:
        return [self.agent_version.text, self.assistant_version.text, self.assistant_version.details]


def assert_no_content(body: bytes | str, memories: Memories | None = None) -> None:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    for word in CANARY_WORDS:
        assert word not in text, f"memory content leaked: {word!r}"
    if memories is not None:
        for content in memories.texts:
            assert content not in text


def product_admins():
    """(model, model admin) for every model of the product registered in the admin."""
    return [
        (model, model_admin)
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in PRODUCT_APPS
    ]


def admin_url(model, view: str, *args) -> str:
    from django.urls import reverse

    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


CONVERSATION_WORD = "wombatcarousel"


def body_of(response) -> str:
    if hasattr(response, "streaming_content"):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def exported_digests(client) -> dict[int, str]:
    body = body_of(client.get(admin_url(MemoryVersion, "export_csv")))
    rows = list(csv.DictReader(io.StringIO(body)))
    assert rows and "text_hmac" in rows[0] and "text_sha256" not in rows[0]
    return {int(row["id"]): row["text_hmac"] for row in rows}
