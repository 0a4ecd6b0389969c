"""The admin is no oracle for memory content (SPEC §10, issue: privacy under attack).

An auditor who cannot read a memory must not be able to confirm a guess about it either: a
changelist's row count (or row order) that depends on memory content would let them rebuild the
text one character at a time (`?terms__regex=^a`, `?text_hmac=<a digest copied from another row>`).

The proof enumerates every registered ModelAdmin × every field path (own fields, and one hop
through every forward and reverse relation) × the lookup types, plus every search and every
sortable column, with values derived from planted content. Every probe runs twice: once with the
planted content, once after the same rows have been given other content (every field the models
declare as content-derived is copied from a twin written beforehand through the real write
paths — so a new declared field is covered without touching this test). The ids, members, dates and every
other metadata field are identical in both states, so a probe whose answer differs between them
is reading content. No probe may differ.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest
from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import FieldError, SuspiciousOperation
from django.db import connection, models
from django.test import RequestFactory

from credits.models import Consolidation
from governance.content import content_derived_fields, declares_content, lookup_reaches_content
from memoryapp.assistant import add_assistant_memory
from memoryapp.models import MemoryEmbedding, MemoryVersion
from tests.admin.support import admin_url, browser
from tests.support import make_agent

pytestmark = pytest.mark.django_db

MARKER = "quixotryx"  # one recall token, found in no other row
SECRET_TEXT = f"Apricot {MARKER} prefers the blue notebook; mail ada@example.com before Friday"
SECRET_DETAIL = f"Detail {MARKER} lemon"
OTHER_TEXT = "Zucchini velvetwing hums"  # another length, other tokens, another detected kind: none
OTHER_DETAIL = "Other detail plum"
NEIGHBOUR_TEXT = "Mango neighbour row for ordering"


@dataclass
class Planted:
    agent_version: MemoryVersion
    assistant_version: MemoryVersion
    consolidation: Consolidation


def plant(member, *, text: str, detail: str, kind: str, key: str) -> Planted:
    """One agent memory (with its index entry), one assistant memory with details and a kind,
    one stored consolidation input — through the product's write paths."""
    agent = make_agent(member)
    assert agent.remember(namespace="notes", key=key, text=text).status_code == 201
    agent_version = MemoryVersion.objects.get(member=member, namespace="notes", key=key)
    assistant_version, _ = add_assistant_memory(member, kind=kind, topic=f"{key}_topic", summary=text, details=[detail])
    consolidation = Consolidation.objects.create(
        workspace=member.workspace,
        member=member,
        conversation_id=f"conv-{key}",
        messages=[{"role": "user", "content": text}],
        message_count=1,
    )
    return Planted(agent_version, assistant_version, consolidation)


def swap_content(target: Planted, source: Planted) -> None:
    """Give `target`'s rows `source`'s content: every declared content-derived field, nothing else."""
    pairs = [
        (MemoryVersion, target.agent_version.pk, source.agent_version.pk),
        (MemoryVersion, target.assistant_version.pk, source.assistant_version.pk),
        (MemoryEmbedding, target.agent_version.pk, source.agent_version.pk),
        (MemoryEmbedding, target.assistant_version.pk, source.assistant_version.pk),
        (Consolidation, target.consolidation.pk, source.consolidation.pk),
    ]
    for model, target_pk, source_pk in pairs:
        # Content is sealed under each row's own key (SPEC §8.2): a ciphertext copied to another
        # row would not open. The rows are opened and the target saved, so it is sealed again.
        source, row = model.objects.get(pk=source_pk), model.objects.get(pk=target_pk)
        for name in sorted(content_derived_fields(model)):
            setattr(row, name, getattr(source, name))
        row.save()


# --- probe values, derived from the planted content -------------------------------------------
def probe_values(text: str, detail: str, kind: str) -> dict[str, list[str]]:
    sha = hashlib.sha256(text.encode()).hexdigest()
    return {
        "exact": [text, detail, kind, sha, MARKER, str(len(text)), '["EMAIL"]'],
        "iexact": [text.upper(), kind.upper(), MARKER.upper()],
        "contains": [MARKER, "EMAIL", sha[:8]],
        "icontains": [MARKER.upper(), "email"],
        "startswith": [text[:9], sha[:6], kind[:4]],
        "istartswith": [text[:9].lower()],
        "endswith": [text[-7:]],
        "regex": [f"^{text[:4]}", MARKER, f"^{sha[:3]}"],
        "iregex": [f"^{text[:4].lower()}"],
        "in": [f"{kind},x", f"{sha},x", f"{len(text)},1"],
        "gt": [str(len(text) - 1)],
        "gte": [str(len(text))],
        "lt": [str(len(text) + 1)],
        "lte": [str(len(text))],
        "isnull": ["True", "False"],
        "has_key": ["content"],
        "": [text, MARKER, sha, str(len(text)), kind],
    }


def field_paths(model: type[models.Model]) -> list[tuple[str, models.Field | models.ForeignObjectRel]]:
    """Own fields, and one hop through every relation (forward and reverse)."""
    paths = []
    for field in model._meta.get_fields(include_hidden=False):
        name = field.name  # a reverse relation's name is its query name
        paths.append((name, field))
        if field.is_relation and field.related_model is not None and field.related_model is not model:
            for inner in field.related_model._meta.get_fields():
                if inner.concrete:
                    paths.append((f"{name}__{inner.name}", inner))
    return paths


@dataclass(frozen=True)
class Probe:
    admin_label: str
    params: tuple[tuple[str, str], ...]
    kind: str  # "lookup", "search" or "order"


def build_probes(values: dict[str, list[str]]) -> list[Probe]:
    probes: list[Probe] = []
    for model, model_admin in admin.site._registry.items():
        label = model._meta.label_lower
        for path, _ in field_paths(model):
            for lookup, candidates in values.items():
                key = f"{path}__{lookup}" if lookup else path
                probes.extend(Probe(label, ((key, value),), "lookup") for value in candidates)
        if model_admin.search_fields:
            probes.extend(Probe(label, (("q", value),), "search") for value in values[""] + values["contains"])
        for index in range(len(model_admin.list_display)):
            probes.extend(Probe(label, (("o", order),), "order") for order in (str(index), f"-{index}"))
    return probes


@dataclass(frozen=True)
class Answer:
    outcome: str  # "rows", "refused" (400), "invalid" (Django's ?e=1 redirect)
    rows: tuple[int, ...] = ()


def answer(probe: Probe, user, factory: RequestFactory) -> Answer:
    model = next(m for m in admin.site._registry if m._meta.label_lower == probe.admin_label)
    model_admin = admin.site._registry[model]
    request = factory.get("/admin/", dict(probe.params))
    request.user = user
    try:
        changelist = model_admin.get_changelist_instance(request)
    except SuspiciousOperation:
        return Answer("refused")
    except IncorrectLookupParameters:
        return Answer("invalid")
    return Answer("rows", tuple(obj.pk for obj in changelist.result_list))


def run_all(probes: list[Probe], user) -> dict[Probe, Answer]:
    factory = RequestFactory()
    return {probe: answer(probe, user, factory) for probe in probes}


@pytest.fixture
def planted(world, staff):
    secret = plant(world.editor, text=SECRET_TEXT, detail=SECRET_DETAIL, kind="preference", key="secret")
    plant(world.editor, text=NEIGHBOUR_TEXT, detail="neighbour detail", kind="fact", key="neighbour")
    return secret


def test_no_probe_of_any_admin_answers_differently_when_only_memory_content_differs(world, staff, planted):
    probes = build_probes(probe_values(SECRET_TEXT, SECRET_DETAIL, "preference"))
    twin = plant(world.owner, text=OTHER_TEXT, detail=OTHER_DETAIL, kind="instruction", key="twin")
    before = run_all(probes, staff.auditor)

    swap_content(planted, twin)
    planted.agent_version.refresh_from_db()
    assert planted.agent_version.text == OTHER_TEXT  # the swap really changed the content

    after = run_all(probes, staff.auditor)
    differing = [(probe, before[probe], after[probe]) for probe in probes if before[probe] != after[probe]]
    outcomes = Counter(a.outcome for a in before.values())
    print(
        f"\nadmin oracle: {len(probes)} probes over {len(admin.site._registry)} admins; outcomes {dict(outcomes)}; "
        f"differing {len(differing)}"
    )
    assert not differing, "\n".join(f"{p.admin_label} {urlencode(p.params)}: {b} -> {a}" for p, b, a in differing[:20])
    # The probes are not vacuous: plenty ran and returned rows, and content paths were refused.
    assert outcomes["rows"] > 1000 and outcomes["refused"] > 500


def test_the_probes_would_catch_an_admin_that_let_content_through(world, staff, planted, monkeypatch):
    """The same enumeration, with the guard switched off for one field, finds the oracle."""
    from governance import admin_base

    # Content itself is sealed (SPEC §8.2): no lookup can read it, guard or not (below). A content
    # digest is stored in the clear (a size), so the guard is what keeps it from being an oracle.
    original = admin_base.lookup_reaches_content
    monkeypatch.setattr(
        admin_base,
        "lookup_reaches_content",
        lambda model, lookup: False if lookup.startswith("text_length") else original(model, lookup),
    )
    probes = [
        p
        for p in build_probes(probe_values(SECRET_TEXT, SECRET_DETAIL, "preference"))
        if p.admin_label == "memoryapp.memoryversion"
    ]
    twin = plant(world.owner, text=OTHER_TEXT, detail=OTHER_DETAIL, kind="instruction", key="twin")
    before = run_all(probes, staff.auditor)
    swap_content(planted, twin)
    after = run_all(probes, staff.auditor)
    leaking = {dict(p.params).popitem()[0] for p in probes if before[p] != after[p]}
    assert "o" in leaking  # ordering by the text_length column shows the content's size changed


def test_sealed_content_answers_no_lookup_even_without_the_admin_guard(world, planted):
    """With the admin's guard gone, a lookup into sealed content reaches the field, which refuses
    to compare: the database holds ciphertext only, so there is nothing to match a guess against."""
    for model, lookup in (
        (MemoryEmbedding, {"terms__contains": MARKER}),
        (MemoryVersion, {"text__icontains": "apricot"}),
        (MemoryVersion, {"kind": "preference"}),
        (Consolidation, {"messages__icontains": MARKER}),
    ):
        with pytest.raises(FieldError, match="sealed"):
            list(model.objects.filter(**lookup))


@pytest.mark.parametrize(
    "model,query",
    [
        (MemoryEmbedding, {"terms__contains": MARKER}),
        (MemoryEmbedding, {"terms__regex": "^a"}),
        (MemoryEmbedding, {"vector__isnull": "False"}),
        (MemoryVersion, {"text__icontains": "apricot"}),
        (MemoryVersion, {"details__startswith": "Detail"}),
        (MemoryVersion, {"kind": "preference"}),
        (MemoryVersion, {"text_hmac": hashlib.sha256(SECRET_TEXT.encode()).hexdigest()}),
        (MemoryVersion, {"text_length__gt": "10"}),
        (MemoryVersion, {"masked_kinds__contains": "EMAIL"}),
        (MemoryVersion, {"embedding__terms__contains": MARKER}),
        (MemoryVersion, {"o": "9"}),  # the text_length column
        (Consolidation, {"messages__icontains": MARKER}),
    ],
)
def test_content_lookups_answer_400_over_http(planted, staff, model, query):
    for user in (staff.auditor, staff.superuser):
        response = browser(user).get(admin_url(model, "changelist") + "?" + urlencode(query))
        assert response.status_code == 400, (query, response.status_code)


def test_relation_paths_to_content_answer_400_over_http(planted, staff):
    from governance.models import Member, Workspace
    from memoryapp.models import Citation

    client = browser(staff.auditor)
    for model, key in (
        (Citation, "memory__text__contains"),
        (Member, "memory_versions__text__contains"),
        (Workspace, "memory_versions__details__regex"),
    ):
        assert client.get(admin_url(model, "changelist") + "?" + urlencode({key: "a"})).status_code == 400, key


def test_a_lookup_the_database_cannot_run_answers_400_not_500(planted, staff):
    from governance.models import AuditEvent
    from retention.models import DeletionReceipt

    client = browser(staff.superuser)
    for model, query in (
        (DeletionReceipt, {"manifest__contains": "x"}),  # SQLite: JSON contains is not supported; PostgreSQL: not JSON
        (AuditEvent, {"changes__contains": '{"a": 1}'}),
        (AuditEvent, {"id__regex": "("}),  # an invalid regular expression
        (Consolidation, {"memory_ids__contained_by": "[1"}),
    ):
        response = client.get(admin_url(model, "changelist") + "?" + urlencode(query))
        # 400 when the database refuses it, 302 for Django's own "?e=1", 200 when it runs.
        assert response.status_code in (200, 302, 400), (query, response.status_code)
    if connection.vendor == "sqlite":
        response = client.get(admin_url(DeletionReceipt, "changelist") + "?" + urlencode({"manifest__contains": "x"}))
        assert response.status_code == 400


def test_metadata_lookups_still_work(planted, staff):
    client = browser(staff.auditor)
    response = client.get(
        admin_url(MemoryVersion, "changelist") + "?" + urlencode({"namespace": "notes", "key": "secret"})
    )
    assert response.status_code == 200
    assert f"/{planted.agent_version.pk}/change/" in response.content.decode()


def test_search_on_content_is_refused_and_content_digest_columns_are_not_sortable(planted, staff):
    from memoryapp.admin import MemoryVersionAdmin

    model_admin = admin.site._registry[MemoryVersion]
    assert isinstance(model_admin, MemoryVersionAdmin)
    request = RequestFactory().get("/admin/")
    request.user = staff.auditor
    assert "text_length" not in model_admin.get_sortable_by(request)
    assert "namespace" in model_admin.get_sortable_by(request)


def test_every_model_holding_content_classifies_every_field():
    from django.apps import apps
    from django.core.management import call_command

    call_command("check")  # governance.E001 fails on an unclassified field
    holders = [model for model in apps.get_models() if declares_content(model)]
    assert {m._meta.label for m in holders} >= {
        "memoryapp.MemoryVersion",
        "memoryapp.MemoryEmbedding",
        "credits.Consolidation",
    }
    for model in holders:
        for name in content_derived_fields(model):
            assert lookup_reaches_content(model, f"{name}__exact")


def test_the_check_refuses_an_unclassified_field(monkeypatch):
    from governance.content import check_content_declarations

    monkeypatch.setattr(MemoryVersion, "metadata_fields", MemoryVersion.metadata_fields - {"namespace"})
    errors = check_content_declarations()
    assert any(e.id == "governance.E001" and "namespace" in e.msg for e in errors)


def test_the_check_refuses_an_admin_configured_to_search_or_show_content():
    from governance.admin_base import GovernedAdmin, content_config_errors

    class LeakyAdmin(GovernedAdmin):
        search_fields = ("text",)
        list_filter = ("embedding__terms",)
        list_display = ("id", "details")

    errors = {e.id for e in content_config_errors(LeakyAdmin(MemoryVersion, admin.site))}
    assert {"governance.A001", "governance.A002", "governance.A005"} <= errors
