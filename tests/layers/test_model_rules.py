"""A rule about one model lives on that model (docs/architecture.md, "Glossary and model rules").

The expiry rule, the grace cutoff, "active member", "usable credential", "live context set",
"unexpired document" and the agent/assistant split are QuerySet methods and model methods; this
suite fails when a copy of one of their raw predicates reappears anywhere else in the apps, and
checks the methods against the rows they select.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone, translation
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.models import AskHistorySettings, Credential, Member
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryState, MemoryVersion

ROOT = Path(__file__).resolve().parent.parent.parent
APPS = ("memoryapp", "governance", "retention", "credits", "config", "core")
#: The modules that own the predicates: each may spell its own.
OWNERS = {Path("memoryapp/models.py"), Path("governance/models.py")}

RAW_PREDICATES = {
    "the expiry rule or the grace cutoff (MemoryVersion.objects.live / within_retention / past_grace …)": re.compile(
        r"retention_anchor__(gt|gte|lt|lte)\b|retention_anchor\s*[<>]"
    ),
    "a retention date computed from the settings (version.expires_at / grace_ends_at)": re.compile(
        r"timedelta\(days=[^)]*(agent_memory_retention_days|expired_grace_days)"
    ),
    "an expiry computed from an anchor (expires_from / expiry_expression)": re.compile(
        r"anchor\b.*\+\s*timedelta\(days"
    ),
    "current version (MemoryVersion.objects.current / superseded, version.is_current)": re.compile(
        r"valid_to__isnull|valid_to IS NULL|valid_to\s+is\s+(not\s+)?None"
    ),
    "unreachable (MemoryVersion.objects.reachable / unreachable, unreachable_q)": re.compile(r"unreachable_at__isnull"),
    "active member (Member.objects.active / removed)": re.compile(
        r"left_at__isnull|left_at\s*[!=]=\s*None|left_at\s+is\s+(not\s+)?None"
    ),
    (
        "usable credential or personal token (Credential.objects.active / not_revoked, PersonalToken.objects.active)"
    ): re.compile(r"revoked_at__isnull"),
    "the agent/assistant split (MemoryVersion.objects.agent / assistant)": re.compile(
        r"(exclude|filter|Q)\(namespace=ASSISTANT_NAMESPACE\b"
    ),
    "context set not deleted (ContextSet.objects.live, context_set.is_deleted)": re.compile(
        r"deleted_at__isnull|deleted_at\s*[!=]=\s*None|deleted_at\s+is\s+(not\s+)?None"
    ),
    (
        "document or credential expiry as a query (Document.objects.unexpired, Credential.objects.active / expired)"
    ): re.compile(r"expires_at__(isnull|gt|gte|lt|lte)\b"),
}


def _sources() -> list[Path]:
    return sorted(p for app in APPS for p in (ROOT / app).rglob("*.py") if "migrations" not in p.parts)


def test_no_raw_predicate_is_written_outside_its_model():
    copies = []
    for path in _sources():
        relative = path.relative_to(ROOT)
        if relative in OWNERS:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for rule, pattern in RAW_PREDICATES.items():
                if pattern.search(line):
                    copies.append(f"{relative}:{number}: {rule}: {line.strip()}")
    assert copies == [], "call the model's QuerySet or method instead:\n" + "\n".join(copies)


def test_the_scan_finds_a_planted_copy():
    planted = {
        "MemoryVersion.objects.filter(retention_anchor__gt=cutoff)": "expiry",
        "if version.retention_anchor > cutoff:": "expiry",
        "now - timedelta(days=ask_history.agent_memory_retention_days + ask_history.expired_grace_days)": "date",
        "Member.objects.filter(left_at__isnull=True)": "member",
        "return obj.left_at is None": "member",
        "Credential.objects.filter(revoked_at__isnull=True)": "credential",
        "queryset.exclude(namespace=ASSISTANT_NAMESPACE)": "split",
        "Count('pk', filter=Q(namespace=ASSISTANT_NAMESPACE, valid_to__isnull=True))": "split",
        'expired_at=F("retention_anchor") + timedelta(days=days)': "anchor",
        "min(anchor for _, anchor in rows) + timedelta(days=expired_after_days)": "anchor",
        "SELECT count(*) FILTER (WHERE valid_to IS NULL)": "current",
        "return obj.valid_to is None": "current",
        "Count('pk', filter=Q(unreachable_at__isnull=False))": "unreachable",
        "ContextSet.objects.filter(workspace=workspace, deleted_at__isnull=True)": "context set",
        "if context_set.deleted_at is not None:": "context set",
        "Q(expires_at__isnull=True) | Q(expires_at__gt=now)": "document expiry",
        "Document.objects.filter(expires_at__lte=now)": "document expiry",
    }
    for line in planted:
        assert any(p.search(line) for p in RAW_PREDICATES.values()), line


# --- the methods agree with the rule they state --------------------------------------------------
@pytest.fixture
def member(db, django_user_model):
    from governance.models import Workspace

    workspace = Workspace.objects.create(name="rules")
    AskHistorySettings.objects.create(workspace=workspace, agent_memory_retention_days=30, expired_grace_days=10)
    user = django_user_model.objects.create_user("rules@example.com", "rules@example.com", "x")
    return Member.objects.create(workspace=workspace, user=user, role="owner")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)  # rows are reset per input
@given(
    age_days=st.integers(min_value=0, max_value=60),
    assistant=st.booleans(),
    expired_state=st.booleans(),
    unreachable=st.booleans(),
)
@pytest.mark.django_db
def test_querysets_and_row_methods_select_the_same_versions(member, age_days, assistant, expired_state, unreachable):
    now = timezone.now()
    ask_history = member.workspace.ask_history
    MemoryVersion.objects.filter(member=member).delete()
    version = MemoryVersion.objects.create(
        workspace=member.workspace,
        member=member,
        namespace=ASSISTANT_NAMESPACE if assistant else "notes",
        key="topic" if assistant else None,
        text="a note",
        retention_anchor=now - timedelta(days=age_days, seconds=1),
        state=MemoryState.EXPIRED if (assistant and expired_state) else MemoryState.ACTIVE,
        unreachable_at=now if unreachable else None,
    )
    rows = MemoryVersion.objects.filter(member=member)
    live = rows.live(ask_history, at=now).exists()
    assert live == (not unreachable and version.is_live(ask_history, now))
    assert live == (not unreachable and version.state == MemoryState.ACTIVE and age_days < 30)
    assert rows.past_retention(30, at=now).exists() == (age_days >= 30)
    assert rows.past_grace(30, 10, at=now).exists() == (age_days >= 40)
    assert version.expires_at(ask_history) == version.retention_anchor + timedelta(days=30)
    assert version.grace_ends_at(ask_history) == version.retention_anchor + timedelta(days=40)
    kept = rows.kept_for_member(ask_history, at=now).exists()
    if unreachable:
        assert not kept
    elif assistant:
        assert kept == (version.grace_ends_at(ask_history) > now)
    else:
        assert kept == live
    assert rows.agent().exists() == (not assistant)
    assert rows.assistant().exists() == assistant


@pytest.mark.django_db
def test_credential_status_querysets_partition_like_the_row_methods(member):
    now = timezone.now()
    cases = {
        "open": {},
        "expiring": {"expires_at": now + timedelta(days=1)},
        "expired": {"expires_at": now - timedelta(seconds=1)},
        "revoked": {"revoked_at": now},
        "revoked and expired": {"revoked_at": now, "expires_at": now - timedelta(days=1)},
    }
    for n, (name, fields) in enumerate(cases.items()):
        Credential.objects.create(
            workspace=member.workspace, member=member, name=name, prefix=f"p{n}", token_hash="h", **fields
        )
    by_name = {c.name: c for c in Credential.objects.all()}
    assert (
        {c.name for c in Credential.objects.active(now)}
        == {n for n, c in by_name.items() if c.is_usable(now)}
        == {"open", "expiring"}
    )
    assert {c.name for c in Credential.objects.expired(now)} == {"expired"}
    assert {c.name for c in Credential.objects.revoked()} == {"revoked", "revoked and expired"}


@pytest.mark.django_db
def test_active_and_removed_members_partition(member, django_user_model):
    other = Member.objects.create(
        workspace=member.workspace,
        user=django_user_model.objects.create_user("gone", "gone@example.com", "x"),
        left_at=timezone.now(),
    )
    assert list(Member.objects.active()) == [member]
    assert list(Member.objects.removed()) == [other]
    assert [m.is_active for m in (member, other)] == [True, False]


@pytest.mark.django_db
@pytest.mark.parametrize("shift_days", [-20, 0, 20])
def test_every_retention_queryset_is_read_at_the_instant_it_is_given(member, shift_days):
    """The QuerySets answer at `at`, not at the wall clock (the sweeps, previews and asOf pass it):
    a grid of anchors around the retention (30 days) and grace (10 more) boundaries, agent and
    assistant, active and expired, reachable or not, checked against the rules written out."""
    from memoryapp.models import grace_cutoff, past_retention_q

    now = timezone.now()
    at = now + timedelta(days=shift_days)
    ask_history = member.workspace.ask_history
    rows = {}
    grid = [
        (age, kind, expired, unreachable)
        for age in (1, 15, 25, 30, 35, 40, 45, 50, 55, 60, 65)
        for kind in (False, True)
        for expired in ((False, True) if kind else (False,))
        for unreachable in (False, True)
    ]
    for n, (age, assistant, expired, unreachable) in enumerate(grid):
        version = MemoryVersion.objects.create(
            workspace=member.workspace,
            member=member,
            namespace=ASSISTANT_NAMESPACE if assistant else "notes",
            key=f"k{n}",
            text="a note",
            retention_anchor=now - timedelta(days=age),
            state=MemoryState.EXPIRED if expired else MemoryState.ACTIVE,
            unreachable_at=now if unreachable else None,
        )
        rows[version.pk] = (at - version.retention_anchor, assistant, expired, unreachable)
    days, grace = timedelta(days=30), timedelta(days=40)
    select = lambda rule: {pk for pk, row in rows.items() if rule(*row)}  # noqa: E731
    versions = MemoryVersion.objects.filter(member=member)
    ids = lambda queryset: set(queryset.values_list("pk", flat=True))  # noqa: E731
    assert ids(versions.within_retention(30, at=at)) == select(lambda age, *_: age < days)
    assert (
        ids(versions.past_retention(30, at=at))
        == ids(versions.filter(past_retention_q(30, at)))
        == select(lambda age, *_: age >= days)
    )
    assert ids(versions.within_grace(30, 10, at=at)) == select(lambda age, *_: age < grace)
    assert ids(versions.past_grace(30, 10, at=at)) == select(lambda age, *_: age >= grace)
    assert grace_cutoff(30, 10, at) == at - grace
    live = select(lambda age, assistant, expired, unreachable: not unreachable and not expired and age < days)
    assert (
        ids(versions.live(ask_history, at=at))
        == ids(MemoryVersion.objects.restrict(member, "view", ask_history=ask_history, at=at))
        == live
    )
    kept = select(
        lambda age, assistant, expired, unreachable: (
            not unreachable and (age < grace if assistant else (not expired and age < days))
        )
    )
    assert ids(versions.kept_for_member(ask_history, at=at)) == kept
    # the row methods agree at the same instant, boundaries included (anchors exactly 30 and 40 days back)
    by_pk = {v.pk: v for v in versions}
    assert {pk for pk, v in by_pk.items() if v.is_live(ask_history, at) and v.unreachable_at is None} == live
    from memoryapp.models import expiry_expression

    versions.update(expired_at=expiry_expression(30))
    assert all(
        v.expired_at == v.expires_at(ask_history) == v.retention_anchor + days
        for v in MemoryVersion.objects.filter(member=member)
    )


@pytest.mark.django_db
def test_a_credentials_status_is_revoked_before_expired_before_active(member):
    """One status per credential for the pages and the admin (`Credential.status`)."""
    from governance.models import CredentialStatus

    now = timezone.now()
    cases = {
        "open": ({}, CredentialStatus.ACTIVE),
        "expires at now": ({"expires_at": now}, CredentialStatus.EXPIRED),
        "expires later": ({"expires_at": now + timedelta(seconds=1)}, CredentialStatus.ACTIVE),
        "revoked and expired": ({"revoked_at": now, "expires_at": now - timedelta(days=1)}, CredentialStatus.REVOKED),
    }
    for n, (name, (fields, expected)) in enumerate(cases.items()):
        credential = Credential.objects.create(
            workspace=member.workspace, member=member, name=name, prefix=f"s{n}", token_hash="h", **fields
        )
        assert credential.status(now) == expected, name


def test_the_settings_ranges_are_the_models_in_the_api_body_and_the_form():
    """One range per setting (governance.models): the check constraint, the API body and the page's form agree."""
    from governance.api.serializers import SettingsBody
    from governance.models import GRACE_DAYS_RANGE, RETENTION_DAYS_RANGE
    from memoryapp.pages.forms import AskHistorySettingsForm

    body, form = SettingsBody().fields, AskHistorySettingsForm().fields
    for api, field, (low, high) in (
        ("agentMemoryRetentionDays", "agent_memory_retention_days", RETENTION_DAYS_RANGE),
        ("expiredGraceDays", "expired_grace_days", GRACE_DAYS_RANGE),
    ):
        assert (
            (body[api].min_value, body[api].max_value) == (form[field].min_value, form[field].max_value) == (low, high)
        )
        with translation.override("en"):
            assert f"Between {low} and {high}." in str(form[field].help_text)


def test_live_context_sets_are_the_ones_not_deleted_like_the_row_property(member):
    from governance.models import ContextSet

    kept = ContextSet.objects.create(workspace=member.workspace, name="kept")
    paused = ContextSet.objects.create(workspace=member.workspace, name="paused", active=False)
    gone = ContextSet.objects.create(workspace=member.workspace, name="gone", active=False, deleted_at=timezone.now())
    assert list(ContextSet.objects.live()) == [kept, paused]  # paused is live: inactive, not deleted
    assert [s.is_deleted for s in (kept, paused, gone)] == [False, False, True]
    assert [s.usable for s in (kept, paused, gone)] == [True, False, False]


@pytest.mark.django_db
def test_a_document_is_unexpired_strictly_before_its_expiry_instant(member):
    """`expires_at == at` is expired (readable strictly before it), in the query and on the row."""
    from governance.models import Collection, Document

    at = timezone.now()
    collection = Collection.objects.create(workspace=member.workspace, name="c")
    documents = {
        name: Document.objects.create(
            workspace=member.workspace, collection=collection, title=name, expires_at=expires_at
        )
        for name, expires_at in {
            "never": None,
            "after": at + timedelta(microseconds=1),
            "at": at,
            "before": at - timedelta(microseconds=1),
        }.items()
    }
    unexpired = {d.title for d in Document.objects.unexpired(at)}
    assert unexpired == {name for name, d in documents.items() if not d.is_expired(at)} == {"never", "after"}
    assert {d.title for d in Document.objects.unexpired(at - timedelta(microseconds=1))} == {"never", "after", "at"}
    Document.objects.filter(title="after").update(expires_at=timezone.now() + timedelta(hours=1))
    assert {d.title for d in Document.objects.unexpired()} == {"never", "after"}  # no `at`: now
    assert not documents["never"].is_expired() and documents["before"].is_expired()


@pytest.mark.django_db
def test_a_save_that_writes_the_text_rewrites_its_digest_and_length_and_only_what_it_names(member):
    """`MemoryVersion.save`: the keyed digest and the length follow the text whenever a save writes
    it (update_fields naming `text` gains both), and a save naming other fields writes only those."""
    version = MemoryVersion.objects.create(
        workspace=member.workspace, member=member, namespace="notes", text="first text"
    )
    first_digest = version.text_hmac
    version.text = "a longer second text"
    version.save(update_fields=["text"])
    stored = MemoryVersion.objects.get(pk=version.pk)
    assert stored.text == "a longer second text" and stored.text_length == len("a longer second text")
    assert stored.text_hmac == version.text_hmac != first_digest
    stale = MemoryVersion.objects.get(pk=version.pk)
    MemoryVersion.objects.filter(pk=version.pk).update(valid_to=timezone.now())  # written meanwhile by someone else
    stale.state = MemoryState.EXPIRED
    stale.save(update_fields=["state"])
    again = MemoryVersion.objects.get(pk=version.pk)
    assert again.state == MemoryState.EXPIRED and again.valid_to is not None  # the other write is kept
    assert (again.text_hmac, again.text_length) == (stored.text_hmac, stored.text_length)
