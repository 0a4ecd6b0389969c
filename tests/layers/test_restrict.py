"""`restrict(member, action)` (`core.restrict`): every QuerySet of rows a member may see has the
one verb, refuses an action outside the vocabulary, and keeps to the member's workspace.

The rules themselves are tested where they are read: receipts and usage in
`layers/test_actions_hold_rules.py` and `credits/test_usage.py`, memory versions in
`layers/test_model_rules.py`, the re-check in `memories/test_recheck.py`; here the ones no other
test states row by row (collections, documents, access entries)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from core.restrict import ACTIONS, KEEP, VIEW, check_action
from credits.models import UsageRecord
from governance import actions as governance
from governance.models import Collection, Credential, Document
from memoryapp.models import AccessEntry, MemoryVersion
from retention.models import DeletionReceipt

RESTRICTED = [Collection, Document, MemoryVersion, AccessEntry, DeletionReceipt, UsageRecord, Credential]

ROOT = Path(__file__).resolve().parent.parent.parent
#: Who-may-see predicates the `restrict` methods write; each spelled in its model module only.
RULES = {
    "a collection's readers (Collection.objects.restrict)": (
        re.compile(r"\brestricted=False\b|Q\(readers="),
        "governance/models.py",
    ),
    "the access log's window (AccessEntry.objects.within_retention / past_retention)": (
        re.compile(r"timedelta\(days=settings\.ACCESS_LOG_RETENTION_DAYS"),
        "memoryapp/models.py",
    ),
    "whose usage an owner reads (UsageRecord.objects.restrict)": (
        re.compile(r"has_perm\([\"']usage:read_all"),
        "credits/models.py",
    ),
    'what a member still holds of their memories (MemoryVersion.objects.restrict(member, "keep"))': (
        re.compile(r"\.kept_for_member\("),
        "memoryapp/models.py",
    ),
}


def test_no_who_may_see_rule_is_written_outside_its_model():
    copies = []
    for app in ("memoryapp", "governance", "retention", "credits", "config", "core"):
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "migrations" in relative:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                copies += [
                    f"{relative}:{number}: {rule}"
                    for rule, (pattern, owner) in RULES.items()
                    if relative != owner and pattern.search(line)
                ]
    assert copies == [], "call the model's restrict() instead:\n" + "\n".join(copies)
    planted = [
        "Collection.objects.filter(Q(restricted=False) | Q(readers=member))",
        "now - timedelta(days=settings.ACCESS_LOG_RETENTION_DAYS)",
        'member.has_perm("usage:read_all")',
        "MemoryVersion.objects.filter(member=member).kept_for_member(ask_history)",
    ]
    assert all(any(pattern.search(line) for pattern, _ in RULES.values()) for line in planted)


def test_the_vocabulary_is_view_and_keep_and_an_unknown_action_is_refused():
    assert ACTIONS == {VIEW, KEEP} == {"view", "keep"}
    assert check_action("view") == "view" and check_action("keep", {"view", "keep"}) == "keep"
    for action in ("View", "manage", "", "view ", "keep"):  # "keep" only where a model says it knows it
        with pytest.raises(ValueError, match="unknown action"):
            check_action(action)
    with pytest.raises(ValueError, match="unknown action"):
        check_action("manage", {"view", "manage"})  # a model cannot widen the vocabulary


@pytest.mark.parametrize("model", RESTRICTED, ids=lambda m: m.__name__)
def test_every_member_visible_model_restricts_and_refuses_an_unknown_action(world, model):
    assert list(model.objects.restrict(world.outsider, "view")) == []  # nothing of Acme, nothing yet of Globex
    with pytest.raises(ValueError):
        model.objects.restrict(world.editor, "manage")
    if model is not MemoryVersion:  # "keep" is the member's own memories' action alone
        with pytest.raises(ValueError):
            model.objects.restrict(world.editor, "keep")


def test_collections_and_documents_are_the_readable_ones_of_the_members_workspace(world):
    open_ = governance.create_collection(world.workspace, name="Handbook")
    closed = governance.create_collection(world.workspace, name="Board", restricted=True, readers=[world.editor])
    wiki = governance.create_collection(
        world.workspace, name="Wiki", readers=[world.editor, world.viewer]
    )  # listed readers, not restricted
    elsewhere = governance.create_collection(world.other_workspace, name="Globex")
    handbook = governance.create_document(open_, title="Leave", text="Ten days a year.")
    board = governance.create_document(closed, title="Minutes", text="Budget approved.")
    governance.create_document(open_, title="Old", text="Gone.", expires_at=timezone.now() - timedelta(seconds=1))
    governance.create_document(elsewhere, title="Theirs", text="Not ours.")

    def seen(model, member):
        return set(model.objects.restrict(member, "view").values_list("pk", flat=True))

    assert seen(Collection, world.editor) == {open_.pk, closed.pk, wiki.pk}
    assert (
        seen(Collection, world.viewer) == seen(Collection, world.owner) == {open_.pk, wiki.pk}
    )  # restricted: its readers only, whatever the role
    assert seen(Collection, world.outsider) == {elsewhere.pk}
    assert seen(Document, world.editor) == {handbook.pk, board.pk}  # never the expired one
    assert seen(Document, world.viewer) == {handbook.pk}
    assert (
        Collection.objects.restrict(world.editor, "view").count() == 3
    )  # one row per collection, however many readers
    assert len(Document.objects.restrict(world.viewer, "view")) == 1


def test_access_entries_are_the_members_own_within_the_retention_window(world):
    now = timezone.now()

    def entry(member, at):
        return AccessEntry.objects.create(
            workspace=member.workspace,
            member=member,
            credential_ref=1,
            credential_name="c",
            operation="list",
            surface="rest",
            at=at,
            returned=1,
            memories=[{"id": 1, "v": 1}],
        )

    recent = entry(world.editor, now - timedelta(days=settings.ACCESS_LOG_RETENTION_DAYS) + timedelta(minutes=1))
    old = entry(world.editor, now - timedelta(days=settings.ACCESS_LOG_RETENTION_DAYS, minutes=1))
    owners = entry(world.owner, now)
    assert list(AccessEntry.objects.restrict(world.editor, "view")) == [recent]
    assert list(AccessEntry.objects.restrict(world.owner, "view")) == [
        owners
    ]  # an owner reads counts, not others' entries
    assert set(AccessEntry.objects.past_retention()) == {old}
    assert set(AccessEntry.objects.of_removed_members()) == set()
    type(world.editor).objects.filter(pk=world.editor.pk).update(left_at=now)  # as a racing read would leave them
    assert set(AccessEntry.objects.of_removed_members()) == {recent, old}


def test_keep_is_what_the_member_still_holds_view_what_reads_return(world):
    from memoryapp.assistant import add_assistant_memory, add_expired_assistant_memory
    from tests.support import make_agent

    agent = make_agent(world.editor)
    live = int(agent.remember(namespace="n", text="a live note").json()["memory"]["id"])
    expired = add_expired_assistant_memory(world.editor, kind="preference", topic="tea", summary="Likes green tea.")
    active, _ = add_assistant_memory(world.editor, kind="preference", topic="coffee", summary="No coffee after 3.")
    others = make_agent(world.owner).remember(namespace="n", text="the owner's note").json()["memory"]["id"]

    def ids(action):
        return set(MemoryVersion.objects.restrict(world.editor, action).values_list("pk", flat=True))

    assert ids("view") == {live, active.pk}
    assert ids("keep") == {live, active.pk, expired.pk}  # expired within its grace: offered to reactivate
    owners = set(MemoryVersion.objects.restrict(world.owner, "keep").values_list("pk", flat=True))
    assert int(others) not in ids("keep") and owners == {int(others)}  # never another member's, whatever the role
    MemoryVersion.objects.filter(pk=live).update(unreachable_at=timezone.now())
    assert live not in ids("keep") | ids("view")  # unreachable: in neither, whatever is still stored
