"""Which stored fields are memory content, declared once on the models that hold them.

A model that stores memory content (or anything computed from it) declares three class
attributes, and every concrete field must be in exactly one of them:

- `content_fields`: the content itself (text, details, kind, BM25 terms, vectors, conversation
  messages). Never displayed, exported, looked up, searched, filtered or ordered on by the admin.
- `content_digests`: computed from the content (sizes, hashes, detected kinds). The admin may show
  them as metadata (SPEC §10), but never looks up, searches, filters or orders on them: a filter
  `text_sha256=<hash of a guess>` or `text_length=<n>` would confirm a guess one row at a time.
- `metadata_fields`: everything else (ids, dates, states, namespace and key).

The system check below refuses a model whose fields are not all classified, so a field added
later cannot be forgotten; the admin base (`governance.admin_base`) reads these declarations to
deny every path that reaches a content-derived field, through any relation.
"""

from __future__ import annotations

from django.apps import apps
from django.core import checks
from django.core.exceptions import FieldDoesNotExist
from django.db.models import Model

DECLARATIONS = ("content_fields", "content_digests", "metadata_fields")


def declares_content(model: type[Model]) -> bool:
    return hasattr(model, "content_fields")


def content_fields(model: type[Model]) -> frozenset[str]:
    """Fields never shown by the admin."""
    return frozenset(getattr(model, "content_fields", ()))


def content_derived_fields(model: type[Model]) -> frozenset[str]:
    """Fields the admin never looks up, searches, filters or orders on."""
    return frozenset(getattr(model, "content_fields", ())) | frozenset(getattr(model, "content_digests", ()))


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
    return _path_reaches(model, path, lambda current, part: any(part in _field_names(current, name) for name in content_fields(current)))


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


@checks.register(checks.Tags.models)
def check_content_declarations(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    for model in apps.get_models():
        if not declares_content(model):
            continue
        concrete = {field.name for field in model._meta.concrete_fields}
        declared = [set(getattr(model, name, ())) for name in DECLARATIONS]
        for name in sorted(concrete):
            count = sum(name in group for group in declared)
            if count != 1:
                errors.append(
                    checks.Error(
                        f"{model._meta.label}.{name} is {'not classified' if count == 0 else 'classified twice'} as content, content digest or metadata.",
                        hint="Add it to exactly one of content_fields, content_digests, metadata_fields on the model (governance/content.py).",
                        obj=model,
                        id="governance.E001",
                    )
                )
        for name in sorted(set().union(*declared) - concrete):
            errors.append(checks.Error(f"{model._meta.label} declares {name!r}, which is not one of its fields.", obj=model, id="governance.E002"))
    return errors
