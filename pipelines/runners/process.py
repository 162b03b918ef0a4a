"""What the runners' measuring processes share, whichever program they run (``latbench-run``,
:mod:`.litert`; the torch worker, :mod:`.torch`): the CPU list on their command line, the
NativeRun of the files a process left, and the kind and message of a process that failed.

Standard library only: the torch worker imports its package's modules before torch loads.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from .records import EXIT_KINDS, NativeRun


def cpus_arg(cpus: str | Iterable[int] | None) -> str | None:
    """The ``--cpus`` value (``0,2,3``) of a CPU list, or a list already written out; None: no pinning."""
    if cpus is None:
        return None
    if isinstance(cpus, str):
        return cpus
    return ",".join(str(int(c)) for c in cpus)


def native_run(records: list[dict[str, Any]], records_path: str | os.PathLike | None,
               trace_path: str | os.PathLike | None, argv: list[str]) -> NativeRun:
    """The NativeRun of a finished process: its records, and where it left them and its trace
    (None: not kept)."""
    return NativeRun(records=records, records_path=Path(records_path) if records_path is not None else None,
                     trace_path=Path(trace_path) if trace_path is not None else None, argv=argv)


def exit_failure(returncode: int, program: str, msg: str) -> tuple[str, str]:
    """(kind, message) of a process of ``program`` that failed with ``returncode``, given its
    own last error line ``msg`` (may be empty): killed by a signal is ``crashed``; an exit code
    is classified by EXIT_KINDS (else ``runtime``)."""
    if returncode < 0:
        return "crashed", f"{program} was killed by signal {-returncode}" + (f" ({msg})" if msg else "")
    return EXIT_KINDS.get(returncode, "runtime"), msg or f"{program} failed with exit code {returncode}"
