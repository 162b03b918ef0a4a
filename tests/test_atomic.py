"""foundation.atomic: a file is written whole or not at all, whoever else writes it."""
from __future__ import annotations

import threading

import pytest

from foundation.atomic import atomic_path, write_bytes, write_text


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


def test_a_killed_writers_temporary_is_removed_and_a_live_ones_kept(tmp_path):
    # SIGKILL mid-write runs no clean-up: the temporary stays until a resumed stage removes it
    import os
    import signal
    import subprocess
    import sys

    from foundation.atomic import remove_orphans, temporary_beside

    target = tmp_path / "sub" / "model.tflite"
    code = ("import sys, time; from pathlib import Path; from foundation.atomic import atomic_path\n"
            "with atomic_path(Path(sys.argv[1])) as tmp:\n"
            "    tmp.write_bytes(b'x' * 1000); print(tmp, flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True)
    orphan = tmp_path / "sub" / proc.stdout.readline().strip().rsplit("/", 1)[1]
    assert orphan.is_file()
    assert remove_orphans(tmp_path) == 0 and orphan.is_file()  # its writer still runs
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    live = temporary_beside(target)  # this process's own write in progress
    live.write_text("")
    other = tmp_path / "sub" / ".notes.tmp"  # not named by atomic_path: not ours to judge
    other.write_text("")
    assert remove_orphans(tmp_path) == 1
    assert not orphan.exists() and live.exists() and other.exists() and not target.exists()
