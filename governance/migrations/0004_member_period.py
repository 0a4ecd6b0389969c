"""Membership periods (issue 22 row 3): a re-added member starts a new period that nothing issued
before it opens.

Existing rows: a member's period is the number of times it was added, reconstructed from its
`member.removed` audit events (one per ended period). Credentials that outlived their membership
are revoked now, with an audit event each, as a removal does from this release on: those of
members who have left (at `left_at`), and those created before the current period of a re-added
member (at `joined_at`). The gate refused them already; this makes the admin and the member's
credential list say so."""

import django.utils.timezone
from django.db import migrations, models
from django.db.models import Count, F, Q


def reconstruct_periods_and_revoke(apps, schema_editor):
    Member = apps.get_model("governance", "Member")
    Credential = apps.get_model("governance", "Credential")
    AuditEvent = apps.get_model("governance", "AuditEvent")
    removals = dict(
        AuditEvent.objects.filter(action="member.removed", target__startswith="member #")
        .values("target")
        .annotate(n=Count("pk"))
        .values_list("target", "n")
    )
    for member in Member.objects.filter(
        pk__in=[int(target.split("#", 1)[1]) for target in removals if target.split("#", 1)[1].isdigit()]
    ).iterator():
        ended = removals.get(f"member #{member.pk}", 0)
        member.period = max(1, ended + (1 if member.left_at is None else 0))
        member.save(update_fields=["period"])
    stale = (
        Credential.objects.filter(revoked_at__isnull=True)
        .filter(Q(member__left_at__isnull=False) | Q(created_at__lt=F("member__joined_at")))
        .select_related("member")
    )
    for credential in stale.iterator():
        member = credential.member
        credential.revoked_at = member.left_at or member.joined_at
        credential.save(update_fields=["revoked_at"])
        AuditEvent.objects.create(
            workspace_id=credential.workspace_id,
            workspace_ref=credential.workspace_id,
            actor_label="system",
            action="credential.revoked",
            target=f"credential {credential.prefix}",
            reason="membership ended (revoked by migration governance 0004)",
        )


class Migration(migrations.Migration):
    dependencies = [("governance", "0003_staff_groups")]

    operations = [
        migrations.AddField(
            model_name="member",
            name="period",
            field=models.PositiveIntegerField(
                default=1, help_text="1 for the first membership; +1 each time a removed member is re-added."
            ),
        ),
        migrations.AlterField(
            model_name="member",
            name="joined_at",
            field=models.DateTimeField(
                default=django.utils.timezone.now, help_text="When the current membership period began."
            ),
        ),
        migrations.RunPython(reconstruct_periods_and_revoke, migrations.RunPython.noop, elidable=True),
    ]
