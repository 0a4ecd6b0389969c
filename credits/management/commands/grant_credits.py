"""`manage.py grant_credits WORKSPACE_ID AMOUNT [--note TEXT] [--json]`: add credits to a
workspace (a negative amount takes them back, never below zero). Written to the ledger."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from credits import charging, pricing
from governance.models import Workspace


class Command(BaseCommand):
    help = "Grant credits to a workspace (recorded in the credit ledger)."

    def add_arguments(self, parser):
        parser.add_argument("workspace_id", type=int)
        parser.add_argument("amount", help="Credits, a decimal such as 100 or 12.5 (negative takes credits back).")
        parser.add_argument("--note", default="", help="Shown in the ledger; no personal data.")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        workspace = Workspace.objects.filter(pk=opts["workspace_id"]).first()
        if workspace is None:
            raise CommandError(f"No workspace #{opts['workspace_id']}.")
        try:
            grant = charging.grant_credits(workspace, pricing.money(opts["amount"]), note=opts["note"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        result = {
            "workspaceId": str(workspace.pk),
            "granted": str(grant.entry.amount),
            "balance": str(grant.balance),
            "ledgerEntryId": str(grant.entry.pk),
        }
        self.stdout.write(
            json.dumps(result)
            if opts["json"]
            else f"Workspace #{workspace.pk}: granted {grant.entry.amount}, balance {grant.balance}."
        )
