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

from core.restrict import ACTIONS, VIEW, check_action
from credits.models import UsageRecord
from governance import actions as governance
from governance.models import Collection, Document
from memoryapp.models import AccessEntry, MemoryVersion
from retention.models import DeletionReceipt

RESTRICTED = [Collection, Document, MemoryVersion, AccessEntry, DeletionReceipt, UsageRecord]

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
    ]
    assert all(any(pattern.search(line) for pattern, _ in RULES.values()) for line in planted)


def test_the_vocabulary_is_view_alone_and_an_unknown_action_is_refused():
    assert ACTIONS == {VIEW} == {"view"}
    assert check_action("view") == "view"
    for action in ("View", "manage", "", "view "):
        with pytest.raises(ValueError, match="unknown action"):
            check_action(action)


@pytest.mark.parametrize("model", RESTRICTED, ids=lambda m: m.__name__)
def test_every_member_visible_model_restricts_and_refuses_an_unknown_action(world, model):
    assert list(model.objects.restrict(world.outsider, "view")) == []  # nothing of Acme, nothing yet of Globex
    with pytest.raises(ValueError):
        model.objects.restrict(world.editor, "manage")


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
