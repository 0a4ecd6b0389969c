"""The periodic jobs, by name: the one registry that Celery beat (through `retention.tasks`, and
`credits.tasks` for the credit jobs) and `manage.py run_periodic_jobs` both run. A job takes no arguments and returns a
JSON-able summary
(counts, never content). It sits with the tasks, above the services whose jobs it names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from credits import jobs as credit_jobs
from governance import linking
from memoryapp import consolidation, encryption
from retention import keysweep, lifecycle, receipt_checks

# The credit accounting's (SPEC §9, credits/jobs.py): Celery runs them as `credits.tasks.<name>`.
CREDIT_JOBS: dict[str, Callable[[], dict[str, Any]]] = {
    "settle_usage": credit_jobs.settle_usage,
    "daily_rollup": credit_jobs.daily_rollup,
    "quota_reset": credit_jobs.quota_reset,
    "reconcile_credits": credit_jobs.reconcile_credits,
}

JOBS: dict[str, Callable[[], dict[str, Any]]] = {
    "expiry_sweep": lifecycle.expiry_sweep,
    "cascade_sweep": lifecycle.cascade_sweep,
    "grace_purge": lifecycle.grace_purge,
    "access_log_sweep": lifecycle.access_log_sweep,
    "wal_sweep": lifecycle.wal_sweep,  # SQLite: erased frames leave the WAL once no reader holds them
    "link_sweep": linking.link_sweep,  # entity links a lost task or a restarted worker left pending
    "keyring_sweep": keysweep.sweep_keyring,  # SPEC §8.2: data keys and sealed rows converge
    # SPEC §8.2: a new KEK every KEK_ROTATION_HOURS, the old one destroyed (closes receipts' residualUntil)
    "kek_rotation": encryption.scheduled_rotation,
    **CREDIT_JOBS,
    "consolidation_sweep": consolidation.sweep_stale_consolidations,
    # every receipt chain from its first receipt (docs/receipts.md), beyond the endpoint's bounded check
    "receipt_chain_check": receipt_checks.check_all_chains,
}
