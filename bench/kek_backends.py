"""What keeping the KEK in a PKCS#11 token costs (issue 33, docs/encryption.md "KEK backends").

    .venv/bin/python bench/kek_backends.py [--keys 10000] [--repeat 2000] [--postgres]

For each backend, the key file (KEK_BACKEND=file) and a PKCS#11 token (KEK_BACKEND=pkcs11: a
SoftHSM2 token this script initialises in a temporary directory, or the HSM named by
PKCS11_MODULE / PKCS11_TOKEN_LABEL / PKCS11_PIN when they are set): wrap and unwrap of one data
key (p50/p95 per operation), the unwrap of a recall's 300 keys through the key store (one
get_many), and a full KEK rotation (`KekRotation`: new KEK, re-wrap, destroy) of a key store
holding `--keys` data keys. The embedded default (SQLite under a temporary VAR_DIR) unless
--postgres.
"""

from __future__ import annotations

import argparse
import functools
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(__file__))
from _setup import pct, setup, setup_sqlite, summary, timed  # noqa: E402

SOFTHSM_MODULES = ("/usr/lib/softhsm/libsofthsm2.so", "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so")


def softhsm_token(directory: str) -> dict[str, str]:
    """A fresh SoftHSM2 token, unless the environment names a PKCS#11 token already."""
    if os.environ.get("PKCS11_MODULE"):
        return {
            "module": os.environ["PKCS11_MODULE"],
            "label": os.environ["PKCS11_TOKEN_LABEL"],
            "pin": os.environ["PKCS11_PIN"],
            "what": "the configured token",
        }
    module = next((m for m in SOFTHSM_MODULES if os.path.isfile(m)), None)
    if module is None or shutil.which("softhsm2-util") is None:
        sys.exit("SoftHSM2 is not installed: apt-get install softhsm2")
    os.makedirs(f"{directory}/tokens")
    with open(f"{directory}/softhsm2.conf", "w") as conf:
        conf.write(f"directories.tokendir = {directory}/tokens\nobjectstore.backend = file\nlog.level = ERROR\n")
    os.environ["SOFTHSM2_CONF"] = f"{directory}/softhsm2.conf"
    label, pin = "gam-bench", secrets.token_hex(8)
    subprocess.run(
        ["softhsm2-util", "--init-token", "--free", "--label", label, "--so-pin", secrets.token_hex(8), "--pin", pin],
        check=True,
        capture_output=True,
    )
    return {
        "module": module,
        "label": label,
        "pin": pin,
        "what": "SoftHSM2 "
        + subprocess.run(["softhsm2-util", "--version"], capture_output=True, text=True).stdout.strip(),
    }


def micro(label: str, samples_ms: list[float]) -> str:
    p50_us, p95_us = pct(samples_ms, 50) * 1000, pct(samples_ms, 95) * 1000
    return f"{label:<48} p50 {p50_us:7.1f} µs   p95 {p95_us:7.1f} µs   n={len(samples_ms)}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="bench_kek_")
    token = softhsm_token(f"{scratch}/softhsm")
    if args.postgres:
        setup("bench_kek_backends")
    else:
        setup_sqlite(f"{scratch}/var")

    from django.conf import settings
    from django.test import override_settings

    from memoryapp import crypto, keyring
    from memoryapp.encryption import KekRotation
    from memoryapp.keyring import DataKey, key_store

    database = "PostgreSQL" if settings.IS_POSTGRES else "SQLite"
    print(f"{database}; token: {token['what']}; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    backends = {
        "file": {"KEK_BACKEND": "file", "MEMORY_KEK": "", "MEMORY_KEK_FILE": settings.MEMORY_KEK_FILE},
        "pkcs11": {
            "KEK_BACKEND": "pkcs11",
            "MEMORY_KEK": "",
            "PKCS11_MODULE": token["module"],
            "PKCS11_TOKEN_LABEL": token["label"],
            "PKCS11_PIN": token["pin"],
            "PKCS11_PIN_FILE": "",
            "PKCS11_KEY_LABEL": f"bench{secrets.token_hex(4)}",
        },
    }
    store = key_store()
    for name, overrides in backends.items():
        with override_settings(**overrides):
            DataKey.objects.using(keyring.KEYRING).all().delete()
            source = keyring.kek_source()
            keks = source.keys()
            key_id, dek = uuid.uuid4(), crypto.new_data_key()
            by, wrapped = keks.wrap(key_id, dek)
            print(f"\n== {name}: {source.origin}")
            print(micro("wrap one data key", timed(functools.partial(keks.wrap, key_id, dek), args.repeat)))
            print(micro("unwrap one data key", timed(functools.partial(keks.unwrap, key_id, by, wrapped), args.repeat)))

            recall = {uuid.uuid4(): crypto.new_data_key() for _ in range(300)}
            store.put(recall, owner="bench")
            print(
                summary(
                    "get_many of 300 keys (a recall)",
                    timed(functools.partial(store.get_many, list(recall)), max(20, args.repeat // 50)),
                )
            )

            batch = 1000
            for start in range(0, args.keys, batch):
                store.put(
                    {uuid.uuid4(): crypto.new_data_key() for _ in range(min(batch, args.keys - start))}, owner="bench"
                )
            total = store.count()
            old = keks.current_id
            began = time.perf_counter()
            result = KekRotation(settle=0).run()
            seconds = time.perf_counter() - began
            assert result.left == 0 and result.retirement.destroyed == [old] and store.not_current() == 0, result
            print(
                f"rotation of {total:,} data keys: {seconds:.2f} s ({seconds / total * 1e6:.0f} µs per key: unwrap "
                f"+ wrap + UPDATE), retired KEK {old} destroyed"
            )
            if name == "pkcs11":
                for kek in source.ids():
                    if kek != source.keys().current_id:
                        source.destroy(kek)
            DataKey.objects.using(keyring.KEYRING).all().delete()
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
