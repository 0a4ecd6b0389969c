"""The lifecycle matrix (SPEC §8) covers every model that stores memory-derived data, names only
code that exists, and the docs page is rendered from the same definition."""

from __future__ import annotations

from importlib import import_module

from django.apps import apps
from django.db import models

from memoryapp.models import MemoryVersion
from retention import matrix
from tests.support import client_for, error_code

PROJECT_APPS = ("governance", "memoryapp", "retention", "credits")
REQUIRED_CLASSES = {
    "memory_version",
    "citation",
    "embedding",
    "receipt",
    "usage_record",
    "rate_limit_counter",
    "consolidation_input",
    "audit_event",
    "backups",
}


def project_models() -> list[type[models.Model]]:
    return [m for app in PROJECT_APPS for m in apps.get_app_config(app).get_models()]


def label(model) -> str:
    return f"{model._meta.app_label}.{model.__name__}"


def looks_memory_derived(model) -> bool:
    for field in model._meta.get_fields():
        if getattr(field, "related_model", None) is MemoryVersion and not field.auto_created:
            return True
        # a field named after memories that can hold text, ids or vectors
        if "memory" in field.name and isinstance(
            field, (models.TextField, models.CharField, models.JSONField, models.BinaryField)
        ):
            return True
    return model is MemoryVersion


def test_every_model_of_the_project_is_in_the_matrix_or_declared_not_memory_derived():
    listed = {m for a in matrix.artifact_classes() for m in a.models}
    missing = [
        label(m) for m in project_models() if label(m) not in listed and label(m) not in matrix.NOT_MEMORY_DERIVED
    ]
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
    assert matrix.docs_block(matrix.DOC_PATH.read_text()) == matrix.render_markdown(), (
        "run `python -m retention.matrix`"
    )


def test_the_lifecycle_endpoint_lists_every_class_with_workspace_or_own_counts(world, agent):
    agent.remember(namespace="notes", text="A note.")
    url = f"/api/w/{world.workspace.pk}/ask-history/lifecycle"
    owner = client_for(world.owner).get(url)
    assert owner.status_code == 200
    body = owner.json()
    assert {a["key"] for a in body["artifacts"]} >= REQUIRED_CLASSES
    for artifact in body["artifacts"]:
        assert {
            "name",
            "store",
            "derivedFrom",
            "scope",
            "retention",
            "deleteMethod",
            "unreachable",
            "purged",
            "residual",
        } <= set(artifact)
    assert body["settings"]["agentMemoryRetentionDays"] == 90
    assert body["scope"] == "workspace" and body["counts"]["memoryVersions"] == 1 and "auditEvents" in body["counts"]
    viewer = client_for(world.viewer).get(url).json()
    assert (
        viewer["scope"] == "member"
        and viewer["counts"]["memoryVersions"] == 0
        and "auditEvents" not in viewer["counts"]
    )
    assert client_for(world.editor).get(url).json()["counts"]["memoryVersions"] == 1
    outsider = client_for(world.outsider).get(url)
    assert outsider.status_code == 404 and error_code(outsider) == "NOT_FOUND"


def test_the_counts_are_each_artifact_class_of_the_workspace_or_of_the_member_alone(world):
    """`lifecycle.counts_for` (the endpoint's `counts`): every class counted, for an owner the
    workspace's, for anyone else their own rows only — versions, assistant versions, expired
    awaiting purge (not the unreachable ones), pending cascade erasure, citations, embeddings,
    receipts, usage records, access-log entries; audit events for the owner only."""
    from datetime import timedelta

    from django.utils import timezone

    from credits.models import UsageRecord
    from governance import actions as gov_actions
    from governance.models import AuditEvent
    from memoryapp.assistant import add_assistant_memory
    from retention.lifecycle import counts_for
    from tests.support import make_agent

    owner_agent, editor_agent = make_agent(world.owner), make_agent(world.editor)
    collection = gov_actions.create_collection(world.workspace, name="Docs")
    passage = gov_actions.create_document(collection, title="d", text="Cited text.").current_version.passages.first()
    assert owner_agent.remember(namespace="n", text="cites a passage", citations=[str(passage.pk)]).status_code == 201
    forgotten = owner_agent.remember(namespace="n", key="k", text="to forget").json()["memory"]["id"]
    assert owner_agent.forget(memoryId=forgotten).status_code == 200  # one receipt, the owner's
    old = int(editor_agent.remember(namespace="n", text="an old note").json()["memory"]["id"])
    marked = int(editor_agent.remember(namespace="n", text="a marked note").json()["memory"]["id"])
    MemoryVersion.objects.filter(pk=old).update(
        retention_anchor=timezone.now() - timedelta(days=200)
    )  # past the 90 days
    MemoryVersion.objects.filter(pk=marked).update(
        unreachable_at=timezone.now(), retention_anchor=timezone.now() - timedelta(days=200)
    )  # counts as pending, not expired
    add_assistant_memory(world.editor, kind="preference", topic="response_style", summary="Short answers.")
    assert owner_agent.list().status_code == 200  # one read that returned a memory: one access-log entry, the owner's
    UsageRecord.objects.create(
        workspace=world.workspace,
        member=world.editor,
        role="editor",
        category="reply",
        model_name="m",
        input_tokens=1,
        output_tokens=1,
        input_cost=0,
        output_cost=0,
    )

    scope, workspace = counts_for(world.owner)
    assert scope == "workspace"
    assert workspace == {
        "memoryVersions": 4,
        "assistantMemoryVersions": 1,
        "expiredAwaitingPurge": 1,
        "pendingCascadeErasure": 1,
        "citations": 1,
        "embeddings": 4,
        "receipts": 1,
        "usageRecords": 1,
        "accessLogEntries": 1,
        "auditEvents": AuditEvent.objects.filter(workspace_ref=world.workspace.pk).count(),
    }
    assert workspace["auditEvents"] > 0
    scope, own = counts_for(world.editor)
    assert scope == "member"
    assert own == {
        "memoryVersions": 3,
        "assistantMemoryVersions": 1,
        "expiredAwaitingPurge": 1,
        "pendingCascadeErasure": 1,
        "citations": 0,
        "embeddings": 3,
        "receipts": 0,
        "usageRecords": 1,
        "accessLogEntries": 0,
    }
