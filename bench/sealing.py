"""What envelope encryption costs a read and a write (SPEC §8.2), on PostgreSQL.

    .venv/bin/python bench/sealing.py [--candidates 300] [--dim 384] [--repeat 200]

Prints, for recall's candidates: the key-store query with the unwrap of every key (one query),
the unwrap alone, opening every candidate's vector and terms, and all of it together (the
figure the issue bounds at 3 ms); and for a write: creating and storing one data key and sealing a
version's five fields. Unwrapped keys are never cached (docs/encryption.md): this is the price.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(__file__))
from _setup import setup, summary, timed  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--candidates", type=int, default=300)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    setup("bench_sealing")

    import numpy as np

    from memoryapp import crypto, sealing
    from memoryapp.keyring import DataKey, key_encryption_keys, key_store
    from memoryapp.models import MemoryEmbedding

    owner = (1, 1)  # (workspace id, member id) the values are bound to
    rng = np.random.default_rng(7)
    store = key_store()
    keys = {uuid.uuid4(): crypto.new_data_key() for _ in range(args.candidates)}
    store.put(keys, owner="memoryapp.memoryversion")
    ids = list(keys)
    table = MemoryEmbedding._meta.db_table
    terms = " ".join(f"term{i}" for i in range(12))
    rows = []
    for key_id, dek in keys.items():
        cipher = crypto.DataKeyCipher(dek)
        vector = rng.standard_normal(args.dim).astype("<f4").tobytes()
        rows.append(
            (
                key_id,
                crypto.seal(cipher, vector, crypto.field_aad(table, owner, key_id, "vector")),
                crypto.seal(cipher, terms.encode(), crypto.field_aad(table, owner, key_id, "terms")),
            )
        )
    wrapped = list(DataKey.objects.filter(pk__in=ids).values_list("key_id", "wrapped_by", "wrapped"))
    keks = key_encryption_keys()

    def fetch():
        return sealing.fetch_keys(ids)

    def unwrap_only():
        for key_id, by, blob in wrapped:
            keks.unwrap(key_id, by, bytes(blob))

    ciphers = fetch()

    def open_all(found=ciphers):
        for key_id, vector, term_blob in rows:
            sealing.open_values(MemoryEmbedding, key_id, owner, found, {"vector": vector, "terms": term_blob})

    def everything():
        open_all(fetch())

    def write_one():
        key_id, dek = uuid.uuid4(), crypto.new_data_key()
        store.put({key_id: dek}, owner="memoryapp.memoryversion")
        cipher = crypto.DataKeyCipher(dek)
        for field, value in (
            ("text", b"x" * 200),
            ("details", b""),
            ("kind", b"fact"),
            ("vector", b"\0" * (4 * args.dim)),
            ("terms", terms.encode()),
        ):
            crypto.seal(cipher, value, crypto.field_aad("t", owner, key_id, field))

    print(f"envelope encryption, {args.candidates} candidates, {args.dim}-dimension vectors, PostgreSQL key store")
    print(summary("key-store query + unwrap (one query)", timed(fetch, args.repeat)))
    print(summary("unwrap alone (AES-GCM, in memory)", timed(unwrap_only, args.repeat)))
    print(summary("open vectors + terms", timed(open_all, args.repeat)))
    print(summary("all of it (the recall's overhead)", timed(everything, args.repeat)))
    print(summary("write: new key stored + 5 fields sealed", timed(write_one, args.repeat)))


if __name__ == "__main__":
    main()
