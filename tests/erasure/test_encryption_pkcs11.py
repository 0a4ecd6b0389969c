"""The encryption suite (tests/erasure/test_encryption.py) again, with the KEK in a PKCS#11 token
(SoftHSM2, KEK_BACKEND=pkcs11): sealing, moved and corrupted ciphertexts, erase, the sweep, crashes
between the two databases — every data key wrapped and unwrapped inside the token.

Left out, because they are about the key file and MEMORY_KEK themselves: the two tests that
configure MEMORY_KEK (with a token it is refused at settings load; tests/erasure/test_pkcs11.py
covers the token's own rotation and a KEK missing from it).
"""

from __future__ import annotations

import pytest

from tests.erasure import test_encryption as suite

FILE_KEK_ONLY = {
    "test_a_key_encryption_key_missing_from_the_configuration_hides_rows_and_never_500s",
    "test_rotating_the_kek_rewraps_every_key_and_readers_see_no_change",
}

for _name in dir(suite):
    if _name.startswith("test_") and _name not in FILE_KEK_ONLY:
        globals()[_name] = getattr(suite, _name)


@pytest.fixture(autouse=True)
def _kek_in_the_token(request, settings):
    """KEK_BACKEND=pkcs11 for every test that reaches the database (the others need no KEK)."""
    if "world" in request.fixturenames or "db" in request.fixturenames or request.node.get_closest_marker("django_db"):
        request.getfixturevalue("token_kek")
        from memoryapp import kek_backends, keyring

        assert isinstance(keyring.kek_source(), kek_backends.Pkcs11Keks)
    yield
