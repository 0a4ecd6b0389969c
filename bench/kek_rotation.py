"""What the scheduled KEK rotation costs, and how long a destroyed key stays in the key store's files
(issue 33; figures in docs/encryption.md "Scheduled rotation").

    .venv/bin/python bench/kek_rotation.py --backend sqlite|postgresql [--keys 10000] [--quiet 60]

1. Rotation: --keys data keys stored (under the key file's KEK), then `scheduled_rotation()` as the
   beat job runs it (due, no settle wait): a new KEK, every key re-wrapped in chunks of 500, the old
   KEK destroyed. Prints the time and keys per second.
2. Residual window (PostgreSQL): one key destroyed as an erase destroys it, CHECKPOINT, the key
   table's heap file searched for its wrapped bytes (`retention.key_residue`): at once, after
   --quiet seconds of a quiet key store (no vacuum), and right after `VACUUM` of the key table
   (what an erase does now, KEYRING_VACUUM_AFTER_ERASE). SQLite: searched at once (secure_delete).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from datetime import timedelta

sys.path.insert(0, os.path.dirname(__file__))
from _setup import setup, setup_sqlite  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--quiet", type=int, default=60, help="seconds to wait without vacuum (PostgreSQL)")
    args = parser.parse_args()
    if args.backend == "sqlite":
        setup_sqlite(os.environ.get("BENCH_VAR", "/tmp/bench_kek_rotation_sqlite"))
    else:
        os.environ["VAR_DIR"] = os.environ.get("BENCH_VAR", "/tmp/bench_kek_rotation_pg")
        setup(os.environ.get("BENCH_DB", "bench_kek_rotation"), redis_db=int(os.environ.get("BENCH_REDIS_DB", "9")))
        from django.core.management import call_command

        call_command("migrate", database="keyring", verbosity=0)

    from django.db import connections
    from django.utils import timezone

    from memoryapp import encryption
    from memoryapp.crypto import new_data_key
    from memoryapp.keyring import KEYRING, fingerprint, key_store
    from retention.key_residue import find_wrapped, key_store_files

    store = key_store()
    for start in range(0, args.keys, 1000):
        store.put(
            {uuid.uuid4(): new_data_key() for _ in range(min(1000, args.keys - start))}, owner="memoryapp.memoryversion"
        )
    print(f"backend: {connections[KEYRING].vendor}, data keys: {store.count()}")

    began = time.perf_counter()
    result = encryption.scheduled_rotation(now=timezone.now() + timedelta(hours=48), settle=0)
    took = time.perf_counter() - began
    print(
        f"rotation: {result['rotation']}, re-wrapped {result['rewrapped']} keys in {took:.2f} s "
        f"({result['rewrapped'] / took:,.0f} keys/s), destroyed KEK(s) {result['destroyedKeks']}"
    )

    def destroy_one() -> list[dict[str, str]]:
        (key_id,) = store.scan(
            owner="memoryapp.memoryversion", created_before=timezone.now() + timedelta(days=1), after=None, limit=1
        )
        return [fingerprint(wrapped) for _, _, wrapped in store.destroy_many([key_id])]

    def copies(fingerprints) -> int | str:
        files = key_store_files()
        return files.not_inspectable or len(find_wrapped(files.paths, fingerprints))

    gone = destroy_one()
    print(f"residual, no vacuum: copies of a destroyed wrapped key in the key store's files at once: {copies(gone)}")
    if connections[KEYRING].vendor == "postgresql":
        time.sleep(args.quiet)
        print(f"residual, no vacuum: after {args.quiet} s of a quiet key store: {copies(gone)}")
        began = time.perf_counter()
        store.vacuum()
        took = time.perf_counter() - began
        print(
            f"residual, VACUUM of the key table ({store.count()} keys, {took * 1000:.0f} ms): after it: {copies(gone)}"
        )
        second = destroy_one()
        store.vacuum()
        print(f"residual, a key destroyed then VACUUM at once (what an erase does): {copies(second)}")


if __name__ == "__main__":
    main()
