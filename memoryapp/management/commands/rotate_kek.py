"""Rotate the key-encryption key (SPEC §8.2, docs/encryption.md "Rotating the KEK"): `manage.py rotate_kek`.

Embedded default (the key file var/memory_kek): makes a new KEK, re-wraps every data key under it
and destroys the old one from the file, in one run; an interrupted run is resumed by the next.
With MEMORY_KEK set: put the new key in MEMORY_KEK and the old one in RETIRED_KEKS, restart every
process, run this command, then remove the ids it names from RETIRED_KEKS and restart again.
No memory content is re-encrypted: only the data keys are unwrapped and wrapped again. Exit
status 1 when keys remain that no configured KEK unwraps (logged by id; their KEK stays).
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand

from core import progress
from memoryapp.encryption import CHUNK, SETTLE_SECONDS, KekRotation


class Command(BaseCommand):
    help = (
        "Rotate the key-encryption key: a new KEK (key file), every data key re-wrapped under it, "
        "the retired KEK destroyed."
    )

    def add_arguments(self, parser):
        parser.add_argument("--chunk", type=int, default=CHUNK)
        parser.add_argument(
            "--settle",
            type=float,
            default=SETTLE_SECONDS,
            help="seconds to wait after writing a new KEK, for keys other processes are storing",
        )
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, chunk: int, settle: float, json: bool = False, **options):
        rotation = KekRotation(chunk=chunk, settle=settle)
        total = rotation.begin()
        with progress.bar(
            total=total, desc="rotate_kek", unit="key", enabled=progress.interactive(self.stdout, json=json)
        ) as bar:
            for count in rotation.rewrap():
                bar.update(count)
        result = rotation.finish()
        if json:
            self.stdout.write(_dumps(result.as_dict()))
        else:
            self.stdout.write(_report(result, rotation.source))
        if result.left:
            sys.exit(1)


def _report(result, source) -> str:
    origin = source.origin
    lines = [
        ("New key-encryption key " if result.began else "Key-encryption key ") + f"{result.current} (from {origin}).",
        f"Re-wrapped {result.rewrapped} data keys under it; {result.left} left under another key.",
    ]
    if result.retirement.destroyed:
        lines.append(
            f"Destroyed the retired KEK(s) {', '.join(result.retirement.destroyed)} (removed from "
            f"{result.retirement.destroyed_from}): no data key needs them."
        )
    if result.retirement.for_the_operator:
        ids = ", ".join(result.retirement.for_the_operator)
        lines.append(
            f"No data key needs the retired KEK(s) {ids} any more: remove them from RETIRED_KEKS, restart every "
            "process, and destroy them where you keep secrets."
        )
    if not source.makes_keys and not result.rewrapped and not result.retirement.for_the_operator:
        lines.append(
            "To rotate: put a new key in MEMORY_KEK (openssl rand -base64 32) and the current one in RETIRED_KEKS, "
            "restart every process, run this again."
        )
    return "\n".join(lines)


def _dumps(value) -> str:
    return json.dumps(value, sort_keys=True)
