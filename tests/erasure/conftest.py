"""The KEK in a file of each test's own (`key_file`), and a PKCS#11 token for the KEK backend's
tests (issue 33): SoftHSM2, started by the tests themselves.

One token per test process (SoftHSM2 reads SOFTHSM2_CONF once, when the library is initialised),
in a temporary directory; every test gets KEK objects of its own (a label prefix of its own), so
tests never see each other's keys although the token outlives their database transactions.
SoftHSM2 missing is a failure, never a skip: `.ci/run` installs it (`apt-get install softhsm2`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from memoryapp import keyring

MODULES = (
    "/usr/lib/softhsm/libsofthsm2.so",
    "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/local/lib/softhsm/libsofthsm2.so",
)


@dataclass(frozen=True)
class SoftHsm:
    module: str
    label: str
    pin: str
    so_pin: str
    directory: Path


@pytest.fixture(scope="session")
def softhsm(tmp_path_factory) -> SoftHsm:
    util = shutil.which("softhsm2-util")
    module = next((m for m in MODULES if Path(m).is_file()), None)
    if util is None or module is None:
        pytest.fail(
            "SoftHSM2 is not installed (apt-get install softhsm2; .ci/run does): the PKCS#11 KEK backend must be tested"
        )
    directory = tmp_path_factory.mktemp("softhsm")
    (directory / "tokens").mkdir()
    conf = directory / "softhsm2.conf"
    conf.write_text(
        f"directories.tokendir = {directory / 'tokens'}\nobjectstore.backend = file\nlog.level = "
        "ERROR\nslots.removable = false\n"
    )
    os.environ["SOFTHSM2_CONF"] = str(conf)  # before the library's first C_Initialize in this process
    hsm = SoftHsm(
        module=module,
        label=f"gam-test-{secrets.token_hex(3)}",
        pin=secrets.token_hex(8),
        so_pin=secrets.token_hex(8),
        directory=directory,
    )
    subprocess.run(
        [util, "--init-token", "--free", "--label", hsm.label, "--so-pin", hsm.so_pin, "--pin", hsm.pin],
        check=True,
        capture_output=True,
    )
    return hsm


@pytest.fixture
def token_kek(settings, softhsm, tmp_path) -> SoftHsm:
    """KEK_BACKEND=pkcs11 against the test token, with KEK objects of this test's own."""
    from core import backends

    settings.KEK_BACKEND = "pkcs11"
    settings.PKCS11_MODULE, settings.PKCS11_TOKEN_LABEL = softhsm.module, softhsm.label
    settings.PKCS11_PIN, settings.PKCS11_PIN_FILE = softhsm.pin, ""
    settings.PKCS11_KEY_LABEL = f"t{secrets.token_hex(6)}"
    settings.MEMORY_KEK, settings.RETIRED_KEKS, settings.MEMORY_KEK_FILE = "", [], tmp_path / "memory_kek"
    backends.forget("KEK_BACKEND")
    keyring.spare_keys().clear()
    yield softhsm
    backends.forget("KEK_BACKEND")
    keyring.spare_keys().clear()


@pytest.fixture
def key_file(settings, tmp_path) -> Path:
    """The embedded default's KEK, in a file of this test's own (MEMORY_KEK unset)."""
    from core import backends

    settings.MEMORY_KEK, settings.RETIRED_KEKS, settings.MEMORY_KEK_FILE = "", [], tmp_path / "memory_kek"
    backends.forget("KEK_BACKEND")
    yield settings.MEMORY_KEK_FILE
    backends.forget("KEK_BACKEND")
