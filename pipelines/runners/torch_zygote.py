"""The torch zygote: one process that imports torch once and forks a fresh measuring process
per request, so a PyTorch measurement does not pay torch's import (most of a process's wall
time, three to five processes a pair; ``benchmarks/bench_torch_zygote.py`` prints the saving)
in every process.

Why a fork is still a fresh process of the protocol: the child has its own address space, its
own model load, its own intra-op pool and its own pinning. The worker's rule is "pinned before
any torch thread exists" (every thread torch creates inherits the CPU set). Importing torch
makes one thread: numpy's OpenBLAS starts its pool when it loads (torch imports numpy), a pool
torch never computes with (its BLAS and convolutions are MKL's and oneDNN's, on torch's own
intra-op pool). The zygote runs with ``OPENBLAS_NUM_THREADS=1`` (no such pool) and checks that
it holds exactly one thread before it serves (a fork copies only the calling thread, and a
library whose thread vanished under it is not a fresh process), then never runs a tensor op,
so each child starts with one thread, pins itself, and only then lets torch build its pool.
(A worker run as a program keeps the idle OpenBLAS thread, pinned like the rest.) The worker's
affinity check (every thread on the requested CPUs, after the first run and at the end)
still judges every process. Records say ``process_start: "zygote"`` in their meta.

The zygote starts with jemalloc preloaded (``LD_PRELOAD``; :mod:`.allocator` says why), so every
worker it forks runs on it; where the machine has no jemalloc the client warns once and the
records name glibc's malloc.

Protocol (JSON lines on the zygote's stdin/stdout; ``python -m pipelines.runners.torch_zygote``):

- the zygote prints ``{"ready": true, "pid", "torch"}`` once torch is imported;
- a request ``{"argv": [worker arguments], "stderr": path}`` forks a child that runs the worker's
  ``main(argv)`` with its stderr in ``path`` and stdin/stdout on /dev/null (the protocol pipe
  stays the zygote's); the zygote answers ``{"pid"}`` at once and ``{"returncode", "cpu_s"}``
  when the child has ended: its exit code (minus the signal if killed) and the CPU time of the
  child and of the zygote's own fork, which the measure stage counts as its own (the child is
  not its child, so getrusage cannot see it; pipelines/machine_load.py);
- end of input ends the zygote.

The client: :func:`zygote`, one zygote per interpreter, started on the first request and again
if it died; :func:`run_torch`, the torch runner's parent API, runs the worker (:mod:`.torch`) once
in a process the zygote forks and returns a ``NativeRun`` or raises ``TorchRunError`` (one line
naming the model); :func:`launch` is the call the runner registry names for the host device.
"""
from __future__ import annotations

import atexit
import json
import os
import queue
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any, Iterable, Sequence

from . import allocator
from .process import native_run
from .records import NativeRun, NativeRunError, read_records
from .torch import TorchRunError, main, program_argv, worker_args, worker_error

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 180.0
DEFAULT_TIMEOUT = 600.0  # seconds a worker may run (run_torch)
# numpy's OpenBLAS would start a pool thread at import (see above); torch never computes on it
ZYGOTE_ENV = {"OPENBLAS_NUM_THREADS": "1"}


class ZygoteError(RuntimeError):
    """The zygote could not start or stopped answering; one line."""


# ---------------------------------------------------------------- the server
def _cpu_s(ru: resource.struct_rusage) -> float:
    return ru.ru_utime + ru.ru_stime


def _say(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _child(req: dict[str, Any]) -> int:
    """In the forked child: the protocol's pipes away, stderr to the request's file, Ctrl-C as a
    fresh interpreter has it, the worker."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    return main(req["argv"], process_start="zygote")


def serve() -> int:
    # Ctrl-C (or `timeout --signal=INT` on the sweep's process group) is for the measuring
    # child; the zygote ends when its client closes the pipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch  # the one import every child shares

    threads = [Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in os.listdir("/proc/self/task")]
    if len(threads) != 1:
        print(f"torch-zygote: error: importing torch left {len(threads)} threads ({', '.join(threads)}); a fork "
              f"would not be a fresh process (the threads vanish in the child, their library's state stays)",
              file=sys.stderr, flush=True)
        return 1
    _say({"ready": True, "pid": os.getpid(), "torch": torch.__version__})
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        own0 = _cpu_s(resource.getrusage(resource.RUSAGE_SELF))
        pid = os.fork()
        if pid == 0:
            code = 70  # EX_SOFTWARE: the worker raised past its own error handling
            try:
                code = _child(req)
            except BaseException:
                traceback.print_exc()
            finally:
                try:
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        own = _cpu_s(resource.getrusage(resource.RUSAGE_SELF)) - own0
        _say({"pid": pid})
        _, status, ru = os.wait4(pid, 0)
        _say({"returncode": os.waitstatus_to_exitcode(status), "cpu_s": round(_cpu_s(ru) + own, 6)})
    return 0


# ---------------------------------------------------------------- the client
def zygote_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the zygote runs in (``base``: default this process's): the project on
    PYTHONPATH, :data:`ZYGOTE_ENV`, and jemalloc preloaded where the machine has it
    (:func:`.allocator.preload`). A worker run as a program in this environment measures as
    the zygote's children do."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("PYTHONWARNINGS", "ignore")
    env.update(ZYGOTE_ENV)
    allocator.preload(env)
    return env


class Zygote:
    """A running zygote; :meth:`run` forks one worker process through it."""

    warned = False  # the missing-jemalloc warning, once per interpreter

    def __init__(self, python: str | None = None):
        env = zygote_env()
        if "LD_PRELOAD" not in env and not Zygote.warned:
            Zygote.warned = True
            print("latbench: warning: jemalloc (Debian libjemalloc2) not found: PyTorch processes run on glibc's "
                  "malloc, whose runs take page faults (records: meta.allocator, end.page_faults_per_run); "
                  "`make setup` installs it", file=sys.stderr)
        self._log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([python or sys.executable, "-m", "pipelines.runners.torch_zygote"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                     bufsize=1, env=env)
        # its answers through a queue: a timeout on a buffered pipe (select) would miss a line
        # that arrived with the one before it
        self._answers: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True, name="torch-zygote-answers").start()
        self._lock = threading.Lock()
        try:
            ready = self._read(READY_TIMEOUT_S, "starting")
        except TimeoutError:
            self.close()
            raise ZygoteError(f"the torch zygote did not import torch within {READY_TIMEOUT_S:.0f} s") from None
        if not ready.get("ready"):
            raise ZygoteError(f"the torch zygote answered {ready!r} instead of ready")
        self.torch_version = ready["torch"]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _died(self, doing: str) -> ZygoteError:
        self._log.seek(0)
        lines = [ln.strip() for ln in self._log.read().splitlines() if ln.strip()]
        self.close()
        return ZygoteError(f"the torch zygote ended {doing} (exit code {self.proc.returncode})"
                           + (f": {lines[-1]}" if lines else ""))

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._answers.put(line)
        self._answers.put("")  # end of its output: it ended

    def _read(self, timeout: float | None, doing: str) -> dict[str, Any]:
        try:
            line = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(doing) from None
        if not line:
            self.proc.wait(timeout=10)
            raise self._died(doing)
        return json.loads(line)

    def run(self, argv: list[str], stderr_path: str | os.PathLike, timeout: float | None) -> tuple[int, float]:
        """Forks one worker with ``argv`` (the worker's own arguments); waits at most ``timeout``
        seconds (then kills it and raises subprocess.TimeoutExpired). Returns (return code, CPU
        seconds of the worker and of the fork)."""
        with self._lock:  # one request at a time: the answers carry no request id
            return self._run(argv, stderr_path, timeout)

    def _run(self, argv: list[str], stderr_path: str | os.PathLike, timeout: float | None) -> tuple[int, float]:
        try:
            self.proc.stdin.write(json.dumps({"argv": list(argv), "stderr": str(stderr_path)}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.proc.wait(timeout=10)
            raise self._died("before a request") from None
        pid = self._read(60.0, "forking a worker")["pid"]
        try:
            done = self._read(timeout, "while a worker ran")
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            self._read(60.0, "killing a worker")  # its answer: the zygote has reaped it
            raise subprocess.TimeoutExpired(argv, timeout) from None
        return int(done["returncode"]), float(done["cpu_s"])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._log.close()


_LOCK = threading.Lock()
_ZYGOTES: dict[str, Zygote] = {}


def zygote(python: str | None = None) -> Zygote:
    """This interpreter's zygote for ``python`` (started now if none is running)."""
    key = python or sys.executable
    with _LOCK:
        z = _ZYGOTES.get(key)
        if z is None or not z.alive():
            if z is not None:
                z.close()  # its log file
            _ZYGOTES[key] = z = Zygote(key)
        return z


@atexit.register
def _close_all() -> None:
    for z in list(_ZYGOTES.values()):
        z.close()
    _ZYGOTES.clear()


# ---------------------------------------------------------------- the torch runner's parent API
def run_torch(model: str | os.PathLike, cpus: str | Iterable[int] | None = None, threads: int = 1,
              mode: str = "e2e", warmup: int = 5, runs: int = 50, engine: str | None = None, *,
              input_shapes: Sequence[Sequence[int]] | None = None, records_path: str | os.PathLike | None = None,
              trace_path: str | os.PathLike | None = None, timeout: float | None = DEFAULT_TIMEOUT) -> NativeRun:
    """Runs the torch worker once in a fresh process forked by this interpreter's torch zygote
    (:func:`zygote`: torch imported once; the child pins itself before torch makes a thread);
    returns its records. The run's ``outside_cpu_s`` is the child's CPU time, which this
    process's getrusage does not see (the child is the zygote's).

    ``input_shapes`` default: read by the worker from ``<stem>.facts.json`` beside the model.
    Raises :class:`TorchRunError` (one line naming the model) on any failure.
    """
    model = str(model)
    with tempfile.TemporaryDirectory(prefix="latbench-torch-") as tmp:
        rec = Path(records_path) if records_path is not None else Path(tmp) / "records.jsonl"
        args = worker_args(model, records=rec, trace=trace_path, cpus=cpus, threads=threads, mode=mode,
                           warmup=warmup, runs=runs, engine=engine, input_shapes=input_shapes)
        argv = program_argv(args)  # the same process as a program: the record's provenance
        stderr = Path(tmp) / "stderr.txt"
        try:
            returncode, cpu_s = zygote().run(args, stderr, timeout)
        except subprocess.TimeoutExpired:
            raise TorchRunError(f"{model}: the torch worker timed out after {timeout} s", kind="timeout",
                                model=model) from None
        except ZygoteError as e:
            raise TorchRunError(f"{model}: {e}", kind="crashed", model=model) from None
        if returncode != 0:
            raise worker_error(returncode, stderr.read_text(errors="replace") if stderr.is_file() else "", model)
        try:
            records = read_records(rec)
        except FileNotFoundError:
            raise TorchRunError(f"{model}: the torch worker wrote no records", kind="output", model=model) from None
        except NativeRunError as e:
            raise TorchRunError(f"{model}: {e}", kind="output", model=model) from None
    run = native_run(records, records_path, trace_path, argv)
    run.outside_cpu_s = cpu_s
    return run


def launch(artifact: str | os.PathLike, *, scenario: Any, cpus: list[int] | None, mode: str = "e2e",
           warmup: int = 5, runs: int = 50, overhead_pairs: int = 0, records_path: str | os.PathLike,
           trace_path: str | os.PathLike | None = None, timeout: float | None = None,
           engine: str | None = None) -> NativeRun:
    """One process of ``scenario`` as the host device runs it (the runners' ``launch``): the
    worker with the scenario's threads and the quantized ``engine``, pinned to ``cpus``
    (``overhead_pairs``: the worker measures no profiler overhead, not used here)."""
    return run_torch(artifact, cpus=cpus, threads=scenario.threads, mode=mode, warmup=warmup, runs=runs,
                     engine=engine, records_path=records_path, trace_path=trace_path, timeout=timeout)


if __name__ == "__main__":
    sys.exit(serve())
