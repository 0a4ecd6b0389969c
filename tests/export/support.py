"""Helpers of the member-export tests, which the receipt tests use too (no tests here): the
export's URL and JSON Schema, and a member's export downloaded and checked against it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from django.conf import settings

from tests.support import client_for

SCHEMA = json.loads((Path(settings.BASE_DIR) / "docs" / "export.schema.json").read_text())


def url(workspace) -> str:
    return f"/api/w/{workspace.pk}/me/export"


def download(client, workspace) -> tuple[int, str]:
    response = client.get(url(workspace))
    if response.status_code != 200:
        return response.status_code, response.content.decode()
    assert response.streaming
    return 200, b"".join(response.streaming_content).decode("utf-8")


def exported(member) -> dict:
    status, body = download(client_for(member), member.workspace)
    assert status == 200, body
    document = json.loads(body)
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).validate(
        document
    )
    return document
