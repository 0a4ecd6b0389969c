"""Benchmark: what the receipt chain (hash + Ed25519 signature + chain-head lock) adds to one
erase, on PostgreSQL.

    nice -n 10 .venv/bin/python bench/receipt_chain.py [--erases 300]

Plants expired agent memory versions (one citation, one embedding each; bench/sweep.py's rows)
in a dedicated database (`bench_receipt_chain`, recreated), then erases them one version per
call with `retention.erasure.erase_memories` — a forget's work — alternating two ways so a busy
host slows both alike: with the chain (as shipped) and without (the receipt row written by a
plain INSERT, no hash, signature nor head lock). Prints p50/p95 of both and their difference,
the cost of sealing alone (canonical JSON + SHA-256 + signature) and of verifying one receipt.
"""

from __future__ import annotations

import argparse
import itertools
import time

from _setup import pct, setup, summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--erases", type=int, default=300, help="erases timed each way")
    args = parser.parse_args()
    setup("bench_receipt_chain", redis_db=11)

    from sweep import plant

    from governance import actions
    from memoryapp.models import MemoryVersion
    from retention import erasure, receipts
    from retention.models import DeletionReceipt

    workspace, owner = actions.create_workspace("Bench", owner_email="bench@bench.test", password="pw-bench-123")
    total = 2 * args.erases + 20
    plant(workspace.pk, [owner.pk], per_member=total, total=total)
    ids = iter(MemoryVersion.objects.filter(workspace=workspace).order_by("pk").values_list("pk", flat=True))
    plain_seq = itertools.count(10**9)  # "without": positions of their own, outside the real chain

    def plain_create(**fields):
        return DeletionReceipt.objects.create(**fields, chain_seq=next(plain_seq))

    def erase_one():
        erasure.erase_memories(
            [next(ids)],
            operation="forget",
            workspace_id=workspace.pk,
            member_id=owner.pk,
            actor_label="bench",
            filters={"memoryId": "bench"},
        )

    chained = receipts.append
    with_chain, without = [], []
    for i in range(args.erases + 10):
        for mode in (True, False) if i % 2 else (False, True):
            erasure.receipts.append = chained if mode else plain_create
            start = time.perf_counter()
            erase_one()
            elapsed = (time.perf_counter() - start) * 1000
            if i >= 10:  # warm-up
                (with_chain if mode else without).append(elapsed)
    erasure.receipts.append = chained

    sample = (
        DeletionReceipt.objects.filter(workspace_ref=workspace.pk, chain_seq__lt=10**9).order_by("-chain_seq").first()
    )
    seal_ms = []
    for _ in range(2000):
        start = time.perf_counter()
        receipts.seal(sample)
        seal_ms.append((time.perf_counter() - start) * 1000)
    DeletionReceipt.objects.filter(chain_seq__gte=10**9).delete()
    start = time.perf_counter()
    report = receipts.verify_chain(workspace.pk)
    verify_ms = (time.perf_counter() - start) * 1000
    assert report["intact"], report

    print(summary("erase of 1 version, receipt chained + signed", with_chain))
    print(summary("erase of 1 version, plain receipt", without))
    print(
        f"{'added by the chain':<48} p50 {pct(with_chain, 50) - pct(without, 50):+7.2f} ms   p95 "
        f"{pct(with_chain, 95) - pct(without, 95):+7.2f} ms"
    )
    print(summary("seal alone (canonical JSON, SHA-256, Ed25519)", seal_ms))
    print(
        f"{'verify_chain':<48} {report['receipts']} receipts in {verify_ms:.1f} ms = "
        f"{verify_ms / report['receipts']:.3f} ms per receipt"
    )


if __name__ == "__main__":
    main()
