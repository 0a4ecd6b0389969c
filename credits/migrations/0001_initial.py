"""The credit, usage and consolidation models move here from `retention` with their tables (issue
23 step 4): Django's state gains them and no table is created, copied or renamed (`db_table`
keeps the `retention_*` names; retention 0012 drops them from retention's state only). Their
content types are renamed in place, so the staff groups' permissions and the admin's log
entries stay attached."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

import memoryapp.sealing

MOVED = (
    "creditaccount",
    "modelprice",
    "usagerecord",
    "ledgerentry",
    "consolidation",
    "usagerollup",
    "memberquota",
    "rolequota",
)


def move_content_types(apps, schema_editor, source="retention", target="credits"):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    db = schema_editor.connection.alias
    for model in MOVED:
        old = ContentType.objects.using(db).filter(app_label=source, model=model).first()
        if old is None:
            continue  # a fresh database: post_migrate creates the new one
        new = ContentType.objects.using(db).filter(app_label=target, model=model).first()
        if new is None:
            old.app_label = target
            old.save(update_fields=["app_label"])
            continue
        # Both exist (post_migrate ran in between): keep the new row, carry over what the old one held.
        taken = set(Permission.objects.using(db).filter(content_type=new).values_list("codename", flat=True))
        Permission.objects.using(db).filter(content_type=old).exclude(codename__in=taken).update(content_type=new)
        old.delete()


def move_content_types_back(apps, schema_editor):
    move_content_types(apps, schema_editor, source="credits", target="retention")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("governance", "0005_workspace_entity_generation"),
        ("retention", "0011_sealed_consolidation_input"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="CreditAccount",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("balance", models.DecimalField(decimal_places=6, default=0, max_digits=16)),
                        ("discrepancy", models.DecimalField(blank=True, decimal_places=6, max_digits=16, null=True)),
                        ("reconciled_at", models.DateTimeField(blank=True, null=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "workspace",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="credit_account",
                                to="governance.workspace",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "retention_creditaccount",
                    },
                ),
                migrations.CreateModel(
                    name="ModelPrice",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("model_name", models.CharField(max_length=120, unique=True)),
                        ("input_per_1k", models.DecimalField(decimal_places=6, max_digits=16)),
                        ("output_per_1k", models.DecimalField(decimal_places=6, max_digits=16)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                    ],
                    options={
                        "db_table": "retention_modelprice",
                        "ordering": ["model_name"],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(("input_per_1k__gte", 0), ("output_per_1k__gte", 0)),
                                name="price_not_negative",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="UsageRecord",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "role",
                            models.CharField(help_text="The member's role when charged (role quotas).", max_length=10),
                        ),
                        (
                            "category",
                            models.CharField(
                                choices=[("ai_memory", "AI memory"), ("reply", "Assistant reply")],
                                db_index=True,
                                max_length=16,
                            ),
                        ),
                        ("model_name", models.CharField(max_length=120)),
                        ("conversation_id", models.CharField(blank=True, max_length=120)),
                        ("input_tokens", models.PositiveIntegerField(default=0)),
                        ("output_tokens", models.PositiveIntegerField(default=0)),
                        (
                            "memory_tokens",
                            models.PositiveIntegerField(
                                default=0, help_text="AI-memory tokens already counted in input_tokens."
                            ),
                        ),
                        ("input_cost", models.DecimalField(decimal_places=6, default=0, max_digits=14)),
                        ("output_cost", models.DecimalField(decimal_places=6, default=0, max_digits=14)),
                        (
                            "status",
                            models.CharField(
                                choices=[("pending", "Pending settlement"), ("settled", "Settled into the ledger")],
                                db_index=True,
                                default="pending",
                                max_length=8,
                            ),
                        ),
                        ("created_at", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                        ("settled_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "member",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="usage_records",
                                to="governance.member",
                            ),
                        ),
                        (
                            "workspace",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="usage_records",
                                to="governance.workspace",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "retention_usagerecord",
                        "ordering": ["-created_at", "-id"],
                    },
                ),
                migrations.CreateModel(
                    name="LedgerEntry",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "kind",
                            models.CharField(
                                choices=[("grant", "Credits granted"), ("usage", "Usage settled")],
                                db_index=True,
                                max_length=8,
                            ),
                        ),
                        ("amount", models.DecimalField(decimal_places=6, max_digits=16)),
                        ("member_ref", models.BigIntegerField(blank=True, null=True)),
                        ("actor_label", models.CharField(blank=True, max_length=200)),
                        ("note", models.CharField(blank=True, max_length=200)),
                        ("created_at", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                        (
                            "workspace",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="ledger_entries",
                                to="governance.workspace",
                            ),
                        ),
                        (
                            "usage_record",
                            models.OneToOneField(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="ledger_entry",
                                to="credits.usagerecord",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name_plural": "ledger entries",
                        "db_table": "retention_ledgerentry",
                        "ordering": ["-created_at", "-id"],
                    },
                ),
                migrations.CreateModel(
                    name="Consolidation",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "member_period",
                            models.PositiveIntegerField(
                                blank=True,
                                help_text="The partner's membership period when the turn was submitted: a turn is "
                                "never consolidated into a later one.",
                                null=True,
                            ),
                        ),
                        ("credential_ref", models.BigIntegerField(blank=True, null=True)),
                        ("conversation_id", models.CharField(max_length=120)),
                        ("anonymous", models.BooleanField(default=False)),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("queued", "Queued"),
                                    ("running", "Running"),
                                    ("done", "Done"),
                                    ("skipped", "Skipped"),
                                    ("failed", "Failed"),
                                ],
                                db_index=True,
                                default="queued",
                                max_length=8,
                            ),
                        ),
                        (
                            "reason",
                            models.CharField(
                                blank=True,
                                help_text="Why it was skipped or failed (a code, never content).",
                                max_length=32,
                            ),
                        ),
                        ("key_id", memoryapp.sealing.RowKeyField(blank=True, editable=False, null=True, unique=True)),
                        ("messages", memoryapp.sealing.SealedField(blank=True, codec="json", default=None, null=True)),
                        ("message_count", models.PositiveSmallIntegerField(default=0)),
                        ("model_name", models.CharField(blank=True, max_length=120)),
                        ("memories_found", models.PositiveSmallIntegerField(default=0)),
                        ("memories_stored", models.PositiveSmallIntegerField(default=0)),
                        ("memory_ids", models.JSONField(blank=True, default=list)),
                        ("created_at", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        ("input_purged_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "agent",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="consolidations",
                                to="governance.agent",
                            ),
                        ),
                        (
                            "member",
                            models.ForeignKey(
                                blank=True,
                                help_text="The partner being remembered; empty when anonymous.",
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="consolidations",
                                to="governance.member",
                            ),
                        ),
                        (
                            "workspace",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="consolidations",
                                to="governance.workspace",
                            ),
                        ),
                        (
                            "usage_record",
                            models.OneToOneField(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="consolidation",
                                to="credits.usagerecord",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "retention_consolidation",
                        "base_manager_name": "objects",
                        "ordering": ["-created_at", "-id"],
                    },
                ),
                migrations.CreateModel(
                    name="UsageRollup",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("day", models.DateField()),
                        ("member_ref", models.BigIntegerField(default=0, help_text="0 when the member row is gone.")),
                        ("role", models.CharField(max_length=10)),
                        (
                            "category",
                            models.CharField(
                                choices=[("ai_memory", "AI memory"), ("reply", "Assistant reply")], max_length=16
                            ),
                        ),
                        ("records", models.PositiveIntegerField(default=0)),
                        ("input_tokens", models.PositiveBigIntegerField(default=0)),
                        ("output_tokens", models.PositiveBigIntegerField(default=0)),
                        ("memory_tokens", models.PositiveBigIntegerField(default=0)),
                        ("input_cost", models.DecimalField(decimal_places=6, default=0, max_digits=16)),
                        ("output_cost", models.DecimalField(decimal_places=6, default=0, max_digits=16)),
                        ("computed_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "workspace",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="usage_rollups",
                                to="governance.workspace",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "retention_usagerollup",
                        "ordering": ["-day", "workspace_id", "member_ref", "role", "category"],
                    },
                ),
                migrations.CreateModel(
                    name="MemberQuota",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("limit", models.DecimalField(decimal_places=6, max_digits=16)),
                        ("used", models.DecimalField(decimal_places=6, default=0, max_digits=16)),
                        (
                            "period",
                            models.CharField(
                                choices=[("day", "Daily"), ("week", "Weekly"), ("month", "Monthly")],
                                default="month",
                                max_length=8,
                            ),
                        ),
                        ("period_start", models.DateTimeField()),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "member",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="credit_quota",
                                to="governance.member",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "retention_memberquota",
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(("limit__gte", 0)), name="member_quota_limit_not_negative"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="RoleQuota",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("role", models.CharField(max_length=10)),
                        ("limit", models.DecimalField(decimal_places=6, max_digits=16)),
                        ("used", models.DecimalField(decimal_places=6, default=0, max_digits=16)),
                        (
                            "period",
                            models.CharField(
                                choices=[("day", "Daily"), ("week", "Weekly"), ("month", "Monthly")],
                                default="month",
                                max_length=8,
                            ),
                        ),
                        ("period_start", models.DateTimeField()),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "workspace",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="role_quotas",
                                to="governance.workspace",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "retention_rolequota",
                        "ordering": ["workspace_id", "role"],
                        "constraints": [
                            models.UniqueConstraint(fields=("workspace", "role"), name="one_quota_per_role"),
                            models.CheckConstraint(
                                condition=models.Q(("limit__gte", 0)), name="role_quota_limit_not_negative"
                            ),
                        ],
                    },
                ),
                migrations.AddIndex(
                    model_name="usagerecord",
                    index=models.Index(
                        fields=["workspace", "member", "-created_at"], name="retention_u_workspa_af5f0c_idx"
                    ),
                ),
                migrations.AddIndex(
                    model_name="ledgerentry",
                    index=models.Index(fields=["workspace", "-created_at"], name="retention_l_workspa_eb5301_idx"),
                ),
                migrations.AddIndex(
                    model_name="consolidation",
                    index=models.Index(
                        fields=["workspace", "member", "-created_at"], name="retention_c_workspa_ffc7a4_idx"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="usagerollup",
                    constraint=models.UniqueConstraint(
                        fields=("workspace", "day", "member_ref", "role", "category"),
                        name="one_rollup_per_day_member_role_category",
                    ),
                ),
            ],
        ),
        migrations.RunPython(move_content_types, move_content_types_back),
    ]
