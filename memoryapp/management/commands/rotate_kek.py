"""Re-wrap every data key under the current key-encryption key (SPEC §8.2): `manage.py rotate_kek`.

Rotation, step by step (docs/encryption.md): put the new key in MEMORY_KEK and the old one in
RETIRED_KEKS, restart, run this command, then remove the old key from RETIRED_KEKS. No memory
content is re-encrypted: only the data keys are unwrapped and wrapped again. Chunked and
resumable; exit status 1 when keys remain that no configured KEK unwraps (they are listed in the
log by id; their rows read as unreadable until the right KEK is configured).
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand

from core import progress
from memoryapp.encryption import CHUNK, rewrap_keys
from memoryapp.keyring import key_store


class Command(BaseCommand):
    help = "Re-wrap every data key under MEMORY_KEK (after a key-encryption key rotation)."

    def add_arguments(self, parser):
        parser.add_argument("--chunk", type=int, default=CHUNK)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, chunk: int, json: bool = False, **options):
        store = key_store()
        total = store.not_current()
        rewrapped = 0
        with progress.bar(total=total, desc="rotate_kek", unit="key", enabled=progress.interactive(self.stdout, json=json)) as bar:
            for count in rewrap_keys(max(1, chunk)):
                rewrapped += count
                bar.update(count)
        left = store.not_current()
        if json:
            self.stdout.write(_dumps({"rewrapped": rewrapped, "notRewrapped": left}))
        else:
            self.stdout.write(f"Re-wrapped {rewrapped} data keys under the current KEK; {left} left under another key.")
        if left:
            sys.exit(1)


def _dumps(value) -> str:
    return json.dumps(value, sort_keys=True)
