"""Fixtures every area uses: one workspace with an owner, an editor (the member), a viewer and an
outsider in another workspace; a collection with one document; an agent of the editor; a
credential bound to a context set; the platform staff (auditor, operator, superuser).

Fixtures one area uses live in tests/<area>/conftest.py; helpers tests call (API clients, the
error code of a refusal) in tests/support.py - no test module imports a conftest or another test
module (tests/layers/test_test_layout.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.apps import apps as django_apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from config.celery import app as celery_app
from governance import actions
from governance.admin_roles import AUDITOR, OPERATOR, sync_staff_groups
from governance.models import Member, Workspace
from tests.support import AgentClient, make_agent

pytest_plugins = ["tests.skip_policy"]

# Password hashing dominated fixture time (4-6 s per test under load); tests need no real cost.
settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The suite's own process runs without the PostgreSQL connection pool: its tests start threads that
# close only their default connection (a thread's key-store connection, never given back, would hold
# a pool slot for good; a served request gives back every connection when it ends). The pool is
# tested where it serves: tests/operations/test_unavailable.py (a pool of one) and
# test_production_stack.py (uvicorn with the settings' default pool).
for _database in settings.DATABASES.values():
    _database.get("OPTIONS", {}).pop("pool", None)
celery_app.conf.task_always_eager = True
celery_app.conf.task_eager_propagates = True


def pytest_collection_modifyitems(items) -> None:
    """Every test that reaches a database reaches the key store too (SPEC §8.2: memory content is
    sealed under data keys kept in the `keyring` database, memoryapp.routers). pytest-django gives a
    test only the databases its `django_db` marker names (the default one, unless told): each such
    test gets a marker that keeps its own options and names every database."""
    for item in items:
        marker = item.get_closest_marker("django_db")
        wants_db = marker is not None or {
            "db",
            "transactional_db",
            "live_server",
            "django_db_reset_sequences",
            "django_db_serialized_rollback",
        } & set(getattr(item, "fixturenames", ()))
        if not wants_db:
            continue
        kwargs = dict(marker.kwargs) if marker is not None else {}
        if marker is not None and marker.args:
            kwargs.setdefault("transaction", marker.args[0])
        if "transactional_db" in item.fixturenames or "live_server" in item.fixturenames:
            kwargs["transaction"] = True
        kwargs["databases"] = "__all__"
        item.add_marker(pytest.mark.django_db(**kwargs), append=False)


@pytest.fixture(autouse=True)
def _no_spare_keys_of_another_test():
    """Spare data keys (memoryapp.keyring.SpareKeys) stored in another test's transaction are
    rolled back with it: each test starts with none."""
    from memoryapp.keyring import spare_keys

    spare_keys().clear()
    yield
    spare_keys().clear()


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    from memoryapp.ratelimit import RedisRateLimiter, get_limiter

    limiter = get_limiter()
    if isinstance(limiter, RedisRateLimiter):
        limiter._client.flushdb()
    yield


@dataclass
class World:
    workspace: Workspace
    owner: Member
    editor: Member
    viewer: Member
    other_workspace: Workspace
    outsider: Member  # owner of the other workspace


@pytest.fixture
def world(db) -> World:
    workspace, owner = actions.create_workspace("Acme", owner_email="owner@acme.test", password="pw-owner-123")
    editor = actions.add_member(workspace, "editor@acme.test", role="editor", password="pw-editor-123")
    viewer = actions.add_member(workspace, "viewer@acme.test", role="viewer", password="pw-viewer-123")
    other, outsider = actions.create_workspace("Globex", owner_email="outsider@globex.test", password="pw-out-123")
    actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=owner.user)
    actions.update_settings(other, {"agentMemoriesEnabled": True}, actor=outsider.user)
    for member in (owner, editor, viewer, outsider):
        member.refresh_from_db()
    return World(workspace, owner, editor, viewer, other, outsider)


@pytest.fixture
def docs(world):
    """A collection `Handbook` with one document of two passages: (collection, document, passages)."""
    collection = actions.create_collection(world.workspace, name="Handbook")
    document = actions.create_document(
        collection, title="Shipping", text="Orders ship from Osaka.\n\nSupport answers in Japanese."
    )
    return collection, document, list(document.current_version.passages.order_by("position"))


@pytest.fixture
def agent(world) -> AgentClient:
    return make_agent(world.editor)


@pytest.fixture
def bound(world, docs):
    """A credential bound to a set holding one collection (`Handbook`), for the context-set and
    gate-order tests (tests/context_sets/test_bound_credentials.py has its own, with the set too)."""
    collection, _, passages = docs
    outside = actions.create_collection(world.workspace, name="Outside")
    outside_document = actions.create_document(outside, title="o", text="outside text")
    context_set = actions.create_context_set(world.workspace, name="Shipping", collections=[collection], documents=[])
    agent = make_agent(world.editor, context_set=context_set)
    return agent, collection, passages, outside, outside_document.current_version.passages.first()


User = get_user_model()


@dataclass
class Staff:
    auditor: object
    operator: object
    superuser: object

    def all(self):
        return [("auditor", self.auditor), ("operator", self.operator), ("superuser", self.superuser)]


@pytest.fixture
def staff(db) -> Staff:
    # Idempotent: a transactional test elsewhere may have flushed the migration's rows.
    sync_staff_groups(django_apps)
    auditor = User.objects.create_user(
        "auditor@platform.test", "auditor@platform.test", "pw-auditor-123", is_staff=True
    )
    auditor.groups.add(Group.objects.get(name=AUDITOR))
    operator = User.objects.create_user(
        "operator@platform.test", "operator@platform.test", "pw-operator-123", is_staff=True
    )
    operator.groups.add(Group.objects.get(name=OPERATOR))
    superuser = User.objects.create_superuser("root@platform.test", "root@platform.test", "pw-root-123")
    return Staff(auditor, operator, superuser)
