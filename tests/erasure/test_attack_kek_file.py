"""Attack on zeroing the replaced versions of the key file (ee94d58), on `FileKeks` alone (no
database): readers racing rotations, and a key file the operator links to from elsewhere.

A rewrite zeroes the inode it replaced. When that inode still has another name (a backup the
operator hard-linked to the key file, as rsnapshot or `cp -al` do, or the target of a key file that
is a symlink), the zeros land in the operator's copy: the backup of the KEK that every data key is
still wrapped by at `begin_rotation` reads as zeros afterwards."""

from __future__ import annotations

import os
import threading
from base64 import b64encode

from memoryapp.kek import FileKeks, KekUnavailable, kek_id, read_key_file


def _source(path):
    return FileKeks(path, may_create=lambda: True)


def test_readers_racing_rotations_always_read_a_kek_of_the_file(tmp_path):
    path = tmp_path / "memory_kek"
    writer = _source(path)
    writer.keys()
    seen_ids: set[str] = {kek_id(k) for k in read_key_file(path)}
    failures: list[str] = []
    stop = threading.Event()

    def read():
        source = _source(path)
        while not stop.is_set():
            try:
                held = read_key_file(path)
                current = source.keys().current_id
            except KekUnavailable as error:
                failures.append(f"KekUnavailable: {error}")
                continue
            if not held:
                failures.append("no key read")
            elif current not in seen_ids | {kek_id(k) for k in read_key_file(path)}:
                failures.append(f"unknown KEK {current}")

    readers = [threading.Thread(target=read) for _ in range(4)]
    for reader in readers:
        reader.start()
    try:
        for _ in range(150):  # about as many rotations as reads (the file is tiny)
            assert writer.begin_rotation()
            seen_ids |= {kek_id(k) for k in read_key_file(path)}
            writer.retire_unneeded(set())
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert not failures, (len(failures), failures[:3])


def test_a_backup_hard_linked_to_the_key_file_keeps_its_kek(tmp_path):
    path = tmp_path / "memory_kek"
    source = _source(path)
    old = source.keys().current
    backup = tmp_path / "backup"
    backup.mkdir()
    os.link(path, backup / "memory_kek")
    assert source.begin_rotation()
    assert b64encode(old) in (backup / "memory_kek").read_bytes(), "the operator's backup was zeroed"


def test_the_target_of_a_key_file_symlink_keeps_its_kek(tmp_path):
    secure = tmp_path / "secure"
    secure.mkdir()
    target = secure / "memory_kek"
    path = tmp_path / "memory_kek"
    _source(target).keys()
    old = read_key_file(target)[0]
    path.symlink_to(target)
    source = _source(path)
    assert source.keys().current == old
    assert source.begin_rotation()
    assert old in read_key_file(path)  # the rotation keeps the old KEK as retired
    assert b64encode(old) in target.read_bytes(), "the symlink's target was zeroed"


def test_a_crash_while_creating_the_file_does_not_cost_the_current_kek(tmp_path, monkeypatch):
    """`_create_first` hard-links its temporary into place, then unlinks the temporary. A crash
    between the two leaves `.memory_kek.<pid>.<hex>` as a second name of the live key file; the
    next rotation's `_remove_stale_temporaries` zeroes it (`destroy_file`), and with it the only KEK."""
    from memoryapp import kek

    path = tmp_path / "memory_kek"
    source = _source(path)
    current = source.keys().current
    os.link(path, tmp_path / ".memory_kek.4194303.0badc0de")  # what the crashed process left
    monkeypatch.setattr(kek, "_alive", lambda pid: False)
    _source(path).begin_rotation()
    assert current in read_key_file(path)
