"""The lifecycle matrix (SPEC §8) covers every model that stores memory-derived data, names only
code that exists, and the docs page is rendered from the same definition."""

from __future__ import annotations

from importlib import import_module

from django.apps import apps
from django.db import models

from memoryapp.models import MemoryVersion
from retention import matrix
from tests.conftest import client_for, error_code

PROJECT_APPS = ("governance", "memoryapp", "retention", "credits")
REQUIRED_CLASSES = {"memory_version", "citation", "embedding", "receipt", "usage_record", "rate_limit_counter", "consolidation_input", "audit_event", "backups"}


def project_models() -> list[type[models.Model]]:
    return [m for app in PROJECT_APPS for m in apps.get_app_config(app).get_models()]


def label(model) -> str:
    return f"{model._meta.app_label}.{model.__name__}"


def looks_memory_derived(model) -> bool:
    for field in model._meta.get_fields():
        if getattr(field, "related_model", None) is MemoryVersion and not field.auto_created:
            return True
        # a field named after memories that can hold text, ids or vectors
        if "memory" in field.name and isinstance(field, (models.TextField, models.CharField, models.JSONField, models.BinaryField)):
            return True
    return model is MemoryVersion


def test_every_model_of_the_project_is_in_the_matrix_or_declared_not_memory_derived():
    listed = {m for a in matrix.artifact_classes() for m in a.models}
    missing = [label(m) for m in project_models() if label(m) not in listed and label(m) not in matrix.NOT_MEMORY_DERIVED]
    assert missing == [], f"add these models to retention/matrix.py: {missing}"


def test_models_that_hold_memory_derived_data_are_artifact_classes_not_exceptions():
    listed = {m for a in matrix.artifact_classes() for m in a.models}
    for model in project_models():
        if looks_memory_derived(model):
            assert label(model) in listed, label(model)
            assert label(model) not in matrix.NOT_MEMORY_DERIVED


def test_the_matrix_names_only_models_and_functions_that_exist():
    keys = [a.key for a in matrix.artifact_classes()]
    assert set(keys) >= REQUIRED_CLASSES and len(keys) == len(set(keys))
    for artifact in matrix.artifact_classes():
        for model_label in artifact.models:
            apps.get_model(model_label)
        for dotted in artifact.deleted_by:
            module, name = dotted.rsplit(".", 1)
            assert callable(getattr(import_module(module), name)), dotted
    for model_label in matrix.NOT_MEMORY_DERIVED:
        apps.get_model(model_label)


def test_the_docs_page_is_rendered_from_the_matrix():
    assert matrix.docs_block(matrix.DOC_PATH.read_text()) == matrix.render_markdown(), "run `python -m retention.matrix`"


def test_the_lifecycle_endpoint_lists_every_class_with_workspace_or_own_counts(world, agent):
    agent.remember(namespace="notes", text="A note.")
    url = f"/api/w/{world.workspace.pk}/ask-history/lifecycle"
    owner = client_for(world.owner).get(url)
    assert owner.status_code == 200
    body = owner.json()
    assert {a["key"] for a in body["artifacts"]} >= REQUIRED_CLASSES
    for artifact in body["artifacts"]:
        assert {"name", "store", "derivedFrom", "scope", "retention", "deleteMethod", "unreachable", "purged", "residual"} <= set(artifact)
    assert body["settings"]["agentMemoryRetentionDays"] == 90
    assert body["scope"] == "workspace" and body["counts"]["memoryVersions"] == 1 and "auditEvents" in body["counts"]
    viewer = client_for(world.viewer).get(url).json()
    assert viewer["scope"] == "member" and viewer["counts"]["memoryVersions"] == 0 and "auditEvents" not in viewer["counts"]
    assert client_for(world.editor).get(url).json()["counts"]["memoryVersions"] == 1
    outsider = client_for(world.outsider).get(url)
    assert outsider.status_code == 404 and error_code(outsider) == "NOT_FOUND"
