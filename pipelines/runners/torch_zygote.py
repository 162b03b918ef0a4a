"""The PyTorch runner's processes: forks of the torch zygote (:mod:`.zygote`), one process that
imports torch once, so a PyTorch measurement does not pay torch's import (most of a process's
wall time, three to five processes a pair; ``benchmarks/bench_torch_zygote.py`` prints the
saving) in every process.

Importing torch makes one thread: numpy's OpenBLAS starts its pool when it loads (torch imports
numpy), a pool torch never computes with (its BLAS and convolutions are MKL's and oneDNN's, on
torch's own intra-op pool). The zygote runs with ``OPENBLAS_NUM_THREADS=1`` (no such pool), so
each child starts with one thread, pins itself, and only then lets torch build its pool. (A
worker run by hand without that setting keeps the idle OpenBLAS thread: a pinned ``library``
thread, not counted as compute.)

The zygote starts with jemalloc preloaded (``LD_PRELOAD``; :mod:`.allocator` says why), so every
worker it forks runs on it; where the machine has no jemalloc the client warns once and the
records name glibc's malloc.

:func:`run_torch`, the torch runner's parent API, runs the worker (:mod:`.torch`, whose
``TorchRuntime`` the zygote serves) once in a process the zygote forks and returns a ``NativeRun`` or
raises ``TorchRunError`` (one line naming the model); :func:`launch` is the call the runner
registry names for the host device.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Sequence

from . import zygote as _zygote
from .records import NativeRun
from .torch import TorchRuntime
from .worker import run_worker
from .zygote import ZYGOTE_ENV, Zygote, ZygoteError

DEFAULT_TIMEOUT = 600.0  # seconds a worker may run (run_torch)
WORKER = TorchRuntime.program  # the worker module whose runtime the torch zygote serves


def zygote_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The torch zygote's environment (:func:`.zygote.zygote_env`): a worker run as a program in
    it measures as the zygote's children do (jemalloc included)."""
    return _zygote.zygote_env(WORKER, base)


def zygote(python: str | None = None) -> Zygote:
    """This interpreter's torch zygote for ``python`` (started now if none is running)."""
    return _zygote.zygote(WORKER, python)


def run_torch(model: str | os.PathLike, cpus: str | Iterable[int] | None = None, threads: int = 1,
              mode: str = "e2e", warmup: int = 5, runs: int = 50, engine: str | None = None, *,
              input_shapes: Sequence[Sequence[int]] | None = None, records_path: str | os.PathLike | None = None,
              trace_path: str | os.PathLike | None = None, timeout: float | None = DEFAULT_TIMEOUT,
              overhead_pairs: int = 0) -> NativeRun:
    """Runs the torch worker once in a fresh process forked by this interpreter's torch zygote
    (torch imported once; the child pins itself before torch makes a thread); returns its
    records. The run's ``outside_cpu_s`` is the child's CPU time, which this process's getrusage
    does not see (the child is the zygote's). ``input_shapes`` default: read by the worker from
    ``<stem>.facts.json`` beside the model. Raises ``TorchRunError`` (one line naming the model)
    on any failure."""
    return run_worker(TorchRuntime, model, cpus=cpus, threads=threads, mode=mode, warmup=warmup, runs=runs,
                      overhead_pairs=overhead_pairs, input_shapes=input_shapes, records_path=records_path,
                      trace_path=trace_path, timeout=timeout,
                      extra=["--engine", engine] if engine is not None else ())


def launch(artifact: str | os.PathLike, *, scenario: Any, cpus: list[int] | None, mode: str = "e2e",
           warmup: int = 5, runs: int = 50, overhead_pairs: int = 0, records_path: str | os.PathLike,
           trace_path: str | os.PathLike | None = None, timeout: float | None = None,
           engine: str | None = None) -> NativeRun:
    """One process of ``scenario`` as the host device runs it (the runners' ``launch``): the
    worker with the scenario's threads and the quantized ``engine``, pinned to ``cpus``.
    ``overhead_pairs`` counts in e2e mode only (torch.profiler has no plain twin in op mode)."""
    return run_torch(artifact, cpus=cpus, threads=scenario.threads, mode=mode, warmup=warmup, runs=runs,
                     engine=engine, records_path=records_path, trace_path=trace_path, timeout=timeout,
                     overhead_pairs=overhead_pairs if mode == "e2e" else 0)


__all__ = ["DEFAULT_TIMEOUT", "ZYGOTE_ENV", "Zygote", "ZygoteError", "launch", "run_torch", "zygote", "zygote_env"]
