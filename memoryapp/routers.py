"""The key store's database (SPEC §8.2): `memoryapp.DataKey` lives in the `keyring` database, with
the two bookkeeping models of the key-encryption keys (`KekRecord`: when each KEK was made and
destroyed; `KekRotationLease`: who is rotating), and nothing else does, so the data keys are never
in the data store nor in its backups."""

from __future__ import annotations

from typing import Any

KEYRING = "keyring"
_KEY_MODELS = {("memoryapp", "datakey"), ("memoryapp", "kekrecord"), ("memoryapp", "kekrotationlease")}


def _is_key_model(model: Any) -> bool:
    meta = getattr(model, "_meta", None)  # instances may come wrapped (request.user is a lazy object)
    return meta is not None and (meta.app_label, meta.model_name) in _KEY_MODELS


class KeyringRouter:
    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return KEYRING if _is_key_model(model) else None

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return KEYRING if _is_key_model(model) else None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        if _is_key_model(obj1) or _is_key_model(obj2):
            return False  # no foreign key crosses the two databases
        return None

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool | None:
        if (app_label, model_name) in _KEY_MODELS:
            return db == KEYRING
        if db == KEYRING:
            return False
        return None
