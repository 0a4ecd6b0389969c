"""The credit, usage and consolidation models leave retention's state for the `credits` app
(issue 23 step 4). State only: their tables stay, now owned by credits (credits 0001)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0011_sealed_consolidation_input"),
        ("credits", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(
                    model_name="consolidation",
                    name="agent",
                ),
                migrations.RemoveField(
                    model_name="consolidation",
                    name="member",
                ),
                migrations.RemoveField(
                    model_name="consolidation",
                    name="usage_record",
                ),
                migrations.RemoveField(
                    model_name="consolidation",
                    name="workspace",
                ),
                migrations.RemoveField(
                    model_name="creditaccount",
                    name="workspace",
                ),
                migrations.RemoveField(
                    model_name="ledgerentry",
                    name="usage_record",
                ),
                migrations.RemoveField(
                    model_name="ledgerentry",
                    name="workspace",
                ),
                migrations.RemoveField(
                    model_name="memberquota",
                    name="member",
                ),
                migrations.DeleteModel(
                    name="ModelPrice",
                ),
                migrations.RemoveField(
                    model_name="rolequota",
                    name="workspace",
                ),
                migrations.RemoveField(
                    model_name="usagerecord",
                    name="member",
                ),
                migrations.RemoveField(
                    model_name="usagerecord",
                    name="workspace",
                ),
                migrations.RemoveField(
                    model_name="usagerollup",
                    name="workspace",
                ),
                migrations.DeleteModel(
                    name="Consolidation",
                ),
                migrations.DeleteModel(
                    name="CreditAccount",
                ),
                migrations.DeleteModel(
                    name="LedgerEntry",
                ),
                migrations.DeleteModel(
                    name="MemberQuota",
                ),
                migrations.DeleteModel(
                    name="RoleQuota",
                ),
                migrations.DeleteModel(
                    name="UsageRecord",
                ),
                migrations.DeleteModel(
                    name="UsageRollup",
                ),
            ],
        ),
    ]
