"""Receipts name no words of the member's (docs/receipts.md "Names in receipts").

A forget by key records which memory it erased, and the namespace and key are words the member
(or their agent) wrote: "travel", "seat". A receipt outlives the memory and is read by every admin
role, the owner's API and its CSV export, so it keeps them only as keyed digests:

- `namespaceHmac` = HMAC-SHA256(HKDF(K, `gam/v1|receipt-name|namespace`), namespace), and
  `keyHmac` = HMAC-SHA256(HKDF(K, `gam/v1|receipt-name|key`), JSON `[namespace, key]`), hex;
- K, the **name key**, is one random 256-bit key per membership (workspace, member, membership
  period), kept in the key store beside the data keys (owner `retention.receipt_names`, wrapped by
  the KEK like them), so no admin role, no database dump and no database backup holds it.

Why keyed, and why this key: namespaces and keys are short words from a small vocabulary, so a
plain hash (or one keyed with a server-wide secret such as `CONTENT_DIGEST_KEY`) is resolved by
hashing a dictionary. With K nobody can test a guess; the member's own pages can still name what
they erased where the name lives on (`resolve`: their live namespaces and keys are hashed with K
and matched); and K is destroyed when the membership ends (removal, account deletion, workspace
deletion: `destroy_for_members`, and the keyring sweep for whatever a crash left), after which the
digests are noise to everyone, the member included. One key per membership, not per workspace:
two members who forgot the same key would otherwise show the same digest.

`seal_filters` is what `receipts.append` stores; `resolve` is what the member's receipts API and
export add (never stored, never hashed).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import uuid
from collections.abc import Iterable
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.db import IntegrityError, transaction
from django.utils import timezone

from governance.models import Member, Workspace
from memoryapp.crypto import KEY_BYTES, new_data_key
from memoryapp.keyring import KEYRING, key_store
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion

logger = logging.getLogger(__name__)

OWNER = "retention.receipt_names"  # the key store's owner label of name keys
NAMES = ("namespace", "key")  # the filter entries that are the member's words
#: Namespaces that are the product's, not the member's: a sweep's rule naming one alone (the grace
#: purge's scope, the forgetting check's canary) states a rule and stays as written.
PRODUCT_NAMESPACES = frozenset({ASSISTANT_NAMESPACE, "forgetting-check"})
DIGESTS = {"namespace": "namespaceHmac", "key": "keyHmac"}
_INFO = {"namespace": b"gam/v1|receipt-name|namespace", "key": b"gam/v1|receipt-name|key"}
_KEY_ID_NAMESPACE = uuid.UUID("0b7f4a52-7e3c-5c1e-9d4a-33a1c0de0033")


# --- the name key -------------------------------------------------------------------------------
def name_key_id(workspace_id: int, member_id: int | None, period: int = 1) -> uuid.UUID:
    """The key store id of a membership's name key (member None: a receipt of several members)."""
    member = "-" if member_id is None else f"{int(member_id)}.{int(period)}"
    return uuid.uuid5(_KEY_ID_NAMESPACE, f"gam/receipt-names/v1|w{int(workspace_id)}|m{member}")


def _period(workspace_id: int, member_id: int | None) -> int | None:
    """The member's current membership period; None when the membership is gone or ended (its
    name key is destroyed then, and a receipt written for it names nothing anyone can resolve)."""
    if member_id is None:
        return 1
    return (
        Member.objects.filter(pk=member_id, workspace_id=workspace_id).active().values_list("period", flat=True).first()
    )


def name_key(workspace_id: int, member_id: int | None, *, create: bool) -> bytes | None:
    """The membership's name key, made on first use when `create`. None: no such key (never made,
    destroyed, the membership ended), or it does not unwrap."""
    period = _period(workspace_id, member_id)
    return None if period is None else stored_key(name_key_id(workspace_id, member_id, period), create=create)


def stored_key(key_id: uuid.UUID, *, create: bool) -> bytes | None:
    """The name key stored under `key_id` (made when missing and `create`)."""
    store = key_store()
    found = store.get_many([key_id])
    if key_id not in found and create:
        try:
            with transaction.atomic(using=KEYRING):  # a concurrent first use stored it: keep theirs
                store.put({key_id: new_data_key()}, owner=OWNER)
        except IntegrityError:
            pass
        found = store.get_many([key_id])
    return found.get(key_id)


def destroy_for_members(workspace_id: int, members: Iterable[tuple[int, int]], *, workspace: bool = False) -> int:
    """Destroy the name keys of these memberships ((member id, period) pairs; with `workspace`,
    the workspace's own too): from now on their receipts' digests resolve for nobody."""
    ids = [name_key_id(workspace_id, member_id, period) for member_id, period in members]
    if workspace:
        ids.append(name_key_id(workspace_id, None))
    return key_store().delete_many(ids) if ids else 0


def destroy_orphaned(chunk: int = 500) -> int:
    """The keyring sweep's share: destroy every name key whose membership has ended or is gone
    (a removal whose on-commit destruction was lost, a re-added member's earlier period)."""
    store, started = key_store(), timezone.now()  # a key made after this may be a membership newer than `alive`
    alive = {name_key_id(ws, m, p) for ws, m, p in Member.objects.active().values_list("workspace_id", "pk", "period")}
    alive |= {name_key_id(ws, None) for ws in Workspace.objects.values_list("pk", flat=True)}
    destroyed, after = 0, None
    while ids := store.scan(owner=OWNER, created_before=started, after=after, limit=chunk):
        destroyed += store.delete_many([key_id for key_id in ids if key_id not in alive])
        after = ids[-1]
    return destroyed


# --- digests ------------------------------------------------------------------------------------
def _subkey(key: bytes, name: str) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=_INFO[name]).derive(key)


def _message(name: str, namespace: str, key: str | None) -> bytes:
    return (namespace if name == "namespace" else json.dumps([namespace, key], ensure_ascii=False)).encode("utf-8")


class Digester:
    """HMACs under one name key (the two subkeys derived once)."""

    def __init__(self, key: bytes):
        self._keys = {name: _subkey(key, name) for name in NAMES}

    def digest(self, name: str, namespace: str, key: str | None = None) -> str:
        return hmac.new(self._keys[name], _message(name, namespace, key), hashlib.sha256).hexdigest()


def has_names(filters: Any) -> bool:
    """Whether the filters hold words of the member's: a key, or a namespace not the product's."""
    if not isinstance(filters, dict):
        return False
    return "key" in filters or ("namespace" in filters and filters["namespace"] not in PRODUCT_NAMESPACES)


def seal_filters(filters: dict[str, Any], *, key: bytes | None) -> dict[str, Any]:
    """The filters as a receipt stores them: `namespace` and `key` replaced by their digests under
    the name key (`key` None: under a random key used once and dropped — nobody can resolve them,
    which is right for a membership that has ended or a name key that does not unwrap)."""
    if not has_names(filters):
        return filters
    if key is None:
        key = new_data_key()
    digester = Digester(key)
    namespace = str(filters.get("namespace", ""))
    sealed = {name: value for name, value in filters.items() if name not in NAMES}
    if "namespace" in filters:
        sealed[DIGESTS["namespace"]] = digester.digest("namespace", namespace)
    if "key" in filters and filters["key"] is not None:
        sealed[DIGESTS["key"]] = digester.digest("key", namespace, str(filters["key"]))
    return sealed


def sealed_manifest(manifest: dict[str, Any], *, workspace_id: int, member_id: int | None) -> dict[str, Any]:
    """The manifest with its filters sealed (the name key made on first use)."""
    filters = manifest.get("filters") if isinstance(manifest, dict) else None
    if not has_names(filters):
        return manifest
    key = name_key(workspace_id, member_id, create=True)
    if key is None:
        logger.warning(
            "receipt names sealed under a one-time key (membership ended, or its name key does not unwrap)",
            extra={"workspace_id": workspace_id, "member_id": member_id},
        )
    return {**manifest, "filters": seal_filters(filters, key=key)}


# --- what the member may read back ------------------------------------------------------------------
class Resolver:
    """Names the digests of one member's receipts from their live memories: each digest matched
    against the HMACs of the namespaces and keys the member still keeps. Built lazily, once."""

    def __init__(self, member: Member):
        self.member = member
        self._table: dict[str, tuple[str, str]] | None = None

    def _build(self) -> dict[str, tuple[str, str]]:
        key = name_key(self.member.workspace_id, self.member.pk, create=False)
        if key is None:
            return {}
        digester = Digester(key)
        live = MemoryVersion.objects.restrict(self.member, "keep")
        table: dict[str, tuple[str, str]] = {}
        for namespace, memory_key in (
            live.order_by().values_list("namespace", "key").distinct().iterator(chunk_size=2000)
        ):
            table.setdefault(digester.digest("namespace", namespace), ("namespace", namespace))
            if memory_key is not None:
                table[digester.digest("key", namespace, memory_key)] = ("key", memory_key)
        return table

    def resolve(self, manifest: Any) -> dict[str, str]:
        """{"namespace": …, "key": …} for the digests of this receipt that a live memory of the
        member still names ({} when none does: forgotten is forgotten)."""
        filters = manifest.get("filters") if isinstance(manifest, dict) else None
        if not isinstance(filters, dict) or not any(d in filters for d in DIGESTS.values()):
            return {}
        if self._table is None:
            self._table = self._build()
        found = {}
        for name, field in DIGESTS.items():
            entry = self._table.get(filters.get(field)) if isinstance(filters.get(field), str) else None
            if entry is not None and entry[0] == name:
                found[name] = entry[1]
        return found
