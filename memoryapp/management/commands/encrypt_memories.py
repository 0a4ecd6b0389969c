"""Seal the memory content stored before encryption (SPEC §8.2): `manage.py encrypt_memories`.

Chunked (one transaction per chunk), resumable (an interrupted run leaves sealed chunks sealed and
the next run takes the rest), idempotent (a second run finds nothing to do). The README's run
command and CI run it after `migrate`. A progress bar on a terminal; `--json` prints the counts.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from core import progress
from memoryapp.encryption import CHUNK, encrypt_legacy_rows, legacy_counts


class Command(BaseCommand):
    help = "Encrypt memory content stored before encryption (chunked, resumable, idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--chunk", type=int, default=CHUNK, help="Rows per transaction.")
        parser.add_argument(
            "--json",
            action="store_true",
            help='Print one JSON object {"memoryVersions": n, "consolidationInputs": n}, and no progress bar.',
        )

    def handle(self, *args, chunk: int, json: bool = False, **options):
        todo = legacy_counts()
        done = {name: 0 for name in todo}
        with progress.bar(
            total=sum(todo.values()),
            desc="encrypt_memories",
            unit="row",
            enabled=progress.interactive(self.stdout, json=json),
        ) as bar:
            for name, count in encrypt_legacy_rows(max(1, chunk)):
                done[name] += count
                bar.update(count)
        if json:
            self.stdout.write(_dumps(done))
        else:
            self.stdout.write(
                f"Encrypted {done['memoryVersions']} memory versions and {done['consolidationInputs']} consolidation "
                "inputs."
            )


def _dumps(value) -> str:
    return json.dumps(value, sort_keys=True)
