"""Attack on the kept demo token (seed_demo, VAR_DIR/demo-agent-token, merged in 5077f25).

The file is written mode 600, but a run that *keeps* the token never looks at the file again: a
copy restored from a backup, a `cp` under umask 022, or a file replaced by a symlink to a
world-readable place keeps handing out a live read+write token to every local user. The next run
must leave the kept token in a regular file readable by this user only."""

from __future__ import annotations

import io
import json
import os

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def _seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", "--json", stdout=out)
    return json.loads(out.getvalue())["agentToken"]


@pytest.mark.parametrize("how", ["world-readable", "symlink"])
def test_a_kept_token_file_left_readable_by_others_is_tightened(db, settings, tmp_path, how):
    settings.MEMORY_EMBEDDER = "hashing"
    settings.VAR_DIR = tmp_path
    kept = tmp_path / "demo-agent-token"
    token = _seed()
    if how == "world-readable":
        os.chmod(kept, 0o644)
    else:
        public = tmp_path / "public-copy"
        public.write_text(token + "\n")
        os.chmod(public, 0o644)
        kept.unlink()
        kept.symlink_to(public)
    assert _seed() == token  # still kept: the builder's exported GAM_TOKEN keeps working
    assert not kept.is_symlink() and kept.stat().st_mode & 0o777 == 0o600
