"""The lifecycle matrix (SPEC §8): every artifact class the application stores, in one definition.

The endpoint (`GET /api/w/:wsId/ask-history/lifecycle`) and `docs/lifecycle.md` are both rendered
from `artifact_classes()`. Schedules, windows and chunk sizes are read from the code that applies
them (the beat schedule, the rate-limit window, the erasure chunk), and tests check that every
model of the project is either listed here or explicitly not memory-derived, and that every
function named as a delete method exists. Regenerate the docs table with
`python -m retention.matrix` (it rewrites the block between the markers in docs/lifecycle.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings

from core.chunks import CHUNK


@dataclass(frozen=True)
class ArtifactClass:
    key: str
    name: str
    store: str
    models: tuple[str, ...]  # "app_label.ModelName" of every model holding this class
    derived_from: str
    scope: str
    retention: str
    delete_method: str
    deleted_by: tuple[str, ...]  # dotted paths of the functions that delete it
    unreachable: str
    purged: str
    residual: str

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["models"] = list(self.models)
        data["deletedBy"] = list(data.pop("deleted_by"))
        data["derivedFrom"] = data.pop("derived_from")
        data["deleteMethod"] = data.pop("delete_method")
        return data


#: Models of the project that hold nothing derived from a memory, with the reason.
NOT_MEMORY_DERIVED: dict[str, str] = {
    "governance.Workspace": "Tenant; deleting it erases its memories first (cascade, receipts).",
    "governance.AskHistorySettings": "The retention settings themselves.",
    "governance.Member": "Membership; its removal erases its memories (cascade).",
    "governance.Collection": "Knowledge that memories cite; its deletion erases dependent memories.",
    "governance.Document": "Knowledge that memories cite; its deletion erases dependent memories.",
    "governance.DocumentVersion": "Knowledge that memories cite.",
    "governance.Passage": "Knowledge that memories cite (the passage text is workspace content, not memory content).",
    "governance.Entity": "Knowledge: entities resolved from passages, never from memories.",
    "governance.ContextSet": "Scoping configuration.",
    "governance.Credential": "Agent credential (hash only); memories keep its id, not the reverse.",
    "governance.PersonalToken": "Member's personal token (hash only).",
    "governance.Agent": "Assistant configuration (vector-memory switch).",
    "credits.ModelPrice": "Price list.",
    "credits.CreditAccount": "Workspace credit balance.",
    "credits.MemberQuota": "Credit quota configuration and counter.",
    "credits.RoleQuota": "Credit quota configuration and counter.",
    "memoryapp.KekRecord": "Key store: when each key-encryption key was made and destroyed (ids and instants, no key "
    "material).",
    "memoryapp.KekRotationLease": "Key store: which process holds the scheduled KEK rotation, and until when.",
}


def _every(entry: str) -> str:
    schedule = settings.CELERY_BEAT_SCHEDULE[entry]["schedule"]
    if isinstance(schedule, timedelta):
        minutes = int(schedule.total_seconds() // 60)
        return f"every {minutes} min (beat `{entry}`)"
    return f"on the `{entry}` beat schedule"


def _backups() -> str:
    return (
        "SQLite: none in the database file (erased rows are overwritten, secure_delete); the WAL is checkpointed and "
        "truncated when the erase commits, or by the WAL sweep (every 5 min) once a reader held open from before the "
        "erase has ended. PostgreSQL: dead tuples until VACUUM (run after every sweep that erases, autovacuum "
        "otherwise), reclaimed page space until new rows overwrite it, WAL segments until the server recycles them, "
        "archived WAL for WAL_ARCHIVE_RETENTION_DAYS (0 = no archiving). Database backups taken before the purge keep "
        "the rows until they rotate out: BACKUP_RETENTION_DAYS (0 = no backups configured)."
    )


def _sealed_backups() -> str:
    return (
        _backups()
        + " What any of these keep of the content is AES-256-GCM ciphertext under the version's data key, destroyed "
        "by the erase (SPEC §8.2): unreadable once the key store's own residual window (data_key, "
        "KEYRING_BACKUP_RETENTION_DAYS) has passed."
    )


def _keyring_residual() -> str:
    return (
        "SQLite (embedded default, var/keyring.sqlite3): none in the file (destroyed keys are overwritten, "
        "secure_delete); its WAL is truncated at once, or by the WAL sweep (every 5 min) once a reader held open from "
        "before the erase has ended. PostgreSQL (KEYRING_DATABASE_URL): dead tuples until VACUUM, WAL until recycled, "
        "as for the data. Key-store backups taken before the erase keep the key until they rotate out: "
        "KEYRING_BACKUP_RETENTION_DAYS (default 0). Until then a database backup restored together with such a "
        "key-store backup reads the memory: keep key-store backups separate and brief."
    )


def _duration(seconds: int) -> tuple[int, str]:
    """RATE_LIMIT_WINDOW_SECONDS in the largest whole unit: (2, "hour"), (60, "minute"), (90, "second")."""
    if seconds % 3600 == 0 and seconds > 3600:
        return seconds // 3600, "hour"
    if seconds % 60 == 0:
        return seconds // 60, "minute"
    return seconds, "second"


def artifact_classes() -> list[ArtifactClass]:
    # Here, not at the top: `python -m retention.matrix` imports this module before Django is set up.
    from memoryapp.ratelimit import window_seconds

    amount, unit = _duration(window_seconds())
    erase = "retention.erasure.erase_memories"
    same_as_memory_unreachable = "With its memory version (same rules)."
    same_as_memory_purged = "In the same transaction as its memory version (same DELETE batch)."
    return [
        ArtifactClass(
            key="memory_version",
            name="Memory version",
            store="Database table memoryapp_memoryversion",
            models=("memoryapp.MemoryVersion",),
            derived_from="Agent remember (REST, MCP), the member's AI-memory page and API, consolidation; masked text "
            "only, the unmasked original is never stored.",
            scope="One workspace and one member (the credential's member); a chain of versions per (member, "
            "namespace, key).",
            retention=(
                "agentMemoryRetentionDays (1-365, default 90) after creation; assistant memories after their last "
                "create, edit or reactivation. Computed on every read, so a settings change applies at once, both "
                "ways. Assistant memories then stay 'expired' (member only, reactivatable) for expiredGraceDays "
                "(0-90, default 30)."
            ),
            delete_method=f"{erase}: rows deleted in the transaction that writes the deletion receipt; periodic jobs "
            f"claim chunks of {CHUNK} with SELECT ... FOR UPDATE SKIP LOCKED.",
            deleted_by=(
                erase,
                "retention.lifecycle.expiry_sweep",
                "retention.lifecycle.grace_purge",
                "retention.cascades.erase_unreachable",
                "memoryapp.actions.forget",
            ),
            unreachable=(
                "Forget and deletes: at once. Expiry: at the computed expiry instant, before any sweep. Cascades "
                "(document, collection, membership, workspace, non-retaining): in the cause's transaction "
                "(unreachable_at)."
            ),
            purged=(
                f"Forget and deletes: at once. Agent memories at expiry: expiry sweep, {_every('expiry-sweep')}. "
                f"Assistant memories: grace purge, {_every('grace-purge')}, once expiredGraceDays have passed. "
                f"Cascades: a task started on commit; the cascade sweep, {_every('cascade-sweep')}, catches any it "
                "missed."
            ),
            residual=_sealed_backups(),
        ),
        ArtifactClass(
            key="citation",
            name="Citation",
            store="Database table memoryapp_citation",
            models=("memoryapp.Citation",),
            derived_from="The passages a memory cites: passage, document and document-version ids and the SHA-256 of "
            "the passage text; never the text.",
            scope="Its memory version.",
            retention="That of its memory version.",
            delete_method=f"{erase}, with its memory version.",
            deleted_by=(erase,),
            unreachable=same_as_memory_unreachable,
            purged=same_as_memory_purged,
            residual=_backups(),
        ),
        ArtifactClass(
            key="embedding",
            name="Embedding and recall terms",
            store="Database table memoryapp_memoryembedding (the version's search index entry)",
            models=("memoryapp.MemoryEmbedding",),
            derived_from="The masked memory text: its vector by the configured embedder (MEMORY_EMBEDDER, id stored "
            "with it) and its BM25 recall tokens; both sealed under the version's data key.",
            scope="Its memory version.",
            retention="That of its memory version.",
            delete_method=f"{erase}, with its memory version.",
            deleted_by=(erase,),
            unreachable=same_as_memory_unreachable,
            purged=same_as_memory_purged,
            residual=_sealed_backups(),
        ),
        ArtifactClass(
            key="data_key",
            name="Data key",
            store="Key store: database alias `keyring`, table memoryapp_datakey (SQLite var/keyring.sqlite3, or "
            "KEYRING_DATABASE_URL); never in the data's database",
            models=("memoryapp.DataKey",),
            derived_from=(
                "A random 256-bit AES key per memory version (its text, details, kind, vector and recall terms are "
                "sealed under it) and per consolidation input, stored wrapped (AES-256-GCM) by the key-encryption key "
                "MEMORY_KEK (docs/encryption.md). Nothing derived from content."
            ),
            scope="One memory version (or one consolidation's input).",
            retention="That of what it seals.",
            delete_method=(
                f"{erase}: destroyed after the version's rows are deleted and before the receipt is written "
                "(keysDestroyed); a consolidation's when its input is purged; the keyring sweep destroys keys left "
                "by an interrupted erase and erases rows whose key is gone."
            ),
            deleted_by=(
                erase,
                "retention.erasure.destroy_keys",
                "memoryapp.consolidation.purge_input",
                "retention.keysweep.sweep_keyring",
            ),
            unreachable=same_as_memory_unreachable,
            purged=f"In the erase, before it commits; leftovers by the keyring sweep, {_every('keyring-sweep')}.",
            residual=_keyring_residual(),
        ),
        ArtifactClass(
            key="access_log_entry",
            name="Access log entry",
            store="Database table memoryapp_accessentry (PostgreSQL: a GIN index on its memories list)",
            models=("memoryapp.AccessEntry",),
            derived_from=(
                "Every agent read that returned memories (recall, list; REST and MCP), one per request: when, the "
                "credential's id and name, operation, surface, the ids and version numbers of the memories returned "
                "and the hidden count. Never the query, never memory text. A read that returned nothing is not logged."
            ),
            scope="One workspace and one member (the credential's member); the member sees theirs, owners counts per "
            "day, the admin ids and counts.",
            retention="ACCESS_LOG_RETENTION_DAYS (default 90) after the read; read paths stop showing it then, before "
            "the sweep runs.",
            delete_method=(
                f"Erased with the memories it lists, in the transaction of their erase ({erase} -> "
                "memoryapp.access_log.strike_references): an erased memory's reference is struck from every entry "
                "listing it, an entry left listing nothing is deleted, and the receipt's manifest counts both "
                "(access_log_entry, access_log_reference). Expired entries: the access-log sweep, "
                f"{_every('access-log-sweep')}, in chunks of {CHUNK}."
            ),
            deleted_by=(erase, "memoryapp.access_log.strike_references", "retention.lifecycle.access_log_sweep"),
            unreachable="With each listed memory's erase (forget, deletes, owner bulk delete, expiry, cascades, "
            "member removal, workspace deletion); at ACCESS_LOG_RETENTION_DAYS.",
            purged="In the erase's transaction; expired entries by the access-log sweep, "
            f"{_every('access-log-sweep')}; all of a workspace's with the workspace.",
            residual=_backups(),
        ),
        ArtifactClass(
            key="receipt",
            name="Deletion receipt",
            store="Database tables retention_deletionreceipt, retention_receiptchain (each workspace's chain head)",
            models=("retention.DeletionReceipt", "retention.ReceiptChain"),
            derived_from=(
                "An erase: operation, actor, artifact counts, filters, memory version ids, timestamps, residual "
                "window, verification results (each a signed record); its place in the workspace's hash chain, "
                "SHA-256 and Ed25519 signature (docs/receipts.md). No memory content."
            ),
            scope="Workspace (plain id, kept after the workspace is deleted); member when every erased memory was "
            "theirs.",
            retention="Kept: it is the proof of deletion.",
            delete_method="Not deleted by the application (read-only in the admin).",
            deleted_by=(),
            unreachable="Never: readable by the workspace owner (counts) and the member (own).",
            purged="Never by the application.",
            residual=_backups(),
        ),
        ArtifactClass(
            key="usage_record",
            name="Usage record",
            store="Database tables retention_usagerecord, retention_ledgerentry, retention_usagerollup",
            models=("credits.UsageRecord", "credits.LedgerEntry", "credits.UsageRollup"),
            derived_from="Token counts and costs of consolidations and replies (including how many input tokens were "
            "AI memory). No memory content.",
            scope="Workspace and the member charged.",
            retention="Kept for accounting; the member link is cleared when the member row goes; deleted with the "
            "workspace.",
            delete_method="Database CASCADE when the workspace is deleted.",
            deleted_by=("governance.actions.delete_workspace",),
            unreachable="Never while the workspace exists (usage history).",
            purged="When the workspace is deleted.",
            residual=_backups(),
        ),
        ArtifactClass(
            key="rate_limit_counter",
            name="Rate-limit counter",
            store="Redis sorted sets ratelimit:<budget>:<credential id> and ratelimit:<budget>:member:<member id> "
            "(production) or table memoryapp_ratelimitslot, one bucket each, rows carrying credential and "
            "member ids (embedded)",
            models=("memoryapp.RateLimitSlot",),
            derived_from="Admitted remembers, reads and conversation turns: credential id, member id and time. Not "
            "memory content, and not reset by forgetting (SPEC §4.7).",
            scope="One credential and its member.",
            retention=f"Rolling {amount}-{unit} window.",
            delete_method="Redis: entries trimmed on every remember and the key expires one window after the last; "
            "database: rows older than the window deleted by the cascade sweep "
            f"({_every('cascade-sweep')}).",
            deleted_by=("retention.lifecycle.cascade_sweep",),
            unreachable=f"{amount} {unit}{'s' if amount != 1 else ''} after the remember (it stops counting).",
            purged="Redis: on the next remember or key expiry; database: by the next cascade sweep, "
            f"{_every('cascade-sweep')}.",
            residual="Redis persistence snapshots, if enabled on the server, as configured there; database backups: "
            "BACKUP_RETENTION_DAYS.",
        ),
        ArtifactClass(
            key="consolidation_input",
            name="Consolidation input",
            store="Database table retention_consolidation (messages), Celery task payload (ids only)",
            models=("credits.Consolidation",),
            derived_from="A submitted conversation turn; only messages in which the masker found no personal data are "
            "stored (a turn with any is skipped and stores none).",
            scope="Workspace and the member being remembered.",
            retention="Messages are emptied as soon as the consolidation task finishes, whatever the outcome, or when "
            "the member's membership ends (removal, a deleted account: waiting turns are skipped, never "
            "consolidated into a later membership period); the row keeps status, counts and the ids of the "
            "memories written.",
            delete_method="Consolidation task clears `messages` (input_purged_at); member removal clears them for the "
            "member's waiting turns (memoryapp.consolidation.discard_turns_of); the row is deleted "
            "with the workspace.",
            deleted_by=("governance.actions.delete_workspace", "memoryapp.consolidation.discard_turns_of"),
            unreachable="When the task finishes, or when the member is removed.",
            purged="Messages: when the task finishes, or in the member removal's transaction. Row: with the workspace.",
            residual=_backups(),
        ),
        ArtifactClass(
            key="audit_event",
            name="Audit event",
            store="Database table governance_auditevent",
            models=("governance.AuditEvent",),
            derived_from="Governance changes: who, what, old -> new (settings, credentials, roles, bulk deletions "
            "with counts, admin content views). Never memory content.",
            scope="Workspace (plain id kept after the workspace is deleted).",
            retention="Kept (audit trail).",
            delete_method="Not deleted by the application (read-only in the admin).",
            deleted_by=(),
            unreachable="Never.",
            purged="Never by the application.",
            residual=_backups(),
        ),
        ArtifactClass(
            key="task_message",
            name="Task message",
            store="Celery broker (Redis in production, SQLite file embedded)",
            models=(),
            derived_from="Ids of workspaces or consolidations to process. Never memory text.",
            scope="One task.",
            retention="Until a worker acknowledges it; periodic entries expire if not run in time.",
            delete_method="Acknowledged by the worker.",
            deleted_by=(),
            unreachable="Not applicable (no content).",
            purged="When acknowledged.",
            residual="Broker persistence as configured on the broker server.",
        ),
        ArtifactClass(
            key="process_cache",
            name="In-process caches",
            store="None: no process keeps memory text, tokens or unmasked input between requests",
            models=(),
            derived_from="Nothing. The masker and the embedder keep no caches of text (by design: an erase could not "
            "reach them); only the embedder's model weights and compiled patterns are cached.",
            scope="One process.",
            retention="Not applicable: a request's text lives only while that request is handled.",
            delete_method="Not applicable.",
            deleted_by=(),
            unreachable="Not applicable.",
            purged="When the request ends.",
            residual="None.",
        ),
        ArtifactClass(
            key="backups",
            name="Backups",
            store="Outside the application: database backups, as configured by the operator",
            models=(),
            derived_from="Snapshots of every table above.",
            scope="The whole database.",
            retention="BACKUP_RETENTION_DAYS (stated in every deletion receipt's residual window).",
            delete_method="Backup rotation by the operator.",
            deleted_by=(),
            unreachable="Not readable through the application.",
            purged="When the backup rotates out.",
            residual=_backups(),
        ),
    ]


COLUMNS = (
    ("name", "Artifact"),
    ("store", "Store"),
    ("derived_from", "Derived from"),
    ("scope", "Scope"),
    ("retention", "TTL / retention rule"),
    ("delete_method", "Delete method"),
    ("unreachable", "When unreachable"),
    ("purged", "When purged"),
    ("residual", "Residual window"),
)

START_MARKER = "<!-- lifecycle-matrix:start (generated by `python -m retention.matrix`; do not edit) -->"
END_MARKER = "<!-- lifecycle-matrix:end -->"
DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "lifecycle.md"


def render_markdown() -> str:
    lines = []
    for artifact in artifact_classes():
        lines.append(f"### {artifact.name}\n")
        for field, label in COLUMNS[1:]:
            lines.append(f"- **{label}:** {getattr(artifact, field)}")
        if artifact.models:
            lines.append(f"- **Models:** {', '.join(f'`{m}`' for m in artifact.models)}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def docs_block(text: str) -> str:
    start = text.index(START_MARKER) + len(START_MARKER)
    return text[start : text.index(END_MARKER)].strip("\n") + "\n"


def write_docs(path: Path = DOC_PATH) -> None:
    text = path.read_text()
    start = text.index(START_MARKER) + len(START_MARKER)
    end = text.index(END_MARKER)
    path.write_text(text[:start] + "\n" + render_markdown() + "\n" + text[end:])


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    write_docs()
    print(f"rewrote the matrix in {DOC_PATH}")
