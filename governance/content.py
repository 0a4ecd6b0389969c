"""Which stored fields are memory content, declared once on the models that hold them.

A model that stores memory content (or anything computed from it) puts every concrete field in
exactly one of `content_fields` (never shown or queried by the admin), `content_digests` (sizes,
counts, kinds: shown, never queried; never a hash), `keyed_digests` (digests under a key: shown,
never queried) and `metadata_fields`. The system check below refuses a model with an unclassified
field, so a field added later cannot be forgotten; the admin base (`governance.admin_base`) reads
these declarations to deny every path that reaches a content-derived field.

Digests of content shown to anyone but the member are keyed (SPEC §8.2): a version's text digest by
its own data key (it dies with the erase), the rest by `member_digest`, one HKDF-derived key per
(workspace, member) so equal texts of two members never show equal digests.
Details: docs/privacy.md "Which fields are content".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from functools import lru_cache

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.apps import apps
from django.conf import settings
from django.core import checks
from django.core.exceptions import FieldDoesNotExist
from django.db.models import Model

DECLARATIONS = ("content_fields", "content_digests", "keyed_digests", "metadata_fields")
#: A name that says "hash": never a plain measure of content (governance.E003).
_HASH_NAME = re.compile(r"sha|md5|hash|digest|hmac|blake|fingerprint|checksum|crc", re.IGNORECASE)


def declares_content(model: type[Model]) -> bool:
    return hasattr(model, "content_fields")


def content_fields(model: type[Model]) -> frozenset[str]:
    """Fields never shown by the admin."""
    return frozenset(getattr(model, "content_fields", ()))


def content_derived_fields(model: type[Model]) -> frozenset[str]:
    """Fields the admin never looks up, searches, filters or orders on."""
    return (
        frozenset(getattr(model, "content_fields", ()))
        | frozenset(getattr(model, "content_digests", ()))
        | frozenset(getattr(model, "keyed_digests", ()))
    )


def _field_names(model: type[Model], name: str) -> set[str]:
    """A field's name and its column attribute (`memory` and `memory_id`)."""
    try:
        field = model._meta.get_field(name)
    except FieldDoesNotExist:
        return {name}
    return {name, getattr(field, "attname", name)}


def is_content_derived(model: type[Model], name: str) -> bool:
    return any(name in _field_names(model, declared) for declared in content_derived_fields(model))


def lookup_reaches_content(model: type[Model], lookup: str) -> bool:
    """True when any step of `lookup` (`terms__contains`, `memory__text__regex`,
    `memory_versions__embedding__terms`, `-text`) names a content-derived field of the model
    reached so far. A step that is not a field (a transform or a lookup type) ends the path."""
    return _path_reaches(model, lookup, is_content_derived)


def path_shows_content(model: type[Model], path: str) -> bool:
    """True when displaying `path` (`text`, `memory__details`) would show content itself."""
    return _path_reaches(
        model, path, lambda current, part: any(part in _field_names(current, name) for name in content_fields(current))
    )


def _path_reaches(model: type[Model], path: str, hit) -> bool:
    current = model
    for part in path.lstrip("-+").split("__"):
        if hit(current, part):
            return True
        try:
            field = current._meta.get_field(part)
        except FieldDoesNotExist:
            return False
        if not field.is_relation or field.related_model is None:
            return False
        current = field.related_model
    return False


def declaration_errors(model: type[Model]) -> list[checks.CheckMessage]:
    """What is wrong with a model's content declarations (empty when it declares none)."""
    if not declares_content(model):
        return []
    errors: list[checks.CheckMessage] = []
    concrete = {field.name for field in model._meta.concrete_fields}
    declared = [set(getattr(model, name, ())) for name in DECLARATIONS]
    for name in sorted(concrete):
        count = sum(name in group for group in declared)
        if count != 1:
            errors.append(
                checks.Error(
                    f"{model._meta.label}.{name} is {'not classified' if count == 0 else 'classified twice'} as "
                    "content, content digest, keyed digest or metadata.",
                    hint="Add it to exactly one of content_fields, content_digests, keyed_digests, metadata_fields on "
                    "the model (governance/content.py).",
                    obj=model,
                    id="governance.E001",
                )
            )
    for name in sorted(set().union(*declared) - concrete):
        errors.append(
            checks.Error(
                f"{model._meta.label} declares {name!r}, which is not one of its fields.",
                obj=model,
                id="governance.E002",
            )
        )
    for name in sorted(set(getattr(model, "content_digests", ())) & concrete):
        if _HASH_NAME.search(name):
            errors.append(
                checks.Error(
                    f"{model._meta.label}.{name} looks like an unkeyed hash of content, declared as a digest the "
                    "admin may show.",
                    hint="A plain hash confirms a guess offline: compute it with governance.content.member_digest and "
                    "declare it in keyed_digests, or declare it content (SPEC §8.2).",
                    obj=model,
                    id="governance.E003",
                )
            )
    return errors


@checks.register(checks.Tags.models)
def check_content_declarations(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    return [error for model in apps.get_models() for error in declaration_errors(model)]


# --- keyed digests (SPEC §8.2) -----------------------------------------------------------------
@lru_cache(maxsize=4096)
def _derived_key(server_key: str, scope: str) -> bytes:
    return HKDF(
        algorithm=hashes.SHA256(),
        length=32,
        salt=None,
        info=f"governed-agent-memory/content-digest/v1/{scope}".encode(),
    ).derive(base64.b64decode(server_key))


def keyed_digest(text: str, scope: str) -> str:
    """HMAC-SHA256 of `text` under the key HKDF derives for `scope` from the server key."""
    return hmac.new(_derived_key(settings.CONTENT_DIGEST_KEY, scope), text.encode("utf-8"), hashlib.sha256).hexdigest()


def member_digest(text: str, *, workspace_id: int, member_id: int) -> str:
    """The digest of a member's content that anyone but the member may see: equal for the same
    member's equal texts, unrelated across members and workspaces, and no guess can be checked
    against it without the server key."""
    return keyed_digest(text, f"workspace/{workspace_id}/member/{member_id}")
