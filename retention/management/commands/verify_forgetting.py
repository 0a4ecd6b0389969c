"""Forgetting check (SPEC §8): plant a synthetic canary memory, show it on every surface, forget it,
show every surface empty, record a receipt; exit 1 if anything remains, 2 if the check cannot run.
The check is `retention.forgetting.ForgettingCheck`; this command chooses the member and prints.

With --backup it proves the erase on a real backup instead (`retention.backup_proof.BackupProof`):
back up the database and the key store, forget a canary, restore the backup with the key store as
it is now (the canary does not open, no plaintext byte of it is in the restored database) and with
the key-store backup from before the erase (it opens: why key-store backups must be brief).
PostgreSQL needs pg_dump, pg_restore, createdb and dropdb on PATH. Either way it also searches the
key store's physical files (SQLite file, WAL, SHM; PostgreSQL's key table after a CHECKPOINT, when
the server's data directory is readable here) for the canary's destroyed wrapped key, and reports
what it finds as residual until the receipt's residualUntil (`retention.key_residue`).

With --backup --receipt ID it plants nothing: it searches the key store's files for the erased
keys of that receipt (of the workspace) and says whether the window is residual or closed.

    python manage.py verify_forgetting --workspace ID [--member ID] [--backup [--receipt ID]] [--json]
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core import progress
from governance.models import Member, Workspace
from retention.backup_proof import BackupProof
from retention.forgetting import CheckCannotRun, ForgettingCheck
from retention.key_residue import inspect_receipt
from retention.models import DeletionReceipt


class Command(BaseCommand):
    help = "Plant a canary memory, show it on every surface, forget it, show every surface empty, record a receipt."

    def add_arguments(self, parser):
        parser.add_argument("--workspace", required=True, type=int)
        parser.add_argument(
            "--member", type=int, help="The member to plant the canary for (default: the first active owner)."
        )
        parser.add_argument(
            "--backup",
            action="store_true",
            help="Prove the erase on a real backup restored with the current key store (and with the old one).",
        )
        parser.add_argument(
            "--receipt",
            type=int,
            help="With --backup: plant nothing, search the key store's files for this receipt's erased keys.",
        )
        parser.add_argument("--json", action="store_true")

    def handle(
        self,
        *args,
        workspace: int,
        member: int | None = None,
        backup: bool = False,
        receipt: int | None = None,
        json: bool = False,
        **options,
    ):
        target = Workspace.objects.filter(pk=workspace).first()
        if target is None:
            raise CommandError(f"No workspace #{workspace}.", returncode=2)
        if receipt is not None:
            self.inspect(target, receipt, backup=backup, json=json)
            return
        members = Member.objects.active().select_related("user", "workspace").filter(workspace=target)
        chosen = members.filter(pk=member).first() if member else members.filter(role="owner").order_by("pk").first()
        if chosen is None:
            raise CommandError("No such active member in this workspace.", returncode=2)
        try:
            watched = progress.interactive(self.stdout, json=json)
            with (
                progress.bar(total=None, desc="forgetting check", unit="step", enabled=watched) as bar,
                progress.logs_above_the_bar(watched),
            ):
                report = (BackupProof if backup else ForgettingCheck)(target, chosen, bar=bar).run()
        except CheckCannotRun as exc:
            raise CommandError(f"The forgetting check cannot run: {exc}", returncode=2) from None
        if json:
            self.stdout.write(_dumps(report))
        elif backup:
            self.print_backup_proof(report)
        else:
            self.stdout.write(
                f"Canary {report['canaryId']} (marker {report['marker']}) in workspace {report['workspaceId']}, "
                f"member {report['memberId']}"
            )
            width = max(len(name) for name in [*report["surfaces"], *report["neverHoldContent"]])
            for name, seen in report["surfaces"].items():
                self.stdout.write(f"  {name:<{width}}  before: {seen['before']!s:>6}  after: {seen['after']!s:>6}")
            self.stdout.write("Stores that must never hold memory content:")
            for name, seen in report["neverHoldContent"].items():
                self.stdout.write(f"  {name:<{width}}  before: {seen['before']!s:>6}  after: {seen['after']!s:>6}")
            self.stdout.write(
                f"Receipt {report['receiptId']} (forget receipt {report['forgetReceiptId']}): "
                f"{'CLEAN' if report['clean'] else 'SOMETHING REMAINS'}"
            )
        if not report["clean"]:
            sys.exit(1)

    def inspect(self, workspace: Workspace, receipt_id: int, *, backup: bool, json: bool) -> None:
        if not backup:
            raise CommandError("--receipt goes with --backup (it searches the key store's files).", returncode=2)
        receipt = DeletionReceipt.objects.filter(pk=receipt_id, workspace_ref=workspace.pk).first()
        if receipt is None:
            raise CommandError(f"No receipt #{receipt_id} in workspace #{workspace.pk}.", returncode=2)
        report = inspect_receipt(receipt)
        report["clean"] = report["problem"] is None
        if json:
            self.stdout.write(_dumps(report))
        else:
            self.print_key_files(report)
        if not report["clean"]:
            sys.exit(1)

    def print_key_files(self, report: dict[str, Any]) -> None:
        self.stdout.write(
            f"Key store files ({report.get('engine', '?')}): {', '.join(report.get('files') or []) or 'none read'}"
        )
        if report.get("notInspectable"):
            self.stdout.write(f"  {report['notInspectable']}")
            if report.get("problem"):
                self.stdout.write(f"  {report['state'].upper()}: {report['problem']}")
            return
        until = report.get("residualUntil") or "none named (KEK rotation off or run by the operator)"
        self.stdout.write(
            f"  copies of the erased wrapped keys found: {report['found']}   still unwrapping with a KEK that exists: "
            f"{report['unwrapsNow']}"
        )
        closed = report.get("residualClosedAt")
        self.stdout.write(
            f"  {report['state'].upper()}: residualUntil {until}"
            + (f", closed at {closed} (the KEK was destroyed)" if closed else "")
        )
        if report.get("problem"):
            self.stdout.write(f"  - {report['problem']}")

    def print_backup_proof(self, report: dict[str, Any]) -> None:
        restored, old = report["restored"], report["withKeyStoreBackupFromBeforeTheErase"]
        self.stdout.write(
            f"Canary {report['canaryId']} (marker {report['marker']}) in workspace {report['workspaceId']}, member "
            f"{report['memberId']}, {report['backend']}"
        )
        self.stdout.write(
            f"Backed up before the erase: data ({report['backups']['data']}), key store "
            f"({report['backups']['keyring']})"
        )
        self.stdout.write("Data backup restored into a scratch database, with the key store as it is now:")
        rows = restored["ciphertextRows"]
        self.stdout.write(
            f"  ciphertext rows present      memory version: {rows['memoryVersion']}  index entry: "
            f"{rows['memoryEmbedding']}"
        )
        self.stdout.write(f"  canary's key in key store    {restored['keyInCurrentKeyStore']}")
        for field, readable in restored["readableWithCurrentKeyStore"].items():
            self.stdout.write(
                f"  {field:<8} readable: {'YES' if readable else 'no':<4} plaintext occurrences in the restored "
                "database: "
                f"{restored['plaintextOccurrences'].get(field, 'not searched (a kind is one of a few words)')}"
            )
        self.stdout.write(
            "The same backup with the key-store backup from before the erase (why key-store backups must be brief):"
        )
        self.stdout.write(
            f"  canary's key present: {old['keyPresent']}   readable: "
            f"{', '.join(f for f, r in old['readable'].items() if r) or 'nothing'}"
        )
        self.print_key_files(report["keyStoreFiles"])
        verdict = "CLEAN" if report["clean"] else "NOT CLEAN"
        self.stdout.write(f"Receipt {report['receiptId']} (forget receipt {report['forgetReceiptId']}): {verdict}")
        for reason in report["reasons"]:
            self.stdout.write(f"  - {reason}")


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)
