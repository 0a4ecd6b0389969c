"""Previews before every bulk erase (issue 17 §3): the manifest a preview shows is the one the
erase's receipts then carry, on generated data; a dry run writes nothing; bad dryRun values are
refused; the settings page previews a retention change, then saving erases exactly that."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from faker import Faker
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from governance import actions as g
from governance.models import AskHistorySettings, AuditEvent, Member, Workspace
from memoryapp import actions
from memoryapp.models import ASSISTANT_NAMESPACE, AccessEntry, Citation, MemoryEmbedding, MemoryState, MemoryVersion
from retention import lifecycle, previews
from retention.models import DeletionReceipt, Operation, ReceiptChain
from tests.support import client_for, error_code

pytestmark = pytest.mark.django_db

fake = Faker()
Faker.seed(17)
_serial = itertools.count()
ARTIFACTS = previews.ARTIFACTS


# --- generated workspaces -----------------------------------------------------------------------
memory_spec = st.fixed_dictionaries(
    {
        "assistant": st.booleans(),
        "age_days": st.integers(min_value=0, max_value=60),
        "versions": st.integers(min_value=1, max_value=3),
        "citations": st.integers(min_value=0, max_value=2),
        "embedded": st.booleans(),
        "expired": st.booleans(),  # assistant memories only: already moved to Expired
    }
)
member_spec = st.lists(memory_spec, min_size=0, max_size=6)
world_spec = st.fixed_dictionaries(
    {
        "members": st.lists(member_spec, min_size=1, max_size=3),
        "reads": st.lists(st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=5), max_size=6),
    }
)


@dataclass
class Generated:
    workspace: Workspace
    owner: Member
    members: list[Member]


def build(spec: dict, now) -> Generated:
    """A workspace of its own (examples never share rows): members with memories of generated
    ages, earlier versions, citations, embeddings, and access entries listing random ones."""
    n = next(_serial)
    workspace, owner = g.create_workspace(f"{fake.company()} {n}", owner_email=f"owner{n}@{fake.domain_name()}")
    members = [owner] + [
        g.add_member(workspace, f"m{n}x{i}@{fake.domain_name()}", role="editor")
        for i in range(len(spec["members"]) - 1)
    ]
    for member, memories in zip(members, spec["members"]):
        ids: list[tuple[int, int]] = []
        for index, memory in enumerate(memories):
            namespace = ASSISTANT_NAMESPACE if memory["assistant"] else fake.word()
            # half a day off whole days: no memory sits on a cutoff, whatever the generated retention
            anchor = now - timedelta(days=memory["age_days"], hours=12)
            for v in range(memory["versions"]):
                current = v == memory["versions"] - 1
                version = MemoryVersion.objects.create(
                    workspace=workspace,
                    member=member,
                    namespace=namespace,
                    key=f"k{index}",
                    text=fake.sentence(),
                    text_length=10,
                    version=v + 1,
                    valid_from=anchor,
                    valid_to=None if current else anchor,
                    created_at=anchor,
                    retention_anchor=anchor - timedelta(days=v),
                    state=MemoryState.EXPIRED if memory["assistant"] and memory["expired"] else MemoryState.ACTIVE,
                )
                ids.append((version.pk, v + 1))
                for position in range(memory["citations"]):
                    Citation.objects.create(
                        memory=version,
                        position=position,
                        passage_id=10_000 + position,
                        document_id=1,
                        document_version_id=1,
                        sha256="1" * 64,
                    )
                if memory["embedded"]:
                    MemoryEmbedding.objects.create(memory=version, embedder_id="test", dim=1, vector=b"\0\0\0\0")
        for picks in spec["reads"]:
            listed = sorted({ids[p % len(ids)] for p in picks}) if ids else []
            if listed:
                AccessEntry.objects.create(
                    workspace=workspace,
                    member=member,
                    credential_ref=1,
                    credential_name="gen",
                    operation="recall",
                    surface="rest",
                    returned=len(listed),
                    hidden=0,
                    memories=[{"id": pk, "v": v} for pk, v in listed],
                )
    return Generated(workspace, owner, members)


def receipts_total(workspace: Workspace, since_id: int) -> dict[str, int]:
    total = dict.fromkeys(ARTIFACTS, 0)
    for receipt in DeletionReceipt.objects.filter(workspace_ref=workspace.pk, pk__gt=since_id):
        for artifact in ARTIFACTS:
            total[artifact] += receipt.manifest["artifacts"].get(artifact, 0)
    return total


def last_receipt() -> int:
    return DeletionReceipt.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def stored(workspace: Workspace) -> tuple:
    return (
        MemoryVersion.objects.filter(workspace=workspace).count(),
        Citation.objects.filter(memory__workspace=workspace).count(),
        MemoryEmbedding.objects.filter(memory__workspace=workspace).count(),
        AccessEntry.objects.filter(workspace=workspace).count(),
        DeletionReceipt.objects.filter(workspace_ref=workspace.pk).count(),
        AuditEvent.objects.filter(workspace_ref=workspace.pk).count(),
        tuple(
            ReceiptChain.objects.filter(workspace_ref=workspace.pk).values_list("seq", "head_hash")
        ),  # a dry run never moves the chain head
    )


GENERATED = hsettings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


# --- preview == the receipts of the erase that follows -------------------------------------------
@GENERATED
@given(spec=world_spec, operation=st.sampled_from(["member", "owner", "admin"]))
def test_a_bulk_erase_writes_exactly_the_manifest_its_preview_showed(db, spec, operation):
    world = build(spec, timezone.now())
    member = world.members[-1]
    plans = {
        "member": lambda: previews.plan_member_delete_all(member),
        "owner": lambda: previews.plan_owner_bulk_delete(world.workspace),
        "admin": lambda: previews.plan_admin_erase(member),
    }
    preview = plans[operation]().manifest()
    before, since = stored(world.workspace), last_receipt()
    assert stored(world.workspace) == before  # planning wrote nothing
    if operation == "member":
        actions.delete_all_own_agent_memories(member)
    elif operation == "owner":
        actions.delete_all_agent_memories(world.workspace, actor=world.owner.user)
    else:
        previews.erase_member_memories(member, actor=None, reason="generated")
    assert receipts_total(world.workspace, since) == preview["artifacts"]
    assert DeletionReceipt.objects.filter(workspace_ref=world.workspace.pk, pk__gt=since).count() == preview["receipts"]
    assert plans[operation]().manifest()["artifacts"]["memory_version"] == 0  # nothing of it is left


@GENERATED
@given(
    spec=world_spec,
    days=st.integers(min_value=1, max_value=60),
    grace=st.integers(min_value=0, max_value=10),
    chunk=st.integers(min_value=1, max_value=4),
)
def test_a_retention_change_erases_and_expires_exactly_what_its_preview_counted(db, spec, days, grace, chunk):
    now = timezone.now()
    world = build(spec, now)
    ask_history = AskHistorySettings.objects.get(workspace=world.workspace)
    plan = previews.plan_retention(ask_history, days=days, grace=grace, now=now, chunk=chunk)
    manifest = plan.manifest()
    since = last_receipt()
    applied = lifecycle.apply_retention(world.workspace.pk, days, grace, now, chunk=chunk)
    assert receipts_total(world.workspace, since) == manifest["artifacts"]
    assert applied["receipts"] == manifest["receipts"]
    assert applied["agentVersionsErased"] == manifest["agentMemories"]["versions"]
    assert applied["assistantVersionsErased"] == manifest["expiredAssistantMemoriesErased"]
    assert applied["assistantExpired"] == manifest["assistantMemoriesToExpired"]
    assert applied["assistantRestored"] == manifest["assistantMemoriesRestored"]


# --- the API: dryRun ------------------------------------------------------------------------------
def seeded(world) -> Generated:
    spec = {
        "members": [
            [{"assistant": False, "age_days": 40, "versions": 2, "citations": 1, "embedded": True, "expired": False}]
            * 3,
            [
                {"assistant": True, "age_days": 40, "versions": 1, "citations": 0, "embedded": True, "expired": False},
                {"assistant": False, "age_days": 5, "versions": 1, "citations": 2, "embedded": True, "expired": False},
            ],
        ],
        "reads": [[0, 1, 2], [3]],
    }
    return build(spec, timezone.now())


def ws_url(workspace: Workspace, path: str) -> str:
    return f"/api/w/{workspace.pk}/{path}"


@pytest.mark.parametrize(
    "path",
    [
        "ask-history/agent-memories?dryRun=1",
        "ask-history/agent-memories?dryRun=true",
        "ask-history/settings/agent-memories?dryRun=1",
    ],
)
def test_a_dry_run_delete_answers_the_manifest_and_erases_nothing(world, path):
    gen = seeded(world)
    before = stored(gen.workspace)
    response = client_for(gen.owner).delete(ws_url(gen.workspace, path))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["dryRun"] is True and body["manifest"]["artifacts"]["memory_version"] > 0
    assert stored(gen.workspace) == before  # rows, receipts and audit events unchanged
    assert "text" not in response.content.decode() or all(
        v.text not in response.content.decode() for v in MemoryVersion.objects.filter(workspace=gen.workspace)
    )


def test_the_owners_dry_run_names_no_namespace_key_or_text(world):
    gen = seeded(world)
    response = client_for(gen.owner).delete(ws_url(gen.workspace, "ask-history/settings/agent-memories?dryRun=1"))
    content = response.content.decode()
    # every string in the answer, keys included, minus the manifest's own vocabulary (a generated
    # namespace may be the word "operation" or "members": that is the schema, not a leak)
    vocabulary = {
        "dryRun",
        "manifest",
        "operation",
        "artifacts",
        "memories",
        "members",
        "receipts",
        "filters",
        "scope",
        "planToken",
        "assistantMemories",
        *ARTIFACTS,
    }
    strings: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, dict):
            strings.update(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            strings.add(value)

    walk(response.json())
    for version in MemoryVersion.objects.filter(workspace=gen.workspace):
        assert version.text not in content
        assert version.namespace not in strings - vocabulary and version.key not in strings - vocabulary


def test_the_real_delete_then_matches_the_dry_run(world):
    gen = seeded(world)
    client = client_for(gen.owner)
    preview = client.delete(ws_url(gen.workspace, "ask-history/settings/agent-memories?dryRun=1")).json()["manifest"]
    since = last_receipt()
    assert client.delete(ws_url(gen.workspace, "ask-history/settings/agent-memories")).status_code == 200
    assert receipts_total(gen.workspace, since) == preview["artifacts"]


@pytest.mark.parametrize("value", ["maybe", "2", "yes", ""])
def test_a_bad_dry_run_query_value_is_refused_and_erases_nothing(world, value):
    gen = seeded(world)
    before = stored(gen.workspace)
    response = client_for(gen.owner).delete(ws_url(gen.workspace, f"ask-history/agent-memories?dryRun={value}"))
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert "dryRun" in response.json()["error"]["details"]["fields"]
    assert stored(gen.workspace) == before


def test_settings_dry_run_answers_the_manifest_and_saves_and_erases_nothing(world):
    gen = seeded(world)
    before = stored(gen.workspace)
    response = client_for(gen.owner).put(
        ws_url(gen.workspace, "ask-history/settings"), {"agentMemoryRetentionDays": 30, "dryRun": True}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["dryRun"] is True and body["settings"]["agentMemoryRetentionDays"] == 30
    assert body["manifest"]["agentMemories"] == {"memories": 3, "versions": 6, "members": 1}
    assert body["manifest"]["assistantMemoriesToExpired"] == 1
    assert AskHistorySettings.objects.get(workspace=gen.workspace).agent_memory_retention_days == 90
    assert stored(gen.workspace) == before


@pytest.mark.parametrize("value", ["maybe", 2, 1, "true", None, [True]])
def test_a_bad_dry_run_body_value_is_refused(world, value):
    gen = seeded(world)
    before = stored(gen.workspace)
    response = client_for(gen.owner).put(
        ws_url(gen.workspace, "ask-history/settings"), {"agentMemoryRetentionDays": 30, "dryRun": value}, format="json"
    )
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert "dryRun" in response.json()["error"]["details"]["fields"]
    assert stored(gen.workspace) == before


def test_saving_a_lower_retention_over_the_api_erases_what_the_dry_run_showed(world):
    gen = seeded(world)
    client = client_for(gen.owner)
    preview = client.put(
        ws_url(gen.workspace, "ask-history/settings"), {"agentMemoryRetentionDays": 30, "dryRun": True}, format="json"
    ).json()["manifest"]
    since = last_receipt()
    response = client.put(
        ws_url(gen.workspace, "ask-history/settings"), {"agentMemoryRetentionDays": 30}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["retentionApplied"]["agentVersionsErased"] == preview["agentMemories"]["versions"] == 6
    assert receipts_total(gen.workspace, since) == preview["artifacts"]
    assert (
        DeletionReceipt.objects.filter(workspace_ref=gen.workspace.pk, pk__gt=since, operation=Operation.EXPIRY).count()
        == preview["receipts"]
    )
    assert (
        MemoryVersion.objects.filter(
            workspace=gen.workspace, namespace=ASSISTANT_NAMESPACE, state=MemoryState.EXPIRED
        ).count()
        == 1
    )


def test_a_non_owner_cannot_dry_run_the_owners_erase_or_the_settings(world):
    response = client_for(world.editor).delete(ws_url(world.workspace, "ask-history/settings/agent-memories?dryRun=1"))
    assert response.status_code == 403
    response = client_for(world.editor).put(
        ws_url(world.workspace, "ask-history/settings"), {"agentMemoryRetentionDays": 1, "dryRun": True}, format="json"
    )
    assert response.status_code == 403


# --- pages ------------------------------------------------------------------------------------------
def logged_in(member: Member, language: str = "en") -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    client.force_login(member.user)
    return client


def settings_form(days: int, grace: int = 30, **extra) -> dict:
    return {"agent_memories_enabled": "on", "agent_memory_retention_days": days, "expired_grace_days": grace, **extra}


def test_lowering_retention_on_the_page_previews_then_erases_exactly_that(world):
    gen = seeded(world)
    client = logged_in(gen.owner)
    page_url = f"/w/{gen.workspace.pk}/settings/ask-history/"
    before = stored(gen.workspace)
    confirmation = client.post(page_url, settings_form(30))
    body = confirmation.content.decode()
    assert confirmation.status_code == 200
    assert "Lowering retention to 30 days erases 3 agent memories now and moves 1 assistant memory to Expired." in body
    assert (
        stored(gen.workspace) == before
        and AskHistorySettings.objects.get(workspace=gen.workspace).agent_memory_retention_days == 90
    )
    for version in MemoryVersion.objects.filter(workspace=gen.workspace):
        assert version.text not in body
    seen = {
        f"seen_{k}": str(v)
        for k, v in previews.preview_summary(
            previews.plan_retention(gen.workspace.ask_history, days=30, grace=30, now=timezone.now()).manifest()
        ).items()
    }
    assert seen.items() <= hidden_fields(body).items()  # the page carries the numbers it showed (and the plan token)
    since = last_receipt()
    saved = client.post(page_url, hidden_fields(body))
    assert saved.status_code == 302
    receipts = DeletionReceipt.objects.filter(workspace_ref=gen.workspace.pk, pk__gt=since)
    assert sum(r.versions_erased for r in receipts) == 6
    assert AskHistorySettings.objects.get(workspace=gen.workspace).agent_memory_retention_days == 30
    assert "6 memory versions were erased now" in client.get(page_url).content.decode()


def test_a_confirmation_whose_numbers_moved_saves_nothing_and_shows_the_new_preview(world):
    gen = seeded(world)
    client = logged_in(gen.owner)
    seen = {
        "seen_agentMemories": 1,
        "seen_agentVersions": 2,
        "seen_assistantErased": 0,
        "seen_assistantToExpired": 1,
        "seen_assistantRestored": 0,
    }
    before = stored(gen.workspace)
    response = client.post(f"/w/{gen.workspace.pk}/settings/ask-history/", settings_form(30, confirm="yes", **seen))
    assert response.status_code == 409
    assert "erases 3 agent memories now" in response.content.decode()
    assert (
        stored(gen.workspace) == before
        and AskHistorySettings.objects.get(workspace=gen.workspace).agent_memory_retention_days == 90
    )


def test_the_retention_preview_reads_in_japanese(world):
    gen = seeded(world)
    client = logged_in(gen.owner, "ja")
    client.cookies["django_language"] = "ja"
    body = client.post(
        f"/w/{gen.workspace.pk}/settings/ask-history/", settings_form(30), HTTP_ACCEPT_LANGUAGE="ja"
    ).content.decode()
    assert (
        "保持期間を30日に短縮すると" in body
        and "Agent メモリ 3 件が今すぐ消去され" in body
        and "消去される内容" in body
    )


def test_a_change_that_erases_nothing_saves_without_a_confirmation(world):
    gen = seeded(world)
    response = logged_in(gen.owner).post(f"/w/{gen.workspace.pk}/settings/ask-history/", settings_form(120))
    assert response.status_code == 302
    assert AskHistorySettings.objects.get(workspace=gen.workspace).agent_memory_retention_days == 120


@pytest.mark.parametrize(
    "path, owner",
    [("what-bundata-remembers/delete-all/", False), ("settings/ask-history/delete-agent-memories/", True)],
)
def test_the_delete_all_pages_show_the_manifest_the_receipts_then_carry(world, path, owner):
    gen = seeded(world)
    member = gen.owner
    client = logged_in(member)
    url = f"/w/{gen.workspace.pk}/{path}"
    plan = previews.plan_owner_bulk_delete(gen.workspace) if owner else previews.plan_member_delete_all(member)
    manifest = plan.manifest()
    body = client.get(url).content.decode()
    assert 'data-testid="erase-manifest"' in body
    assert (
        '<div data-artifact="memory_version"><dt>Stored versions, including earlier ones</dt><dd '
        f'class="num">{manifest["artifacts"]["memory_version"]}</dd></div>' in body
    )
    since = last_receipt()
    assert client.post(url, hidden_fields(body)).status_code == 302
    assert receipts_total(gen.workspace, since) == manifest["artifacts"]


# --- the admin's erase-member action ------------------------------------------------------------------
def test_the_admin_confirmation_shows_the_manifest_and_writes_only_an_audit_event(world):
    from django.contrib.auth import get_user_model

    gen = seeded(world)
    member = gen.members[1]
    admin = get_user_model().objects.create_superuser("root@ops.test", "root@ops.test", "pw-root-123")
    client = Client()
    client.force_login(admin)
    manifest = previews.plan_admin_erase(member).manifest()
    before = stored(gen.workspace)[:5]
    events = AuditEvent.objects.count()
    page = client.post(
        "/admin/governance/member/", {"action": "erase_member_memories", "_selected_action": [member.pk]}
    )
    body = page.content.decode()
    assert page.status_code == 200
    assert (
        f"<td>{manifest['artifacts']['memory_version']}</td>" in body
        and f"<td>{manifest['artifacts']['citation']}</td>" in body
    )
    assert f"<td>{manifest['memories']} / {manifest['assistantMemories']}</td>" in body
    for version in MemoryVersion.objects.filter(member=member):
        assert version.text not in body
    assert stored(gen.workspace)[:5] == before  # rows and receipts untouched
    assert AuditEvent.objects.count() == events + 1
    event = AuditEvent.objects.get(action="memories.admin_erase_previewed")
    assert event.changes["artifacts"] == manifest["artifacts"] and event.actor == admin
    since = last_receipt()
    client.post(
        "/admin/governance/member/",
        {
            "action": "erase_member_memories",
            "_selected_action": [member.pk],
            "confirm": "yes",
            "reason": "right to erasure",
        },
    )
    assert receipts_total(gen.workspace, since) == manifest["artifacts"]


def test_forget_takes_no_dry_run(world):
    from tests.support import make_agent

    agent = make_agent(world.editor)
    assert agent.remember(namespace="prefs", key="editor", text="Prefers vim").status_code == 201
    response = agent.forget(namespace="prefs", key="editor", dryRun=True)
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert MemoryVersion.objects.filter(member=world.editor, key="editor").exists()


def hidden_fields(body: str) -> dict[str, str]:
    import re

    return {
        name: value
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', body)
        if name != "csrfmiddlewaretoken"
    }


@pytest.mark.parametrize(
    "path, owner",
    [("what-bundata-remembers/delete-all/", False), ("settings/ask-history/delete-agent-memories/", True)],
)
def test_a_delete_all_confirmed_after_the_memories_changed_is_refused_with_the_new_preview(world, path, owner):
    """The page says "the receipts will carry exactly these counts": if memories were added (or
    erased) between the preview and the click, the erase would not be the one previewed. It is
    refused (409) with the new preview, and nothing is erased; confirming that one erases it."""
    gen = seeded(world)
    member = gen.owner
    client = logged_in(member)
    url = f"/w/{gen.workspace.pk}/{path}"
    seen = hidden_fields(client.get(url).content.decode())
    writer = member if not owner else gen.members[1]
    MemoryVersion.objects.create(
        workspace=gen.workspace, member=writer, namespace="late", key=f"k{next(_serial)}", text=fake.sentence()
    )
    before, since = stored(gen.workspace), last_receipt()
    refused = client.post(url, seen)
    assert refused.status_code == 409 and stored(gen.workspace) == before and last_receipt() == since
    plan = previews.plan_owner_bulk_delete(gen.workspace) if owner else previews.plan_member_delete_all(member)
    manifest = plan.manifest()
    body = refused.content.decode()
    assert (
        '<div data-artifact="memory_version"><dt>Stored versions, including earlier ones</dt><dd '
        f'class="num">{manifest["artifacts"]["memory_version"]}</dd></div>' in body
    )
    assert client.post(url, hidden_fields(body)).status_code == 302
    assert receipts_total(gen.workspace, since) == manifest["artifacts"]


@pytest.mark.parametrize(
    "path, owner", [("ask-history/agent-memories", False), ("ask-history/settings/agent-memories", True)]
)
def test_the_api_erases_under_a_plan_token_only_what_the_dry_run_previewed(world, path, owner, settings):
    gen = seeded(world)
    client = client_for(gen.owner)
    preview = client.delete(ws_url(gen.workspace, f"{path}?dryRun=1")).json()
    plan = previews.plan_owner_bulk_delete(gen.workspace) if owner else previews.plan_member_delete_all(gen.owner)
    assert preview["planToken"] == previews.plan_token(plan)
    settings.SECRET_KEY = settings.SECRET_KEY + "-other"  # keyed: the owner cannot test guessed ids against it
    assert previews.plan_token(plan) != preview["planToken"]
    settings.SECRET_KEY = settings.SECRET_KEY.removesuffix("-other")
    MemoryVersion.objects.create(
        workspace=gen.workspace,
        member=gen.members[1] if owner else gen.owner,
        namespace="late",
        key="k",
        text=fake.sentence(),
    )
    before, since = stored(gen.workspace), last_receipt()
    for token in (preview["planToken"], "", "not-a-token"):
        refused = client.delete(ws_url(gen.workspace, f"{path}?planToken={token}"))
        assert (
            refused.status_code == 409
            and error_code(refused) == "PREVIEW_OUTDATED"
            and stored(gen.workspace) == before
            and last_receipt() == since
        )
    fresh = refused.json()["error"]["details"]
    assert client.delete(ws_url(gen.workspace, f"{path}?planToken={fresh['planToken']}")).status_code == 200
    assert receipts_total(gen.workspace, since) == fresh["manifest"]["artifacts"]


def test_a_retention_confirmation_is_refused_when_other_memories_took_the_previewed_ones_place(world):
    """Same counts, other memories: one previewed memory was forgotten and another as old was
    written. The numbers the owner saw still match, but the erase would not be the one previewed."""
    gen = seeded(world)
    client = logged_in(gen.owner)
    page_url = f"/w/{gen.workspace.pk}/settings/ask-history/"
    seen = hidden_fields(client.post(page_url, settings_form(30)).content.decode())
    old = (
        MemoryVersion.objects.filter(workspace=gen.workspace, valid_to__isnull=True)
        .exclude(namespace=ASSISTANT_NAMESPACE)
        .filter(retention_anchor__lt=timezone.now() - timedelta(days=31))
        .first()
    )
    chain = list(MemoryVersion.objects.filter(member=old.member, namespace=old.namespace, key=old.key).order_by("pk"))
    for version in chain:
        MemoryVersion.objects.create(
            **{
                f.attname: getattr(version, f.attname)
                for f in MemoryVersion._meta.concrete_fields
                if f.attname not in ("id", "key", "key_id")
            },
            key=f"{old.key}-twin",
        )
    MemoryVersion.objects.filter(pk__in=[v.pk for v in chain]).delete()
    summary = previews.preview_summary(
        previews.plan_retention(gen.workspace.ask_history, days=30, grace=30, now=timezone.now()).manifest()
    )
    assert {f"seen_{k}": str(v) for k, v in summary.items()}.items() <= seen.items()  # the numbers did not move
    before = stored(gen.workspace)
    response = client.post(page_url, seen)
    assert response.status_code == 409 and stored(gen.workspace) == before
    assert AskHistorySettings.objects.get(workspace=gen.workspace).agent_memory_retention_days == 90
    assert client.post(page_url, hidden_fields(response.content.decode())).status_code == 302


def test_the_settings_put_saves_under_a_plan_token_only_what_the_dry_run_previewed(world):
    gen = seeded(world)
    client = client_for(gen.owner)
    url = ws_url(gen.workspace, "ask-history/settings")
    preview = client.put(url, {"agentMemoryRetentionDays": 30, "dryRun": True}, content_type="application/json").json()
    old = (
        MemoryVersion.objects.filter(workspace=gen.workspace, valid_to__isnull=True)
        .exclude(namespace=ASSISTANT_NAMESPACE)
        .filter(retention_anchor__lt=timezone.now() - timedelta(days=31))
        .first()
    )
    MemoryVersion.objects.filter(member=old.member, namespace=old.namespace, key=old.key).delete()
    before = stored(gen.workspace)
    for token in (preview["planToken"], "", 7):
        refused = client.put(url, {"agentMemoryRetentionDays": 30, "planToken": token}, content_type="application/json")
        assert refused.status_code == (400 if token == 7 else 409) and stored(gen.workspace) == before
    assert AskHistorySettings.objects.get(workspace=gen.workspace).agent_memory_retention_days == 90
    again = client.put(url, {"agentMemoryRetentionDays": 30, "dryRun": True}, content_type="application/json").json()[
        "planToken"
    ]
    fresh = client.put(url, {"agentMemoryRetentionDays": 30, "planToken": again}, content_type="application/json")
    assert (
        fresh.status_code == 200
        and AskHistorySettings.objects.get(workspace=gen.workspace).agent_memory_retention_days == 30
    )
