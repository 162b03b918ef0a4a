"""generators.atomic: a file is written whole or not at all, whoever else writes it."""
from __future__ import annotations

import threading

import pytest

from generators.atomic import atomic_path, write_bytes, write_text


def test_writes_the_file_and_its_folder_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "a" / "b" / "out.json"
    assert write_text(target, "{}\n") == target
    assert target.read_text() == "{}\n"
    assert write_bytes(target, b"\x00\x01") == target
    assert target.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(tmp_path):
    target = tmp_path / "table.csv"
    target.write_text("old\n")
    with pytest.raises(RuntimeError, match="disk"):
        with atomic_path(target) as tmp:
            tmp.write_text("half of the new")
            raise RuntimeError("disk full")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


def test_the_temporary_is_hidden_beside_the_target(tmp_path):
    target = tmp_path / "x.parquet"
    with atomic_path(target) as tmp:
        assert tmp.parent == target.parent and tmp.name.startswith(".x.parquet.") and tmp.suffix == ".tmp"
        tmp.write_text("")


def test_two_writes_of_one_target_never_share_a_temporary(tmp_path):
    # A fixed temporary name (``out.tmp``) would let the second writer truncate the first's
    # file: the first rename would then publish the second's content, or find nothing to rename.
    target = tmp_path / "out.txt"
    with atomic_path(target) as first:
        first.write_text("A" * 1000)
        with atomic_path(target) as second:
            assert second != first
            second.write_text("B" * 10)
        assert target.read_text() == "B" * 10
    assert target.read_text() == "A" * 1000


def test_threads_writing_one_target_leave_one_whole_version(tmp_path):
    target = tmp_path / "fold.bin"
    payloads = [bytes([i]) * 200_000 for i in range(8)]
    errors: list[BaseException] = []

    def write(data: bytes) -> None:
        try:
            for _ in range(20):
                write_bytes(target, data)
        except BaseException as e:  # noqa: BLE001 (reported by the assertion below)
            errors.append(e)

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert target.read_bytes() in payloads
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fold.bin"]
