"""The key file's retired KEK must not outlive the rotation that destroyed it (issue 33 Build 1).

docs/encryption.md says the file backend's "retired KEK is overwritten and unlinked". Every rewrite
of `var/memory_kek` is a temporary file renamed over it (`FileKeks._replace`), so the inode
that held the old KEK (first as current, then as retired) must be zeroed, not only unlinked: its
blocks would keep the key in the clear on any file system until something reuses them, and
someone holding the disk would hold the KEK that residualUntil declares destroyed.

The test holds a descriptor on each version of the file (as a freed block holds its bytes) and
reads it after the rotation: the retired KEK must not be there. (A process that opened a version
just before its rename and reads zeros reads the path again, `read_key_file`.)
"""

from __future__ import annotations

from base64 import b64encode

import pytest

from memoryapp import encryption, keyring
from memoryapp.kek import kek_id
from tests.erasure.support import remember_some, restart

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_rotation_leaves_the_retired_kek_in_no_version_of_the_key_file(world, key_file, settings):
    remember_some(world, 1)
    old = keyring.key_encryption_keys().current
    # Each handle is held open across the rotation (closed below): this one sees the file as it was,
    # the old KEK as current.
    held = [open(key_file, "rb")]  # noqa: SIM115
    rotation = encryption.KekRotation(settle=0)
    assert rotation.begin() >= 1
    restart()
    held.append(open(key_file, "rb"))  # noqa: SIM115 during the rotation: new current, old retired
    assert sum(rotation.rewrap()) >= 1  # the remembered memory's key, re-wrapped
    result = rotation.finish()
    assert result.retirement.destroyed == [kek_id(old)] and result.left == 0
    restart()
    assert b64encode(old) not in key_file.read_bytes()  # the live file: fine on main
    try:
        for number, handle in enumerate(held):
            handle.seek(0)
            assert b64encode(old) not in handle.read(), f"version {number} of the key file still holds the retired KEK"
    finally:
        for handle in held:
            handle.close()
