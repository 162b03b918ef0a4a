"""Writing a file whole or not at all.

Every stage of the suite is resumable, and several of them run in parallel (export workers,
twin leaderboard tracks in one Hydra multirun, a farm's hosts): a reader, a rerun after a kill
or another writer of the same file must see the old file or the complete new one, never a part
of either. Each write therefore goes to a temporary file beside the target, which then replaces
it in one rename (POSIX ``rename`` is atomic within a file system).

The temporary name is hidden and unique to the write (process, thread and a counter), so two
writers of one target never share (and truncate) one temporary file; the last rename wins,
whole. A write that fails leaves no temporary file behind; a process killed mid-write
(SIGKILL runs no clean-up) does, and a resumable stage removes such orphans of dead writers
from the folder it writes before it starts (:func:`remove_orphans`).

This module is the one place that does it; it sits in the lowest package (``generators``) so
that every layer above can use it. It imports nothing but the standard library.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import threading
from pathlib import Path
from typing import Iterator


_WRITES = itertools.count()  # next() is atomic under the GIL: no two writes of a process share a number


def temporary_beside(path: Path) -> Path:
    """A fresh temporary file for a write of ``path``: hidden, in the same folder (so the rename
    stays within one file system), named after this process, thread and write."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{next(_WRITES)}.tmp")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path to write ``path``'s new content to; on a clean exit it replaces
    ``path``, on an error it is deleted and ``path`` stays as it was. The folder is created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_beside(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _writer(tmp: Path) -> int | None:
    """The process id in a temporary's name (``.<name>.<pid>.<thread>.<n>.tmp``), or None for
    a file not named by :func:`temporary_beside`."""
    parts = tmp.name[:-len(".tmp")].rsplit(".", 3)
    if len(parts) != 4 or not all(p.isdigit() for p in parts[1:]):
        return None
    return int(parts[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def remove_orphans(folder: str | os.PathLike[str]) -> int:
    """Delete the temporary files under ``folder`` whose writing process is gone (killed
    mid-write); a live writer's are left alone. Returns how many were deleted."""
    n = 0
    for tmp in Path(folder).rglob(".*.tmp"):
        pid = _writer(tmp)
        if pid is not None and not _alive(pid):
            tmp.unlink(missing_ok=True)
            n += 1
    return n


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; return the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; return the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)
