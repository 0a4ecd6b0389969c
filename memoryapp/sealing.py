"""Sealed fields: memory content stored only as AES-256-GCM ciphertext, opened in bulk on read.

A model declares its content fields as `SealedField`s and keeps its row's key id in a `RowKeyField`
(or names in `sealed_with` the foreign key whose row's key it shares). Every sealed value is bound
to its table, field, key id and owner (`OWNER_COLUMNS`), so a ciphertext copied to another row, or a
row re-owned by an UPDATE, does not open (docs/encryption.md "Formats"). Then:

- saving the row seals each field under the row's data key, created on first use; `update()` and
  filters refuse a plain value for a sealed field (TypeError): nothing else writes or queries content;
- `SealedQuerySet` (also the base manager) fetches the rows, then all their keys in ONE key-store
  query, and decrypts in place; `values()` stays sealed until `open_values` / `open_rows`;
- a row that does not open (key destroyed, corrupt, bound elsewhere) is left out as if erased,
  logged (ids only) and counted; never a 500, never another row's text (`keep_unreadable()` keeps
  them flagged for a caller that must count them);
- legacy rows (`key_id` NULL) read as plaintext until `manage.py encrypt_memories` seals them.

No unwrapped key is cached between queries, so no process can read a row after its key was
destroyed (docs/encryption.md "Reading: one key-store query, no cache").

Over ~400 lines on purpose: the field types, the bulk open and the seal-on-save are one seam
(the format of a sealed value); cutting them apart would spread the AAD rule over modules.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any
from uuid import UUID, uuid4

from django.core.exceptions import FieldError
from django.db import migrations, models, transaction
from django.db.models.query import ModelIterable
from django.dispatch import Signal

from memoryapp.crypto import (
    FORMAT,
    OVERHEAD,
    DataKeyCipher,
    Owner,
    SealError,
    aad_prefix,
    field_aad,
    new_data_key,
    open_sealed,
    seal,
)
from memoryapp.keyring import key_store, new_row_key

logger = logging.getLogger(__name__)

#: Sent once per read that left rows out: sender = the model, reason = missing_key | bad_key | corrupt, count.
content_unreadable = Signal()

#: The key holder's columns a sealed value is bound to (its associated data names them).
OWNER_COLUMNS = ("workspace_id", "member_id")

MISSING_KEY = "missing_key"  # destroyed: the row is an erase's leftover (the sweep erases it)
BAD_KEY = "bad_key"  # stored but does not unwrap: corrupted, or a KEK missing from RETIRED_KEKS
CORRUPT = "corrupt"  # a ciphertext that does not authenticate: corrupted, or moved from another row or field


class Sealed:
    """A sealed field's value as read from the database, before it is opened. Deliberately not a
    str nor bytes: code that reads content without opening it fails loudly instead of showing
    ciphertext."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes | str):
        self.raw = raw

    def __repr__(self) -> str:
        return f"<Sealed {len(self.raw)} bytes>"

    def __str__(self) -> str:
        raise TypeError("a sealed value was read without being opened (memoryapp.sealing)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sealed) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash(self.raw)  # compared as ciphertext (a test's before/after sets): never opened by it


class Ciphertext(bytes):
    """What `SealedField.pre_save` hands the database: the only value a sealed column accepts."""


_ABSENT = object()


class Unreadable(Exception):
    def __init__(self, reason: str, detail: str = ""):
        super().__init__(detail or reason)
        self.reason = reason


# --- codecs ----------------------------------------------------------------------------------------
def _encode(codec: str, value: Any) -> bytes:
    if codec == "text":
        return str(value).encode("utf-8")
    if codec == "bytes":
        return bytes(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _decode(codec: str, data: bytes) -> Any:
    if codec == "text":
        return data.decode("utf-8")
    if codec == "bytes":
        return data
    return json.loads(data.decode("utf-8"))


def _legacy(codec: str, raw: bytes | str) -> Any:
    """A value stored before encryption: the column held it as text (SQLite keeps its storage
    class), UTF-8 bytes (PostgreSQL's converted column) or raw bytes (vectors)."""
    if codec == "bytes":
        return bytes(raw, "latin-1") if isinstance(raw, str) else bytes(raw)
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8")
    return text if codec == "text" else json.loads(text or "null")


# --- fields --------------------------------------------------------------------------------------
class SealedField(models.BinaryField):
    """A content field stored as AES-256-GCM ciphertext under its row's data key. `codec`: how
    the Python value becomes bytes (`text`: str, `bytes`, `json`)."""

    def __init__(self, *args: Any, codec: str = "text", **kwargs: Any):
        if codec not in ("text", "bytes", "json"):
            raise ValueError(f"unknown codec {codec!r}")
        self.codec = codec
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        kwargs["codec"] = self.codec
        return name, path, args, kwargs

    def check(self, **kwargs: Any) -> list:
        return models.Field.check(self, **kwargs)  # a str default is right for a text codec (BinaryField refuses one)

    def get_default(self) -> Any:
        return models.Field.get_default(self)  # BinaryField's would turn "" into b""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Sealed | None:
        if value is None:
            return None
        return Sealed(value if isinstance(value, str) else bytes(value))

    def pre_save(self, model_instance: models.Model, add: bool) -> Ciphertext | None:
        value = getattr(model_instance, self.attname)
        if value is None:
            return None
        if isinstance(value, Sealed):  # loaded and never opened (deferred opening): written back as it is
            return Ciphertext(value.raw.encode("utf-8") if isinstance(value.raw, str) else value.raw)
        key_id, cipher = row_cipher(model_instance)
        aad = field_aad(self.model._meta.db_table, owner_of(_key_holder(model_instance)), key_id, self.name)
        return Ciphertext(seal(cipher, _encode(self.codec, value), aad))

    def get_prep_value(self, value: Any) -> Any:
        if value is None or isinstance(value, Ciphertext):
            return value
        raise TypeError(
            f"{self.model.__name__}.{self.name} is sealed: it is written by saving its row, never by update() or "
            "compared in a filter"
        )

    def to_python(self, value: Any) -> Any:
        return value

    def get_lookup(self, lookup_name: str) -> Any:
        if lookup_name == "isnull":
            return super().get_lookup(lookup_name)
        raise FieldError(f"{self.model.__name__}.{self.name} is sealed: no lookup reaches its content (only isnull)")

    def get_transform(self, name: str) -> Any:
        raise FieldError(f"{self.model.__name__}.{self.name} is sealed: no lookup reaches its content (only isnull)")


class RowKeyField(models.UUIDField):
    """The id of the row's data key, chosen (and the key stored) before the row is inserted."""

    def pre_save(self, model_instance: models.Model, add: bool) -> UUID | None:
        if any(
            isinstance(getattr(model_instance, f.attname, None), (str, bytes, list, dict))
            for f in sealed_fields(type(model_instance))
        ):
            row_cipher(model_instance)
        return getattr(model_instance, self.attname)


_SEALED_FIELDS: dict[type[models.Model], list[SealedField]] = {}


def sealed_fields(model: type[models.Model]) -> list[SealedField]:
    fields = _SEALED_FIELDS.get(model)
    if fields is None:
        fields = _SEALED_FIELDS[model] = [f for f in model._meta.concrete_fields if isinstance(f, SealedField)]
    return fields


def _codecs(model: type[models.Model]) -> dict[str, str]:
    return {f.name: f.codec for f in sealed_fields(model)}


def owner_label(model: type[models.Model]) -> str:
    return model._meta.label_lower


def owner_labels(model: type[models.Model]) -> tuple[str, ...]:
    """Every owner the model's keys may be stored under: its label, then the labels it had before
    it moved to another app (`former_key_owners` on the model). A key store is not migrated with
    the app, so keys written before a move keep the old owner, and the keyring sweep must see them."""
    return (owner_label(model), *getattr(model, "former_key_owners", ()))


def _key_holder(instance: models.Model) -> models.Model:
    via = getattr(type(instance), "sealed_with", None)
    return getattr(instance, via) if via else instance


def owner_of(holder: models.Model) -> Owner:
    """The owner a key holder's sealed values are bound to: (workspace id, member id) as stored."""
    workspace_id, member_id = (getattr(holder, column) for column in OWNER_COLUMNS)
    return workspace_id, member_id


def row_cipher(instance: models.Model) -> tuple[UUID, DataKeyCipher]:
    """The row's key id and cipher, creating the key for a new row (one of the process's spare
    keys, already stored wrapped and committed: memoryapp.keyring.SpareKeys). A row sealed under
    another row's key (an embedding) asks that row."""
    holder = _key_holder(instance)
    cached = holder.__dict__.get("_sealing_cipher")
    if cached is not None:
        return cached
    if holder.key_id is None:
        if holder.pk is not None and holder is not instance:
            raise Unreadable(
                MISSING_KEY,
                f"{holder._meta.label} #{holder.pk} is stored unencrypted: run `manage.py encrypt_memories`",
            )
        holder.key_id, dek = new_row_key(owner_label(type(holder)))  # a spare, stored and committed in a batch
    else:
        dek = key_store().get_many([holder.key_id]).get(holder.key_id)
        if dek is None:
            raise Unreadable(MISSING_KEY, f"{holder._meta.label} #{holder.pk}: its data key is gone")
    holder._sealing_cipher = (holder.key_id, DataKeyCipher(dek))
    return holder._sealing_cipher


def prepare_keys(instances: Iterable[models.Model]) -> None:
    """Create the data keys of many new rows with one key-store write (before a bulk_create)."""
    fresh = [i for i in instances if i.key_id is None and "_sealing_cipher" not in i.__dict__]
    if not fresh:
        return
    keys = {}
    for instance in fresh:
        instance.key_id = uuid4()
        keys[instance.key_id] = new_data_key()
        instance._sealing_cipher = (instance.key_id, DataKeyCipher(keys[instance.key_id]))
    key_store().put(keys, owner=owner_label(type(fresh[0])))


def destroy_keys_on_commit(key_ids: list[UUID]) -> None:
    """Destroy these data keys once the current transaction commits (never if it rolls back: the
    rows they open are then still there). What a crash leaves is the keyring sweep's."""
    if key_ids:
        transaction.on_commit(lambda: key_store().delete_many(key_ids))


# --- opening ---------------------------------------------------------------------------------------
def fetch_keys(key_ids: Iterable[UUID | None]) -> dict[UUID, DataKeyCipher | None]:
    """The ciphers of these keys, in one key-store query (absent: destroyed; None: does not unwrap)."""
    wanted = [k for k in dict.fromkeys(key_ids) if k is not None]
    if not wanted:
        return {}
    return {
        key_id: (DataKeyCipher(dek) if dek is not None else None)
        for key_id, dek in key_store().get_many(wanted).items()
    }


def open_values(
    model: type[models.Model],
    key_id: UUID | None,
    owner: Owner,
    keys: Mapping[UUID, DataKeyCipher | None],
    values: Mapping[str, Any],
) -> dict[str, Any]:
    """Open some sealed columns of one row of `model` (as `values_list` or a raw cursor gave
    them) with the ciphers `fetch_keys` returned; `owner` is its key holder's (workspace id,
    member id) as stored (`owner_of`). Raises Unreadable."""
    names = tuple(values)
    opened = open_rows(model, [(key_id, owner, tuple(values.values()))], names, keys)[0]
    if isinstance(opened, Unreadable):
        raise opened
    return dict(zip(names, opened))


def open_rows(
    model: type[models.Model],
    rows: Iterable[tuple[UUID | None, Owner, Sequence[Any]]],
    names: Sequence[str],
    keys: Mapping[UUID, DataKeyCipher | None],
) -> list[tuple | Unreadable]:
    """`open_values` for many rows in one pass (recall's 300 index entries): each row is (key id,
    owner, its values of the sealed columns `names`, in that order); each answer is the opened
    values in the same order, or the Unreadable that row raised (returned, not raised: the
    caller leaves that row out and goes on). What is looked up per column (codec, the end of the
    associated data) is looked up once."""
    codecs = _codecs(model)
    columns = [(name, codecs[name], name.encode()) for name in names]
    table = model._meta.db_table
    answers: list[tuple | Unreadable] = []
    for key_id, owner, values in rows:
        if key_id is None:
            try:
                answers.append(_open_legacy(columns, values))
            except Unreadable as exc:
                answers.append(exc)
            continue
        cipher = keys.get(key_id, _ABSENT)
        if cipher is _ABSENT:
            answers.append(Unreadable(MISSING_KEY))
            continue
        if cipher is None:
            answers.append(Unreadable(BAD_KEY))
            continue
        prefix = aad_prefix(table, owner, key_id).encode()
        opened: list[Any] = []
        for (name, codec, suffix), raw in zip(columns, values):
            if isinstance(raw, Sealed):
                raw = raw.raw
            if raw is None:
                opened.append(None)
                continue
            data = raw if isinstance(raw, bytes) else raw.encode("latin-1") if isinstance(raw, str) else bytes(raw)
            try:
                opened.append(_decode(codec, open_sealed(cipher, data, prefix + suffix)))
            except (SealError, UnicodeDecodeError, ValueError) as exc:
                answers.append(Unreadable(CORRUPT, f"{name}: {exc}"))
                break
        else:
            answers.append(tuple(opened))
    return answers


def _open_legacy(columns: list[tuple[str, str, bytes]], values: Sequence[Any]) -> tuple:
    """The values of a row stored before encryption (`key_id` NULL). Raises Unreadable."""
    opened: list[Any] = []
    for (name, codec, _), raw in zip(columns, values):
        raw = raw.raw if isinstance(raw, Sealed) else raw
        if raw is None:
            opened.append(None)
            continue
        # A row stripped of its key id (a database writer's doing) holds ciphertext, not text:
        # hidden as corrupt, never decoded into a 500 nor shown as text.
        if codec != "bytes" and not isinstance(raw, str) and bytes(raw[:1]) == FORMAT and len(raw) >= OVERHEAD:
            raise Unreadable(CORRUPT, f"{name}: a sealed value on a row with no key id")
        try:
            opened.append(_legacy(codec, raw))
        except (UnicodeDecodeError, ValueError) as exc:
            raise Unreadable(CORRUPT, f"{name}: not a readable unencrypted value ({type(exc).__name__})") from None
    return tuple(opened)


def _holder_key_ids(instances: list[models.Model]) -> dict[int, tuple[UUID | None, Owner]]:
    """id(instance) -> the key id it is sealed under and the owner it is bound to; one query for
    embeddings whose memory version is not loaded with them."""
    found: dict[int, tuple[UUID | None, Owner]] = {}
    missing: dict[type[models.Model], dict[Any, list[models.Model]]] = {}
    for instance in instances:
        via = getattr(type(instance), "sealed_with", None)
        if via is None:
            found[id(instance)] = (instance.key_id, owner_of(instance))
            continue
        field = instance._meta.get_field(via)
        if field.is_cached(instance):
            holder = getattr(instance, via)
            found[id(instance)] = (holder.key_id, owner_of(holder))
        else:
            missing.setdefault(field.related_model, {}).setdefault(getattr(instance, field.attname), []).append(
                instance
            )
    for model, by_pk in missing.items():
        holders = {
            pk: (key_id, (workspace_id, member_id))
            for pk, key_id, workspace_id, member_id in model._base_manager.filter(pk__in=list(by_pk)).values_list(
                "pk", "key_id", *OWNER_COLUMNS
            )
        }
        for pk, waiting in by_pk.items():
            for instance in waiting:
                found[id(instance)] = holders.get(pk, (None, (None, None)))
    return found


def _walk(instances: Iterable[models.Model]) -> Iterator[models.Model]:
    """The instances and every related instance loaded with them (select_related)."""
    stack = list(instances)
    seen: set[int] = set()
    while stack:
        instance = stack.pop()
        if id(instance) in seen or instance is None:
            continue
        seen.add(id(instance))
        yield instance
        stack.extend(v for v in instance._state.fields_cache.values() if isinstance(v, models.Model))


def open_instances(
    instances: list[models.Model], *, keys: Mapping[UUID, DataKeyCipher | None] | None = None
) -> dict[int, str]:
    """Decrypt, in place, every sealed field loaded on these instances (and on the instances
    loaded with them); one key-store query for all of them. Returns id(instance) -> reason for
    the ones that could not be opened (their sealed fields are set to None)."""
    sealed = [
        i
        for i in _walk(instances)
        if sealed_fields(type(i)) and any(isinstance(i.__dict__.get(f.attname), Sealed) for f in sealed_fields(type(i)))
    ]
    if not sealed:
        return {}
    holder_keys = _holder_key_ids(sealed)
    known = dict(keys or {})
    wanted = [k for k, _ in holder_keys.values() if k is not None and k not in known]
    if wanted:
        known.update(fetch_keys(wanted))
    failed: dict[int, str] = {}
    counts: dict[tuple[type[models.Model], str], int] = {}
    for instance in sealed:
        model = type(instance)
        key_id, owner = holder_keys[id(instance)]
        pending = {
            f.name: instance.__dict__[f.attname]
            for f in sealed_fields(model)
            if isinstance(instance.__dict__.get(f.attname), Sealed)
        }
        try:
            opened = open_values(model, key_id, owner, known, pending)
        except Unreadable as exc:
            failed[id(instance)] = exc.reason
            counts[(model, exc.reason)] = counts.get((model, exc.reason), 0) + 1
            if exc.reason != MISSING_KEY:
                logger.error(
                    "sealed content does not open: %s",
                    exc,
                    extra={"model": model._meta.label, "row": instance.pk, "reason": exc.reason},
                )
            for name in pending:
                instance.__dict__[name] = None
            instance._sealing_unreadable = exc.reason
            continue
        instance.__dict__.update(opened)
        cipher = known.get(key_id) if key_id is not None else None
        if cipher is not None and getattr(model, "sealed_with", None) is None:
            instance._sealing_cipher = (key_id, cipher)
    for (model, reason), count in counts.items():
        content_unreadable.send(sender=model, reason=reason, count=count)
    return failed


def is_unreadable(instance: models.Model) -> bool:
    return bool(instance.__dict__.get("_sealing_unreadable"))


class SealedQuerySet(models.QuerySet):
    """Opens what it fetches (module docstring). `with_keys(ciphers)` reuses ciphers a caller
    already fetched (recall: the candidates' keys open the results too); `keep_unreadable()`
    keeps rows that do not open, flagged, instead of leaving them out."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._sealing_keys: Mapping[UUID, DataKeyCipher | None] | None = None
        self._keep_unreadable = False

    def _clone(self):
        clone = super()._clone()
        clone._sealing_keys = self._sealing_keys
        clone._keep_unreadable = self._keep_unreadable
        return clone

    def with_keys(self, keys: Mapping[UUID, DataKeyCipher | None]) -> SealedQuerySet:
        clone = self._chain()
        clone._sealing_keys = keys
        return clone

    def keep_unreadable(self) -> SealedQuerySet:
        clone = self._chain()
        clone._keep_unreadable = True
        return clone

    def only(self, *fields: str) -> SealedQuerySet:
        """`only()` naming a sealed field loads the row's key id and owner with it (opening needs them)."""
        sealed = {f.name for f in sealed_fields(self.model)}
        if sealed & set(fields) and any(isinstance(f, RowKeyField) for f in self.model._meta.concrete_fields):
            fields = (*fields, "key_id", *(column.removesuffix("_id") for column in OWNER_COLUMNS))
        return super().only(*fields)

    def _open(self, rows: list[models.Model]) -> list[models.Model]:
        failed = open_instances(rows, keys=self._sealing_keys)
        if not failed or self._keep_unreadable:
            return rows
        return [row for row in rows if id(row) not in failed]

    def _fetch_all(self) -> None:
        if self._result_cache is None and issubclass(self._iterable_class, ModelIterable):
            super()._fetch_all()
            self._result_cache = self._open(self._result_cache)
            return
        super()._fetch_all()

    def _iterator(self, use_chunked_fetch: bool, chunk_size: int | None):
        rows = super()._iterator(use_chunked_fetch, chunk_size)
        if not issubclass(self._iterable_class, ModelIterable):
            yield from rows
            return
        size = chunk_size or 2000
        while batch := list(islice(rows, size)):
            yield from self._open(batch)


SealedManager = models.Manager.from_queryset(SealedQuerySet)


# --- the migration that turned content columns into sealed ones ---------------------------------
class SealColumn(migrations.AlterField):
    """AlterField to a SealedField that keeps the rows already stored: PostgreSQL converts the
    text (or jsonb) column to bytea as UTF-8 (`convert_to`; a plain cast would read backslashes as
    escapes), SQLite copies the values as they are. They stay readable as legacy plaintext until
    `encrypt_memories` seals them. Backwards works only for rows not sealed yet."""

    def __init__(self, *args: Any, json: bool = False, **kwargs: Any):
        self.json = json
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, args, kwargs = super().deconstruct()
        if self.json:
            kwargs["json"] = True
        return name, args, kwargs

    def _convert(self, app_label: str, schema_editor: Any, state: Any, to_type: str) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        model = state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        table, column = (
            schema_editor.quote_name(model._meta.db_table),
            schema_editor.quote_name(model._meta.get_field(self.name).column),
        )
        if to_type == "bytea":
            using = f"convert_to({column}::text, 'UTF8')" if self.json else f"convert_to({column}, 'UTF8')"
        else:
            using = f"convert_from({column}, 'UTF8')::{to_type}"
        schema_editor.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {to_type} USING {using}")

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._convert(app_label, schema_editor, from_state, "bytea")
        super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._convert(app_label, schema_editor, from_state, "jsonb" if self.json else "text")
        # AlterField's backwards is its forwards with the states swapped: not this class's forwards.
        migrations.AlterField.database_forwards(self, app_label, schema_editor, from_state, to_state)
