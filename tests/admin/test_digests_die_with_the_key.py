"""The digest the admin shows dies with the memory's data key (issue 24 step 1, SPEC §8.2).

`MemoryVersion.text_hmac` is HMAC-SHA256 of the masked text under a key HKDF derives from the
version's own data key (info `gam/v1|text_hmac`), computed when the text is sealed. A backup taken
before an erase keeps the digest (and `text_length`), but once the data key is destroyed no key
anywhere — not `CONTENT_DIGEST_KEY`, not the KEK, not any other data key — confirms a guess.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from governance import content
from memoryapp import keyring
from memoryapp.keyring import DataKey, key_store
from memoryapp.models import MemoryEmbedding, MemoryVersion
from tests.admin.support import browser, exported_digests
from tests.support import make_agent

TEXT = "Prefers the aisle seat on the early train"


def digest_under(dek: bytes, text: str) -> str:
    """What the issue names: HMAC under a key derived from the data key (HKDF, `gam/v1|text_hmac`)."""
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"gam/v1|text_hmac").derive(dek)
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def remember(agent, text: str, **extra) -> int:
    response = agent.remember(namespace="notes", text=text, **extra)
    assert response.status_code == 201, response.json()
    return int(response.json()["memory"]["id"])


def dek_of(version: MemoryVersion) -> bytes:
    return key_store().get_many([version.key_id])[version.key_id]


def test_the_shown_digest_is_keyed_by_the_versions_own_data_key(world):
    version = MemoryVersion.objects.get(pk=remember(make_agent(world.editor), TEXT))
    assert version.text_hmac == digest_under(dek_of(version), TEXT)
    assert version.text_hmac != content.member_digest(TEXT, workspace_id=world.workspace.pk, member_id=world.editor.pk)


def test_equal_texts_of_two_members_and_of_two_versions_show_different_digests(world, staff):
    editor, owner = make_agent(world.editor), make_agent(world.owner)
    ids = [
        remember(editor, TEXT, key="seat"),
        remember(editor, TEXT, key="seat"),
        remember(editor, TEXT),
        remember(owner, TEXT, key="seat"),
    ]
    versions = list(MemoryVersion.objects.filter(pk__in=ids))
    assert len(versions) == 4 and {v.text for v in versions} == {TEXT}
    assert len({v.text_hmac for v in versions}) == 4
    shown = exported_digests(browser(staff.auditor))
    assert len({shown[pk] for pk in ids}) == 4 and {shown[pk] for pk in ids} == {v.text_hmac for v in versions}


def test_after_the_erase_no_key_in_the_process_reproduces_a_kept_copy_of_the_digest(world):
    agent = make_agent(world.editor)
    pk = remember(agent, TEXT)
    kept = MemoryVersion.objects.values("text_hmac", "text_length", "key_id", "workspace_id", "member_id").get(
        pk=pk
    )  # the pre-erase backup
    assert agent.forget(memoryId=str(pk)).status_code == 200
    assert not MemoryVersion.objects.filter(pk=pk).exists() and key_store().present([kept["key_id"]]) == set()
    guess = TEXT  # the attacker's right guess, of the right length
    assert len(guess) == kept["text_length"]
    keks = keyring.key_encryption_keys()
    candidates = [
        digest_under(dek, guess)
        for dek in key_store().get_many(DataKey.objects.values_list("key_id", flat=True)).values()
        if dek is not None  # every data key still in the key store
    ]
    server_keys = [
        base64.b64decode(settings.CONTENT_DIGEST_KEY),
        settings.SECRET_KEY.encode(),
        keks.current,
        *keks.retired,
    ]
    candidates += [hmac.new(key, guess.encode(), hashlib.sha256).hexdigest() for key in server_keys]
    candidates += [digest_under(key, guess) for key in server_keys]
    for scope in (
        f"workspace/{kept['workspace_id']}/member/{kept['member_id']}",
        f"workspace/{kept['workspace_id']}",
        "",
    ):
        candidates.append(content.keyed_digest(guess, scope))
    candidates += [hashlib.sha256(guess.encode()).hexdigest(), hashlib.sha256(guess.encode()).hexdigest()[:64]]
    assert kept["text_hmac"] and kept["text_hmac"] not in candidates


def plant_legacy(world, text: str) -> int:
    """A version stored the way it was before encryption: plaintext columns, no key id, the
    digest as 0007 computed it (under CONTENT_DIGEST_KEY)."""
    version = MemoryVersion.objects.create(
        workspace=world.workspace, member=world.editor, namespace="notes", text="placeholder"
    )
    old_digest = content.member_digest(text, workspace_id=world.workspace.pk, member_id=world.editor.pk)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memoryapp_memoryversion SET key_id = NULL, text = %s, details = %s, kind = %s, text_hmac = %s "
            "WHERE id = %s",
            [text.encode(), b"", b"fact", old_digest, version.pk],
        )
        cursor.execute(
            "INSERT INTO memoryapp_memoryembedding (memory_id, embedder_id, dim, vector, terms, terms_format) VALUES "
            "(%s, %s, %s, %s, %s, %s)",
            [version.pk, "hashing", 1, b"\0\0\x80?", text.encode(), "t1"],
        )
    key_store().delete_many([version.key_id])
    return version.pk


def test_encrypt_memories_computes_the_digest_under_the_new_data_key_once(world):
    pks = [plant_legacy(world, f"{TEXT} {i}") for i in range(4)]
    call_command("encrypt_memories", "--json", "--chunk", "3", stdout=open_null())
    sealed = {v.pk: v for v in MemoryVersion.objects.filter(pk__in=pks)}
    for i, pk in enumerate(pks):
        assert sealed[pk].text_hmac == digest_under(dek_of(sealed[pk]), f"{TEXT} {i}")
    assert MemoryEmbedding.objects.get(memory_id=pks[0]).terms == f"{TEXT} 0"
    call_command("encrypt_memories", "--json", stdout=open_null())
    assert {v.pk: (v.key_id, v.text_hmac) for v in MemoryVersion.objects.filter(pk__in=pks)} == {
        pk: (v.key_id, v.text_hmac) for pk, v in sealed.items()
    }


def open_null():
    import io

    return io.StringIO()
