"""The zygote: one process that imports a Python runtime's libraries once and forks a fresh
measuring process per request, so a measurement does not pay those imports (most of a Python
worker's wall time, three to five processes a pair; ``benchmarks/bench_runtimes.py`` and
``benchmarks/bench_torch_zygote.py`` print the saving) in every process.

A worker program takes part by defining its :class:`~pipelines.runners.worker.Runtime` with
``shared`` imports: the zygote of the module builds the :class:`Forkable` from it
(:func:`pipelines.runners.worker.forkable`: the imports its children share, the worker's entry
point in a child, the environment it needs and whether it runs on jemalloc, :mod:`.allocator`).
The PyTorch worker's client is :mod:`.torch_zygote`; ExecuTorch's and ONNX Runtime's run through
:func:`pipelines.runners.worker.run_worker`.

Why a fork is still a fresh process of the protocol: the child has its own address space, its
own model load, its own thread pools and its own pinning. The worker's rule is "pinned before
any thread of the runtime exists" (every thread a library creates inherits the CPU set). The
zygote imports only what creates no thread (numpy's OpenBLAS pool is turned off by
``OPENBLAS_NUM_THREADS=1``, a pool none of the runtimes computes with), checks that it holds
exactly one thread before it serves (a fork copies only the calling thread, and a library whose
thread vanished under it is not a fresh process), and never runs a model, so each child starts
with one thread, pins itself, and only then lets the runtime build its pools. A library whose
import starts a thread is left to the child (ONNX Runtime: its import starts one). The worker's
affinity check (every thread on the requested CPUs, after the first run and at the end) still
judges every process. Records say ``process_start: "zygote"`` in their meta.

Protocol (JSON lines on the zygote's stdin/stdout; ``python -m pipelines.runners.zygote MODULE``):

- the zygote prints ``{"ready": true, "pid", "versions"}`` once the shared imports are done;
- a request ``{"argv": [worker arguments], "stderr": path}`` forks a child that runs the worker
  with its stderr in ``path`` and stdin/stdout on /dev/null (the protocol pipe stays the
  zygote's); the zygote answers ``{"pid"}`` at once and ``{"returncode", "cpu_s"}`` when the
  child has ended: its exit code (minus the signal if killed) and the CPU time of the child and
  of the zygote's own fork, which the measure stage counts as its own (the child is not its
  child, so getrusage cannot see it; pipelines/machine_load.py);
- end of input ends the zygote.

The client: :func:`zygote`, one zygote per (interpreter, worker module), started on the first
request and again if it died; :meth:`Zygote.run` forks one worker.
"""
from __future__ import annotations

import atexit
import importlib
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
from typing import Any

from . import allocator
from .forkable import Forkable

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 180.0
# numpy's OpenBLAS would start a pool thread at import (see above); no runtime computes on it
ZYGOTE_ENV = {"OPENBLAS_NUM_THREADS": "1"}


class ZygoteError(RuntimeError):
    """The zygote could not start or stopped answering; one line."""


def forkable_of(module: str) -> Forkable:
    """The zygote's view of the worker program ``module``: the one Runtime it defines (a class
    whose ``program`` is ``module``, :class:`pipelines.runners.worker.Runtime`), which must have
    ``shared`` imports (imported: the worker modules import no runtime at module level). The
    Runtime gives its view itself (``zygote_view``): the worker module launches processes through
    this one, so this one reads it by that protocol rather than importing it."""
    mod = importlib.import_module(module)
    found = [v for v in vars(mod).values()
             if isinstance(v, type) and getattr(v, "program", None) == module and hasattr(v, "zygote_view")]
    if len(found) != 1 or not getattr(found[0], "shared", None):
        raise ZygoteError(f"{module} defines no Runtime with shared imports: its worker cannot be forked by a zygote")
    return found[0].zygote_view()


# ---------------------------------------------------------------- the server
def _cpu_s(ru: resource.struct_rusage) -> float:
    return ru.ru_utime + ru.ru_stime


def _say(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _child(f: Forkable, req: dict[str, Any]) -> int:
    """In the forked child: the protocol's pipes away, stderr to the request's file, Ctrl-C as a
    fresh interpreter has it, the worker."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    return f.main(req["argv"])


def threads_of_this_process() -> list[str]:
    return [Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in os.listdir("/proc/self/task")]


def serve(module: str) -> int:
    # Ctrl-C (or `timeout --signal=INT` on the sweep's process group) is for the measuring
    # child; the zygote ends when its client closes the pipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    f = forkable_of(module)
    versions = f.preload()  # the imports every child shares
    threads = threads_of_this_process()
    if len(threads) != 1:
        print(f"zygote: error: {f.name}: its imports left {len(threads)} threads ({', '.join(threads)}); a fork "
              f"would not be a fresh process (the threads vanish in the child, their library's state stays)",
              file=sys.stderr, flush=True)
        return 1
    _say({"ready": True, "pid": os.getpid(), "versions": versions})
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        own0 = _cpu_s(resource.getrusage(resource.RUSAGE_SELF))
        pid = os.fork()
        if pid == 0:
            code = 70  # EX_SOFTWARE: the worker raised past its own error handling
            try:
                code = _child(f, req)
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
def zygote_env(module: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the zygote of ``module`` runs in (``base``: default this process's): the
    project on PYTHONPATH, :data:`ZYGOTE_ENV`, the program's own, and jemalloc preloaded where the
    program asks for it and the machine has it (:func:`.allocator.preload`). A worker run as a
    program in this environment measures as the zygote's children do."""
    f = forkable_of(module)
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("PYTHONWARNINGS", "ignore")
    env.update(ZYGOTE_ENV)
    env.update(f.env)
    if f.jemalloc:
        allocator.preload(env)
    return env


class Zygote:
    """A running zygote of one worker module; :meth:`run` forks one worker process through it."""

    warned: set[str] = set()  # the missing-jemalloc warning, once per interpreter and program

    def __init__(self, module: str, python: str | None = None):
        self.module = module
        f = forkable_of(module)
        self.name = f.name
        env = zygote_env(module)
        if f.jemalloc and "LD_PRELOAD" not in env and module not in Zygote.warned:
            Zygote.warned.add(module)
            print(f"latbench: warning: jemalloc (Debian libjemalloc2) not found: {f.name}'s processes run on glibc's "
                  "malloc, whose runs take page faults (records: meta.allocator, end.page_faults_per_run); "
                  "`make setup` installs it", file=sys.stderr)
        self._log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([python or sys.executable, "-m", __name__, module],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                     bufsize=1, env=env)
        # its answers through a queue: a timeout on a buffered pipe (select) would miss a line
        # that arrived with the one before it
        self._answers: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True, name="zygote-answers").start()
        self._lock = threading.Lock()
        try:
            ready = self._read(READY_TIMEOUT_S, "starting")
        except TimeoutError:
            self.close()
            raise ZygoteError(f"{self.name} did not finish its imports within {READY_TIMEOUT_S:.0f} s") from None
        if not ready.get("ready"):
            raise ZygoteError(f"{self.name} answered {ready!r} instead of ready")
        self.versions: dict[str, str] = ready.get("versions") or {}

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _died(self, doing: str) -> ZygoteError:
        self._log.seek(0)
        lines = [ln.strip() for ln in self._log.read().splitlines() if ln.strip()]
        self.close()
        return ZygoteError(f"{self.name} ended {doing} (exit code {self.proc.returncode})"
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
_ZYGOTES: dict[tuple[str, str], Zygote] = {}


def zygote(module: str, python: str | None = None) -> Zygote:
    """This interpreter's zygote of the worker ``module`` for ``python`` (started now if none is running)."""
    key = (module, python or sys.executable)
    with _LOCK:
        z = _ZYGOTES.get(key)
        if z is None or not z.alive():
            if z is not None:
                z.close()  # its log file
            _ZYGOTES[key] = z = Zygote(module, key[1])
        return z


@atexit.register
def _close_all() -> None:
    for z in list(_ZYGOTES.values()):
        z.close()
    _ZYGOTES.clear()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m pipelines.runners.zygote WORKER_MODULE", file=sys.stderr)
        sys.exit(2)
    # the module's own copy, not this __main__ one: the workers' Forkable is that module's class
    from pipelines.runners import zygote as _self

    sys.exit(_self.serve(sys.argv[1]))
