"""The credit, usage and consolidation models moved from `retention` to `credits` (issue 23 step 4)
without touching a table: a database filled at the pre-move migration state comes out of the
move with every row, value and relation intact, still in the `retention_*` tables, with its
content types renamed in place (the staff groups keep their permissions), and the move runs
backwards as well. Both backends run it (SQLite and PostgreSQL)."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone
from faker import Faker

from credits import models as credit_models
from governance import actions

BEFORE = [("retention", "0011_sealed_consolidation_input"), ("credits", None)]  # migrate targets
OLD_STATE = [("retention", "0011_sealed_consolidation_input")]
MOVED = {
    "UsageRecord": "retention_usagerecord",
    "ModelPrice": "retention_modelprice",
    "CreditAccount": "retention_creditaccount",
    "MemberQuota": "retention_memberquota",
    "RoleQuota": "retention_rolequota",
    "LedgerEntry": "retention_ledgerentry",
    "UsageRollup": "retention_usagerollup",
    "Consolidation": "retention_consolidation",
}


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


def _leaves():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _money(rng: random.Random) -> Decimal:
    return Decimal(rng.randrange(0, 10**9)).scaleb(-6)


def _fill(old_apps, workspace_id: int, member_id: int, rng: random.Random, fake: Faker) -> dict[str, list[dict]]:
    """Rows of every moved model, written through the pre-move (retention) state; answers what
    was written, field by field, to compare after the move."""
    get = lambda name: old_apps.get_model("retention", name)  # noqa: E731
    now = timezone.now()
    written: dict[str, list[dict]] = {name: [] for name in MOVED}

    def keep(name: str, row) -> None:
        written[name].append({f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields})

    for _ in range(rng.randint(2, 5)):
        keep(
            "ModelPrice",
            get("ModelPrice").objects.create(
                model_name=fake.unique.slug()[:100], input_per_1k=_money(rng), output_per_1k=_money(rng)
            ),
        )
    keep(
        "CreditAccount",
        get("CreditAccount").objects.create(
            workspace_id=workspace_id, balance=_money(rng), discrepancy=rng.choice([None, _money(rng)])
        ),
    )
    keep(
        "MemberQuota",
        get("MemberQuota").objects.create(
            member_id=member_id,
            limit=_money(rng),
            used=_money(rng),
            period=rng.choice(["day", "week", "month"]),
            period_start=now,
        ),
    )
    keep(
        "RoleQuota",
        get("RoleQuota").objects.create(
            workspace_id=workspace_id,
            role="editor",
            limit=_money(rng),
            used=_money(rng),
            period="week",
            period_start=now,
        ),
    )
    for i in range(rng.randint(3, 8)):
        record = get("UsageRecord").objects.create(
            workspace_id=workspace_id,
            member_id=rng.choice([member_id, None]),
            role=rng.choice(["owner", "editor", "viewer"]),
            category=rng.choice(["ai_memory", "reply"]),
            model_name=fake.word(),
            conversation_id=fake.uuid4(),
            input_tokens=rng.randrange(10**6),
            output_tokens=rng.randrange(10**6),
            memory_tokens=rng.randrange(1000),
            input_cost=_money(rng),
            output_cost=_money(rng),
            status=rng.choice(["pending", "settled"]),
        )
        keep("UsageRecord", record)
        if i % 2:
            keep(
                "LedgerEntry",
                get("LedgerEntry").objects.create(
                    workspace_id=workspace_id,
                    kind="usage",
                    amount=-_money(rng),
                    usage_record_id=record.pk,
                    member_ref=member_id,
                    actor_label="system",
                ),
            )
        keep(
            "Consolidation",
            get("Consolidation").objects.create(
                workspace_id=workspace_id,
                member_id=member_id,
                conversation_id=fake.uuid4(),
                status=rng.choice(["queued", "done", "skipped"]),
                messages=[{"role": "user", "content": fake.sentence()}] if i % 3 else [],
                message_count=rng.randrange(20),
                memory_ids=[rng.randrange(10**6) for _ in range(rng.randrange(4))],
                usage_record_id=record.pk if i % 2 == 0 else None,
            ),
        )
    keep(
        "LedgerEntry",
        get("LedgerEntry").objects.create(
            workspace_id=workspace_id,
            kind="grant",
            amount=_money(rng),
            actor_label=fake.email(),
            note=fake.sentence()[:200],
        ),
    )
    keep(
        "UsageRollup",
        get("UsageRollup").objects.create(
            workspace_id=workspace_id,
            day=now.date(),
            member_ref=member_id,
            role="editor",
            category="reply",
            records=3,
            input_cost=_money(rng),
        ),
    )
    return written


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("seed", [1, 2])
def test_a_filled_database_keeps_every_row_through_the_move_and_back(seed):
    rng, fake = random.Random(seed), Faker()
    Faker.seed(seed)
    workspace, owner = actions.create_workspace(fake.company(), owner_email=fake.email())
    from django.contrib.auth.models import Group, Permission
    from django.contrib.contenttypes.models import ContentType

    auditor = Group.objects.create(name=f"probe-{seed}")
    view_usage = Permission.objects.get(content_type__app_label="credits", codename="view_usagerecord")
    auditor.permissions.add(view_usage)
    content_type_id = view_usage.content_type_id

    executor = _migrate(BEFORE)
    try:
        old_apps = executor.loader.project_state(OLD_STATE).apps
        assert not any(app == "credits" for app, _ in MigrationRecorder(connection).applied_migrations())
        # before the move, the content type is retention's, the same row
        assert ContentType.objects.get(pk=content_type_id).app_label == "retention"
        written = _fill(old_apps, workspace.pk, owner.pk, rng, fake)
    finally:
        _migrate(_leaves())

    tables = set(connection.introspection.table_names())
    assert not {t for t in tables if t.startswith("credits_")}, "the move created tables"
    for name, table in MOVED.items():
        model = getattr(credit_models, name)
        assert model._meta.db_table == table and table in tables
        rows = {
            row.pk: {f.attname: getattr(row, f.attname) for f in model._meta.concrete_fields}
            for row in model.objects.all()
        }
        assert written[name] and all(rows[before["id"]] == before for before in written[name]), name
    # relations resolve through the new models
    for consolidation in credit_models.Consolidation.objects.filter(usage_record__isnull=False):
        assert consolidation.usage_record.workspace_id == workspace.pk
    assert credit_models.CreditAccount.objects.get(workspace=workspace).workspace.credit_account.pk
    # the content type was renamed, not replaced: the group still holds the same permission row
    assert ContentType.objects.get(pk=content_type_id).app_label == "credits"
    assert not ContentType.objects.filter(app_label="retention", model__in=[m.lower() for m in MOVED]).exists()
    assert list(auditor.permissions.values_list("pk", flat=True)) == [view_usage.pk]


@pytest.mark.django_db(transaction=True)
def test_the_move_is_state_only_no_sql_touches_the_tables():
    """Neither migration emits a statement (SeparateDatabaseAndState with no database operations),
    so the move costs nothing on a large table and cannot lose a row."""
    _migrate(BEFORE)
    try:
        executor = MigrationExecutor(connection)  # a loader that sees what is applied now
        plan = executor.migration_plan(_leaves())
        moving = [
            m
            for m, _ in plan
            if (m.app_label, m.name) in {("credits", "0001_initial"), ("retention", "0012_credits_move_out")}
        ]
        assert len(moving) == 2
        for migration in moving:
            state = executor.loader.project_state((migration.app_label, migration.name), at_end=False)
            with connection.schema_editor(collect_sql=True, atomic=False) as editor:
                migration.apply(state, editor, collect_sql=True)
            statements = [s for s in editor.collected_sql if s.strip() and not s.startswith("--")]
            assert statements == [], (migration, statements)
    finally:
        _migrate(_leaves())


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("/admin/retention/usagerecord/", "/admin/credits/usagerecord/"),
        (
            "/admin/retention/consolidation/12/change/?_changelist_filters=status%3Ddone",
            "/admin/credits/consolidation/12/change/?_changelist_filters=status%3Ddone",
        ),
        ("/admin/retention/ledgerentry/3/history/", "/admin/credits/ledgerentry/3/history/"),
    ],
)
def test_an_old_admin_link_of_a_moved_model_lands_on_its_new_page(client, old, new):
    response = client.get(old)
    assert response.status_code == 301 and response["Location"] == new


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        "/admin/retention/deletionreceipt/",
        "/admin/retention/usagerecord/%0d%0aSet-Cookie:x=1/",
        "/admin/retention/usagerecord//evil.example/",
        "/admin/retention/usagerecordx/",
    ],
)
def test_the_redirect_moves_nothing_else_and_never_leaves_the_site(client, path):
    response = client.get(path)
    assert response.status_code != 301 and response.status_code < 500
