"""The memory allocator of the PyTorch measuring processes.

Why it matters: torch allocates every intermediate tensor on each forward call. Under glibc's
malloc a tensor above the mmap threshold gets fresh pages from the kernel and gives them back
when freed, so every run takes page faults, and the kernel's time zeroing pages becomes a large
share of a run (datasets/host-xeon-v1/CHANGES.md has what it was). What a fault costs is the
machine's (a VM's memory, its neighbours), not the network's, and it wanders. Turning glibc's mmap and trimming off
(``mallopt``) is not enough: its heap then fragments, grows by a tensor every few runs and still
faults on many of them. jemalloc in its default configuration is no better: it returns freed
pages to the kernel gradually (``dirty_decay_ms``, a smooth curve starting at once) and serves
blocks above 8 MiB from an arena that returns them at once, so a run faults on them again (a
network with a large feature map faults as under glibc). With decay off (:data:`MALLOC_CONF`)
freed pages stay mapped and the next run reuses them: a handful of faults a run. That is the
steady state a serving process reaches, and
what LiteRT, which plans one arena, has on every run.

The torch zygote (:mod:`.torch_zygote`) starts with jemalloc preloaded (``LD_PRELOAD``, from
the Debian package libjemalloc2 that scripts/debian-packages.txt installs) and
:data:`MALLOC_CONF`; every worker it forks inherits both. The worker names the allocator and its
decay settings in ``meta.allocator`` (:func:`in_use`) and counts the timed runs' faults
(``end.page_faults_per_run``).
"""
from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path
from typing import Any

LIBRARY = "libjemalloc.so.2"
# where Debian (any architecture) and a source build put it; ldconfig's cache is asked first
SEARCH = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/usr/local/lib")
# never give freed pages back: a measuring process lives seconds, and every page returned is a
# fault in a later run (the module docstring); the protocol's, so it replaces any MALLOC_CONF
MALLOC_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1"


def jemalloc_path() -> str | None:
    """The jemalloc shared library on this machine, or None."""
    name = ctypes.util.find_library("jemalloc")
    for cand in ([name] if name and name.startswith("/") else []) + [str(Path(d) / LIBRARY) for d in SEARCH]:
        if Path(cand).is_file():
            return cand
    return None


def preload(env: dict[str, str]) -> str | None:
    """Puts jemalloc first in ``env``'s ``LD_PRELOAD`` with :data:`MALLOC_CONF`; returns its
    path, or None where the machine has none (the processes then run on glibc's malloc, and
    say so)."""
    path = jemalloc_path()
    if path is None:
        return None
    others = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split() if p != path]
    env["LD_PRELOAD"] = " ".join([path, *others])
    env["MALLOC_CONF"] = MALLOC_CONF
    return path


def in_use() -> dict[str, Any]:
    """The allocator this process's ``malloc`` is: ``{"name": "jemalloc", "version",
    "dirty_decay_ms", "muzzy_decay_ms"}`` (-1: freed pages are never returned) when
    jemalloc's ``mallctl`` is in the global symbol scope (preloaded or linked, so its malloc is
    the one called; a library that merely loaded it would not put it there), else glibc's
    malloc with the C library's version."""
    proc = ctypes.CDLL(None)
    try:
        mallctl = proc.mallctl
    except AttributeError:
        mallctl = None
    if mallctl is not None:
        def read(name: str, ctype: Any) -> Any:
            value = ctype()
            size = ctypes.c_size_t(ctypes.sizeof(value))
            ok = mallctl(name.encode(), ctypes.byref(value), ctypes.byref(size), None, ctypes.c_size_t(0)) == 0
            return value.value if ok else None

        version = read("version", ctypes.c_char_p)
        return {"name": "jemalloc", "version": version.decode() if version else "unknown",
                "dirty_decay_ms": read("opt.dirty_decay_ms", ctypes.c_ssize_t),
                "muzzy_decay_ms": read("opt.muzzy_decay_ms", ctypes.c_ssize_t)}
    try:
        proc.gnu_get_libc_version.restype = ctypes.c_char_p
        return {"name": "glibc", "version": proc.gnu_get_libc_version().decode()}
    except AttributeError:
        return {"name": "unknown"}
