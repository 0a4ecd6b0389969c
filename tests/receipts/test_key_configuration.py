"""The receipt keys as an operator configures them (docs/receipts.md): `RECEIPT_SIGNING_KEY` and
each of `RECEIPT_VERIFY_KEYS` as base64 of the raw 32 bytes or as a PEM; anything else refuses to
load with a message naming the setting and what is wrong, never a key read from half a value."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.core.exceptions import ImproperlyConfigured

from retention import receipt_keys


def _raw(key) -> bytes:
    if isinstance(key, Ed25519PrivateKey):
        return key.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@pytest.mark.parametrize("private", [True, False])
def test_raw_base64_and_pem_keys_load_as_themselves(private):
    secret = Ed25519PrivateKey.generate()
    key = secret if private else secret.public_key()
    pem = (
        secret.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        if private
        else secret.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    ).decode()
    for text in (base64.b64encode(_raw(key)).decode(), f"  {pem}\n"):
        loaded = receipt_keys._decode_key(text, private=private)
        assert isinstance(loaded, Ed25519PrivateKey if private else Ed25519PublicKey)
        assert _raw(loaded) == _raw(key)


@pytest.mark.parametrize(("private", "setting"), [(True, "RECEIPT_SIGNING_KEY"), (False, "RECEIPT_VERIFY_KEYS")])
def test_a_value_with_characters_outside_base64_is_refused_not_read_around(private, setting):
    key = Ed25519PrivateKey.generate()
    raw = base64.b64encode(_raw(key if private else key.public_key())).decode()
    for bad in (raw[:10] + "!" + raw[10:], raw[:20] + " " + raw[20:], "not a key"):
        with pytest.raises(ImproperlyConfigured) as refused:
            receipt_keys._decode_key(bad, private=private)
        assert str(refused.value).startswith(f"{setting}: not a base64 raw 32-byte Ed25519 key nor a PEM (")


@pytest.mark.parametrize(("private", "setting"), [(True, "RECEIPT_SIGNING_KEY"), (False, "RECEIPT_VERIFY_KEYS")])
def test_a_pem_of_another_algorithm_is_refused_with_its_type(private, setting):
    other = ec.generate_private_key(ec.SECP256R1())
    pem = (
        other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        if private
        else other.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    ).decode()
    loaded = (
        serialization.load_pem_private_key(pem.encode(), password=None)
        if private
        else serialization.load_pem_public_key(pem.encode())
    )
    kind = type(loaded).__name__  # the class's own name (ECPrivateKey in cryptography's Rust core)
    with pytest.raises(ImproperlyConfigured) as refused:
        receipt_keys._decode_key(pem, private=private)
    assert str(refused.value) == f"{setting}: the PEM holds a {kind}, not an Ed25519 key"


def test_the_public_keys_document_names_its_canonical_form(settings):
    document = receipt_keys.public_keys_json()
    assert document["canonicalForm"] == "docs/receipts.md"
    assert document["currentKeyId"] == document["keys"][0]["keyId"]
