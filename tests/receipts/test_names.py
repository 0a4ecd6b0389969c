"""Receipts name no words of the member's (issue 33 row 2, docs/receipts.md "Names in receipts").

A forget by key used to leave `{"namespace": "travel", "key": "seat"}` in the receipt forever, on
every admin role's change page and CSV export. The attacks: an auditor, operator or superuser
opens every receipt page, searches and filters for the name, exports the CSV, and hashes a word
list with every key they could know; the owner reads every workspace route, the verify endpoint
and their own export; another member does the same. Nobody but the member finds the name, and the
member only while a live memory of theirs still uses it. Names are generated (Faker, 12 locales;
hypothesis for the digests)."""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from governance import actions as g
from governance import content
from memoryapp.keyring import DataKey, key_store
from memoryapp.models import MemoryVersion
from retention import receipt_names, receipts
from retention.models import DeletionReceipt
from retention.receipt_names import Digester, Resolver
from tests.admin.support import admin_url, browser
from tests.export.support import exported
from tests.receipts.support import body_of, generated_names, leaks, own_receipts
from tests.support import client_for, fill, make_agent, routes

pytestmark = pytest.mark.django_db


def plain_digests(word: str) -> set[str]:
    """What a dictionary attack computes for a guess with every key an admin could know."""
    found = set()
    for algorithm in ("sha256", "sha1", "md5", "sha512", "blake2b"):
        found.add(hashlib.new(algorithm, word.encode()).hexdigest())
    for secret in (settings.SECRET_KEY, settings.CONTENT_DIGEST_KEY):
        found.add(hmac.new(str(secret).encode(), word.encode(), hashlib.sha256).hexdigest())
    return found


class Forgotten:
    def __init__(self, world):
        self.world = world
        self.names = generated_names(12, seed=33)
        self.agent = make_agent(world.editor)
        self.kept = ("kept_namespace_ok", "kept_key_ok")
        assert self.agent.remember(namespace=self.kept[0], key=self.kept[1], text="still here").status_code == 201
        self.receipts = []
        for namespace, key in self.names:
            assert (
                self.agent.remember(namespace=namespace, key=key, text="Prefers the window seat").status_code == 201
            ), (namespace, key)
            response = self.agent.forget(namespace=namespace, key=key)
            assert response.status_code == 200, response.content
            self.receipts.append(DeletionReceipt.objects.get(pk=response.json()["receiptId"]))

    @property
    def words(self) -> list[str]:
        return [w for pair in self.names for w in pair]

    def guesses(self) -> set[str]:
        return set().union(*(plain_digests(w) for w in self.words))


@pytest.fixture
def forgotten(world) -> Forgotten:
    return Forgotten(world)


# --- what is stored -----------------------------------------------------------------------------------
def test_a_forget_by_key_stores_keyed_digests_only(forgotten):
    for receipt, (namespace, key) in zip(forgotten.receipts, forgotten.names):
        stored = DeletionReceipt.objects.get(pk=receipt.pk)
        filters = stored.manifest["filters"]
        assert set(filters) == {"namespaceHmac", "keyHmac"}
        raw = json.dumps(
            {f.attname: getattr(stored, f.attname) for f in stored._meta.concrete_fields},
            default=str,
            ensure_ascii=False,
        )
        assert leaks(raw, (namespace, key)) == [] and [d for d in forgotten.guesses() if d in raw] == []
        assert (
            receipts.digest_of(stored).hex() == stored.sha256 and stored.redaction is None
        )  # hashed as stored: no redaction needed
    assert len({r.manifest["filters"]["keyHmac"] for r in forgotten.receipts}) == len(forgotten.receipts)


def test_two_members_who_forget_the_same_key_show_different_digests(world):
    shown = []
    for member in (world.editor, world.owner):
        agent = make_agent(member)
        assert agent.remember(namespace="travel", key="seat", text="aisle").status_code == 201
        receipt_id = agent.forget(namespace="travel", key="seat").json()["receiptId"]
        shown.append(DeletionReceipt.objects.get(pk=receipt_id).manifest["filters"])
    assert shown[0]["namespaceHmac"] != shown[1]["namespaceHmac"] and shown[0]["keyHmac"] != shown[1]["keyHmac"]


# --- the admin console, every role ---------------------------------------------------------------------
def test_no_admin_role_finds_a_forgotten_name_on_any_receipt_surface(forgotten, staff):
    from django.contrib import admin

    for role, user in staff.all():
        client = browser(user)
        pages = [
            client.get(admin_url(DeletionReceipt, "changelist")),
            client.get(admin_url(DeletionReceipt, "export_csv")),
        ]
        pages += [client.get(admin_url(DeletionReceipt, "change", r.pk)) for r in forgotten.receipts]
        for (
            model,
            model_admin,
        ) in admin.site._registry.items():  # every other page and export too: nothing else keeps the name
            pages.append(client.get(admin_url(model, "changelist")))
            if getattr(model_admin, "csv_columns", ()):
                pages.append(client.get(admin_url(model, "export_csv")))
        for receipt in forgotten.receipts:  # the change page does show the filters: as digests
            assert receipt.manifest["filters"]["keyHmac"] in body_of(
                client.get(admin_url(DeletionReceipt, "change", receipt.pk))
            )
        for response in pages:
            body = body_of(response)
            assert response.status_code == 200, (role, response.wsgi_request.path)
            assert leaks(body, forgotten.words) == [], f"{role}: {response.wsgi_request.get_full_path()}"
            assert [d for d in forgotten.guesses() if d in body] == [], (
                f"{role}: a plain or server-keyed digest on {response.wsgi_request.path}"
            )
        rows = list(csv.DictReader(io.StringIO(body_of(client.get(admin_url(DeletionReceipt, "export_csv"))))))
        assert {json.dumps(sorted(json.loads(r["filters"]))) for r in rows if r["operation"] == "forget"} == {
            json.dumps(["keyHmac", "namespaceHmac"])
        }


def test_searching_or_filtering_receipts_by_a_forgotten_name_finds_nothing(forgotten, staff):
    changelist = admin_url(DeletionReceipt, "changelist")
    for role, user in staff.all():
        client = browser(user)
        unfiltered = body_of(client.get(changelist))
        assert all(
            admin_url(DeletionReceipt, "change", r.pk) in unfiltered for r in forgotten.receipts
        )  # the check below can see a match
        for namespace, key in forgotten.names[:4]:
            for query in (
                {"q": namespace},
                {"q": key},
                {"manifest__filters__namespace": namespace},
                {"manifest__filters__key": key},
                {"manifest__icontains": key},
                {"manifest__contains": json.dumps({"filters": {"namespace": namespace}})},
            ):
                response = client.get(changelist, query)
                assert response.status_code in (200, 302, 400), (role, query)
                listed = body_of(response) if response.status_code == 200 else ""
                found = [r.pk for r in forgotten.receipts if admin_url(DeletionReceipt, "change", r.pk) in listed]
                assert found == [], f"{role} found receipts {found} by {query}"


# --- the owner, another member, the API --------------------------------------------------------------
def every_workspace_route(member, world, forgotten) -> list[tuple[str, str]]:
    client = client_for(member)
    values = {
        "ws_id": str(world.workspace.pk),
        "memory_id": str(forgotten.receipts[0].memory_version_ids[0]),
        "member_id": str(world.editor.pk),
    }
    bodies = []
    for route, names in routes():
        if not route.startswith(("api/w/", "w/")) or any(name not in values for name in names):
            continue
        path = fill(route, values)
        bodies.append((path, body_of(client.get(path))))
    bodies.append(
        ("receipts list", body_of(client.get(f"/api/w/{world.workspace.pk}/ask-history/deletion-receipts?limit=100")))
    )
    bodies.append(("verify", body_of(client.get(f"/api/w/{world.workspace.pk}/ask-history/deletion-receipts/verify"))))
    return bodies


def test_the_owner_and_other_members_find_no_forgotten_name_on_any_route_nor_in_their_exports(forgotten, world):
    for member in (world.owner, world.viewer):
        for path, body in every_workspace_route(member, world, forgotten):
            assert leaks(body, forgotten.words) == [], f"{member.role}: {path}"
            assert [d for d in forgotten.guesses() if d in body] == [], path
        document = json.dumps(
            exported(member), ensure_ascii=False
        )  # "my export" is theirs: the editor's receipts are not in it
        assert leaks(document, forgotten.words) == []
    listed = (
        client_for(world.owner)
        .get(f"/api/w/{world.workspace.pk}/ask-history/deletion-receipts?limit=100")
        .json()["receipts"]
    )
    assert {r["id"] for r in listed} >= {str(r.pk) for r in forgotten.receipts}
    assert all(
        "filters" not in r["manifest"] and "resolvedFilters" not in r
        for r in listed
        if r["memberId"] == str(world.editor.pk)
    )


# --- the member: their own names while they live, nobody's after ----------------------------------------


def test_the_member_reads_a_name_back_only_while_a_live_memory_uses_it(world):
    agent = make_agent(world.editor)
    for key in ("seat", "window"):
        assert agent.remember(namespace="travel", key=key, text=f"{key} preference").status_code == 201
    receipt_id = agent.forget(namespace="travel", key="seat").json()["receiptId"]

    (shown,) = [r for r in own_receipts(world.editor) if r["id"] == receipt_id]
    assert shown["resolvedFilters"] == {"namespace": "travel"}  # "travel" lives on; the forgotten key does not
    assert '"seat"' not in json.dumps(own_receipts(world.editor)) and "seat" not in json.dumps(
        exported(world.editor)["receipts"]
    )
    (mine,) = [r for r in exported(world.editor)["receipts"] if r["id"] == receipt_id]
    assert mine["resolvedFilters"] == {"namespace": "travel"} and set(mine["manifest"]["filters"]) == {
        "namespaceHmac",
        "keyHmac",
    }

    assert (
        agent.remember(namespace="travel", key="seat", text="aisle again").status_code == 201
    )  # the member says it again
    (shown,) = [r for r in own_receipts(world.editor) if r["id"] == receipt_id]
    assert shown["resolvedFilters"] == {"namespace": "travel", "key": "seat"}

    for key in ("seat", "window"):
        assert agent.forget(namespace="travel", key=key).status_code == 200
    for receipt in own_receipts(world.editor):
        assert receipt["resolvedFilters"] == {}
    assert leaks(json.dumps(exported(world.editor), ensure_ascii=False), ("travel", "seat", "window")) == []


def test_a_memory_id_forget_and_a_sweep_receipt_resolve_to_nothing(world):
    agent = make_agent(world.editor)
    memory_id = agent.remember(namespace="travel", key="seat", text="aisle").json()["memory"]["id"]
    receipt_id = agent.forget(memoryId=memory_id).json()["receiptId"]
    (shown,) = [r for r in own_receipts(world.editor) if r["id"] == receipt_id]
    assert shown["manifest"]["filters"] == {"memoryId": str(memory_id)} and shown["resolvedFilters"] == {}


def test_after_the_membership_ends_nobody_can_resolve_not_even_with_the_key_store(
    world, django_capture_on_commit_callbacks
):
    """Removal destroys the name key when it commits: after that no key in the key store (which
    an operator with the KEK could unwrap) computes the digests, and re-adding the member gives a
    new key that names nothing of the earlier period."""
    agent = make_agent(world.editor)
    assert agent.remember(namespace="travel", key="seat", text="aisle").status_code == 201
    receipt = DeletionReceipt.objects.get(pk=agent.forget(namespace="travel", key="seat").json()["receiptId"])
    period = world.editor.period
    key_id = receipt_names.name_key_id(world.workspace.pk, world.editor.pk, period)
    assert key_store().present([key_id]) == {key_id}
    with django_capture_on_commit_callbacks(execute=True):
        g.remove_member(world.editor, actor=world.owner.user)
    assert key_store().present([key_id]) == set()
    wanted = receipt.manifest["filters"]
    every_key = key_store().get_many(DataKey.objects.using("keyring").values_list("key_id", flat=True))
    for dek in every_key.values():
        digester = Digester(dek)
        assert (
            digester.digest("namespace", "travel") != wanted["namespaceHmac"]
            and digester.digest("key", "travel", "seat") != wanted["keyHmac"]
        )
    world.editor.refresh_from_db()
    assert Resolver(world.editor).resolve(receipt.manifest) == {}


def test_the_keyring_sweep_destroys_name_keys_of_ended_memberships(world):
    agent = make_agent(world.editor)
    assert agent.remember(namespace="travel", key="seat", text="aisle").status_code == 201
    assert agent.forget(namespace="travel", key="seat").status_code == 200
    key_id = receipt_names.name_key_id(world.workspace.pk, world.editor.pk, world.editor.period)
    from django.utils import timezone

    type(world.editor).objects.filter(pk=world.editor.pk).update(
        left_at=timezone.now()
    )  # removed without its commit hook (a crash)
    DataKey.objects.using("keyring").filter(pk=key_id).update(created_at=timezone.now() - timedelta(minutes=1))
    from retention.keysweep import sweep_keyring

    assert sweep_keyring()["nameKeysDestroyed"] == 1 and key_store().present([key_id]) == set()
    assert sweep_keyring()["nameKeysDestroyed"] == 0


def test_deleting_the_workspace_destroys_its_name_keys(world, django_capture_on_commit_callbacks):
    agent = make_agent(world.editor)
    assert agent.remember(namespace="travel", key="seat", text="aisle").status_code == 201
    assert agent.forget(namespace="travel", key="seat").status_code == 200
    key_id = receipt_names.name_key_id(world.workspace.pk, world.editor.pk, world.editor.period)
    assert key_store().present([key_id]) == {key_id}
    with django_capture_on_commit_callbacks(execute=True):
        g.delete_workspace(world.workspace, actor=world.owner.user)
    assert key_store().present([key_id]) == set()


# --- the digests themselves --------------------------------------------------------------------------------
NAME = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=64).filter(
    lambda s: s.strip() != ""
)  # what PlainText admits (no NUL: PostgreSQL stores none)


@hsettings(max_examples=60, deadline=None)
@given(namespace=NAME, key=st.text(min_size=1, max_size=120), key_bytes=st.binary(min_size=32, max_size=32))
def test_sealed_filters_hold_no_name_and_no_unkeyed_digest_of_it(namespace, key, key_bytes):
    sealed = receipt_names.seal_filters({"namespace": namespace, "key": key}, key=key_bytes)
    assert set(sealed) == {"namespaceHmac", "keyHmac"} and all(len(v) == 64 for v in sealed.values())
    shown = json.dumps(sealed, ensure_ascii=False)
    for word in (namespace, key):
        if len(word) >= 3:
            assert word not in shown and json.dumps(word)[1:-1] not in shown
        assert not plain_digests(word) & set(sealed.values())
    assert content.member_digest(namespace, workspace_id=1, member_id=1) not in sealed.values()
    assert (
        receipt_names.seal_filters({"namespace": namespace, "key": key}, key=key_bytes) == sealed
    )  # stable under one key
    assert (
        receipt_names.seal_filters({"namespace": namespace, "key": key}, key=bytes(b ^ 1 for b in key_bytes)) != sealed
    )  # another membership's key: unrelated


@hsettings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(names=st.lists(st.tuples(NAME, NAME), min_size=1, max_size=4, unique_by=lambda p: p[0]))
def test_the_resolver_names_exactly_the_live_names(world, names):
    """Generated names: a member's live (namespace, key) pairs resolve, and a pair only one of
    whose parts lives resolves to that part only."""
    key = receipt_names.name_key(world.workspace.pk, world.editor.pk, create=True)
    digester = Digester(key)
    MemoryVersion.objects.filter(member=world.editor).delete()
    for namespace, memory_key in names:
        MemoryVersion.objects.create(
            workspace=world.workspace, member=world.editor, namespace=namespace, key=memory_key, text="x"
        )
    resolver = Resolver(world.editor)
    for namespace, memory_key in names:
        manifest = {
            "filters": {
                "namespaceHmac": digester.digest("namespace", namespace),
                "keyHmac": digester.digest("key", namespace, memory_key),
            }
        }
        assert resolver.resolve(manifest) == {"namespace": namespace, "key": memory_key}
        other = {
            "filters": {
                "namespaceHmac": digester.digest("namespace", namespace),
                "keyHmac": digester.digest("key", namespace, memory_key + "·gone"),
            }
        }
        assert resolver.resolve(other) == {"namespace": namespace}
    assert Resolver(world.viewer).resolve(manifest) == {}  # another member's key resolves nothing of theirs


def test_a_receipt_for_an_ended_membership_is_sealed_under_a_key_nobody_keeps(world):
    from django.utils import timezone

    type(world.editor).objects.filter(pk=world.editor.pk).update(left_at=timezone.now())
    manifest = receipt_names.sealed_manifest(
        {"filters": {"namespace": "travel", "key": "seat"}}, workspace_id=world.workspace.pk, member_id=world.editor.pk
    )
    assert set(manifest["filters"]) == {"namespaceHmac", "keyHmac"}
    assert not DataKey.objects.using("keyring").filter(owner=receipt_names.OWNER).exists()


def test_the_member_api_is_no_oracle_for_another_members_names(forgotten, world):
    """The owner cannot ask the server to resolve the editor's digests: receipts of others carry
    no filters, and the owner's own resolver uses the owner's key."""
    owner_key = receipt_names.name_key(world.workspace.pk, world.owner.pk, create=True)
    for receipt, (namespace, key) in zip(forgotten.receipts, forgotten.names):
        assert Digester(owner_key).digest("key", namespace, key) != receipt.manifest["filters"]["keyHmac"]
    assert "filters" not in json.dumps(Client().get("/.well-known/receipt-signing-key").json())


def test_a_rule_naming_a_product_namespace_alone_stays_as_written():
    from retention import forgetting

    assert (
        forgetting.NAMESPACE in receipt_names.PRODUCT_NAMESPACES
    )  # receipt_names cannot import it (a lower layer): the copy is checked here
    for namespace in receipt_names.PRODUCT_NAMESPACES:
        rule = {"rule": "agentMemoryRetentionDays + expiredGraceDays", "namespace": namespace}
        assert receipt_names.seal_filters(rule, key=b"k" * 32) == rule
        assert set(receipt_names.seal_filters({**rule, "key": "topic"}, key=b"k" * 32)) == {
            "rule",
            "namespaceHmac",
            "keyHmac",
        }
    assert set(receipt_names.seal_filters({"namespace": "travel"}, key=b"k" * 32)) == {"namespaceHmac"}
