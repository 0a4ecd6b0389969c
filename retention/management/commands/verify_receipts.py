"""Verify every workspace's deletion-receipt chain (docs/receipts.md): each receipt's hash is
recomputed from its stored fields, its link to the receipt before it checked, and its Ed25519
signature verified with the key it names; so is each of its sealed verification records, and the
result shown with it must be the newest record's. Reports the first break per workspace; exit status 1
when any chain is broken."""

from __future__ import annotations

import json as jsonlib

from django.core.management.base import BaseCommand, CommandError, no_translations

from retention.receipt_checks import verify_chains
from retention.receipts import REASON_LABELS


class Command(BaseCommand):
    help = (
        "Check every receipt chain (hashes, links, signatures); report the first break per workspace; "
        "exit 1 on a break."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--workspace", type=int, help="Only this workspace's chain (its id; it may be deleted already)."
        )
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    @no_translations  # an operator's report: the labels in English
    def handle(self, *args, workspace: int | None = None, json: bool = False, **options):
        report = verify_chains([workspace] if workspace is not None else None)
        if json:
            self.stdout.write(jsonlib.dumps(report, indent=2))
        else:
            for chain in report["workspaces"]:
                brk = chain["firstBreak"]
                if brk is None:
                    count = chain["receipts"]
                    self.stdout.write(
                        f"workspace {chain['workspaceId']}: {count} receipt{'' if count == 1 else 's'}, chain intact"
                    )
                else:
                    where = f"receipt #{brk['receiptId']}" if brk["receiptId"] else "a receipt"
                    if "verificationSeq" in brk:
                        where += (
                            f", verification {brk['verificationSeq']}"
                            if brk["verificationSeq"]
                            else ", its shown verification"
                        )
                    self.stdout.write(
                        f"workspace {chain['workspaceId']}: BROKEN at {where} (position {brk['chainSeq']}): "
                        f"{brk['reason']}: {REASON_LABELS[brk['reason']]}"
                    )
            if not report["workspaces"]:
                self.stdout.write("No receipts to verify.")
            if report["intact"]:
                self.stdout.write("All chains intact.")
        if not report["intact"]:
            broken = [c["workspaceId"] for c in report["workspaces"] if not c["intact"]]
            raise CommandError(f"Receipt chain broken in workspace {', '.join(broken)}.", returncode=1)
