"""The fault rehearsal's short form (bench/faults.py --short, issue 32 item 5) on this suite's
backend: PostgreSQL restarted, Redis restarted, the key store unreachable and a worker killed
mid-erase under a client load, against the harness's OWN servers (PostgreSQL on 8055 and 8057,
Redis on 8056, the web on 8050), never the suite's. Each fault recovers without restarting the web
or the worker, no memory answered 201 is lost, the interrupted erase converges once the sweep has
run (no row without its key, no key without its row, every id in exactly one receipt), and the
worker that lived through each fault still erases a removed member's memories by itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rehearsal() -> dict[str, dict]:
    backend = "postgres" if settings.IS_POSTGRES else "sqlite"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "faults.py"), "--short", "--backend", backend],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout[-3000:] + done.stderr[-3000:]
    results = {r["fault"]: r for r in json.loads(lines[-1][len("RESULT ") :])}
    results["_output"] = {"stdout": done.stdout, "returncode": done.returncode}
    return results


def faults(rehearsal: dict[str, dict]) -> list[dict]:
    return [r for name, r in rehearsal.items() if not name.startswith("_") and name != "all"]


def test_every_fault_of_the_backend_was_rehearsed(rehearsal):
    expected = (
        {"pg_restart", "redis_restart", "keyring_down", "worker_kill"}
        if settings.IS_POSTGRES
        else {"keyring_down", "worker_kill"}
    )
    assert {r["fault"] for r in faults(rehearsal)} == expected, rehearsal["_output"]["stdout"][-3000:]
    assert not rehearsal["all"]["webRestarted"]


def test_each_fault_recovers_without_a_restart_and_loses_no_remember(rehearsal):
    for result in faults(rehearsal):
        assert result["timeToRecover"] is not None, result
        assert result["afterRecovery"]["requests"] > 0 and set(result["afterRecovery"]["statuses"]) <= {"200", "201"}, (
            result
        )
        assert (
            result["lost201"]["answered201"] > 0
            and result["lost201"]["missing"] == 0
            and result["lost201"]["unreadable"] == 0
        ), result
        assert result["worker"]["removeStatus"] == 204 and result["worker"]["erasedByWorkerIn"] is not None, result


def test_while_a_store_is_down_every_answer_is_json_and_every_5xx_a_retryable_503(rehearsal):
    for result in faults(rehearsal):
        assert result["nonJson"] == 0 and result["5xxWithoutRetryAfter"] == 0, result
        assert not any(failure.startswith("500") for failure in result["failures"]), result


def test_the_erase_interrupted_by_a_killed_worker_converges_with_one_receipt_per_memory(rehearsal):
    result = rehearsal["worker_kill"]
    assert result["taskSeen"], result  # the kill hit a worker that had the erase
    after = result["afterSweep"]
    assert (after["rows"], after["keys"], after["rowsWithoutKey"], after["keysWithoutRow"]) == (0, 0, 0, 0), result
    assert after["idsInReceipts"] == result["victimMemories"] and after["idsInTwoReceipts"] == 0, result


def test_the_rehearsal_reports_success(rehearsal):
    assert rehearsal["_output"]["returncode"] == 0, rehearsal["_output"]["stdout"][-3000:]
