"""The measuring process of a Python runtime, and its parent side: what is not the runtime's own.

A runtime plugs in as a :class:`Runtime` subclass (its module imports nothing of the runtime at
module level; :mod:`.onnxruntime` is one). The **worker**, :func:`main`, is one fresh process
per scenario, with ``latbench-run``'s records, trace layout and exit codes:

1. it parses the flags (:func:`parser`: the same for every runtime, plus the runtime's own) and
   pins the process (``--cpus``) *before* the runtime is imported, so every thread it makes
   inherits the CPU set;
2. ``Runtime.start`` imports the runtime; the threads that exist then are the libraries' (role
   ``library``, pinned but not counted as compute); ``Runtime.load`` builds the session and its
   inputs (its threads: role ``runtime``);
3. warm-up, then timed runs, each timed with ``time.monotonic_ns()`` around ``Runtime.run``
   only; the threads' CPU sets are read after the first run and at the end, page faults are
   counted over the timed runs; with ``--overhead-pairs``, as ``latbench-run`` does, a profiled
   mode (op, and kernel where the runtime offers it) alternates the profiled run with
   ``Runtime.run_plain`` (the same model without the profiler, warmed up first), and e2e mode
   alternates runs timed one by one with runs timed as one block (the instrument's own cost);
4. after the last run, ``Runtime.profile`` gives the profiler's events on CLOCK_MONOTONIC (it gets
   the run records, for a profiler whose clock is aligned by them); each goes to the run whose
   window holds its midpoint (warm-up and overhead runs' are dropped);
5. the records (meta, run, op, kernel, runtime, overhead, end) and the Chrome trace are written.

Errors are one line on stderr (``<tool>: error: <model>: ...``) with the exit codes of
:data:`pipelines.runners.records.EXIT_KINDS`; a runtime raises :class:`WorkerFail` for them.

The **parent** side: :func:`worker_args`, :func:`build_argv` (the worker as ``python -m
<Runtime.program>``), :func:`run_worker` (a fresh process with a timeout, forked by the runtime's
zygote when it has ``shared`` imports, :func:`forkable` and :mod:`.zygote`; its records as a
:class:`~pipelines.runners.records.NativeRun`) and :func:`worker_error` (the runtime's
``NativeRunError`` subclass, one line naming the model). Standard library only at module level.
docs/measure.md (*The Python workers*) has the flags and the record fields.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Sequence

from foundation.atomic import atomic_path, write_text

from . import allocator
from .process import cpus_arg, exit_failure, native_run
from .records import NativeRun, NativeRunError, read_records

ROOT = Path(__file__).resolve().parents[2]
MODES = ("e2e", "op")
EXIT_OK, EXIT_USAGE, EXIT_MISSING, EXIT_INVALID, EXIT_CPUS, EXIT_RUNTIME, EXIT_OUTPUT = 0, 2, 3, 4, 5, 6, 7
TID_RUNS, TID_OPS, TID_KERNELS, TID_RUNTIME = 1, 2, 3, 4
TRACKS = {TID_RUNS: "runs", TID_OPS: "ops", TID_KERNELS: "kernels", TID_RUNTIME: "runtime"}
DEFAULT_TIMEOUT = 600.0  # seconds a worker may run (run_worker)


class WorkerFail(Exception):
    """A failure of the worker with its exit code; the message is one line (the model is added)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def first_line(e: BaseException, limit: int = 300) -> str:
    """The first non-empty line of an exception's text (runtimes raise multi-line errors)."""
    line = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
    return line[:limit]


@dataclass
class Profile:
    """What a runtime's profiler recorded, on CLOCK_MONOTONIC: ``events`` are dicts with
    ``type`` (op | kernel | runtime), ``name``, ``start_ns``, ``duration_ns`` and the runtime's own fields;
    ``alignment`` says how the profiler's clock was mapped (meta.clock_alignment); ``count`` is
    every event the profiler recorded (end.profiler_events)."""

    events: list[dict[str, Any]]
    alignment: dict[str, Any]
    count: int


class Runtime:
    """A runtime the worker measures. The worker calls, in order: ``add_arguments`` (building the
    parser), ``check_args``, ``start``, ``load``, ``runs`` (entered around every run), ``run`` and
    ``run_plain``, ``profile`` (a profiled mode, after the runs), ``meta``."""

    tool = "latbench-worker"  # program name: meta.tool and the error prefix
    version = "0.1.0"
    framework = ""  # meta.framework: the runner registry's name
    program = ""  # the module run as ``python -m``: the worker as a program
    description = ""
    modes: tuple[str, ...] = MODES
    kinds: dict[str, str] = {}  # model file suffix -> meta.model_kind
    error: type[NativeRunError] = NativeRunError  # what the parent raises for a failed worker
    env: dict[str, str] = {}  # environment the parent adds for the worker
    # modules a zygote imports once for all its children (pipelines/runners/zygote.py): each must
    # start no thread; the rest of the runtime is imported by the child, pinned (start)
    shared: tuple[str, ...] = ()
    jemalloc = False  # its zygote runs on jemalloc with freed pages kept (pipelines/runners/allocator.py)

    @classmethod
    def zygote_view(cls) -> Any:
        """What the zygote forks for this runtime (:func:`forkable`); the zygote finds it on the
        worker program's one Runtime without importing this module."""
        return forkable(cls)

    @classmethod
    def preload(cls) -> dict[str, str]:
        """Imports :attr:`shared` (in a zygote, before any fork); returns their versions."""
        import importlib

        out = {}
        for name in cls.shared:
            mod = importlib.import_module(name)
            if "." not in name and hasattr(mod, "__version__"):
                out[name] = str(mod.__version__)
        return out

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The runtime's own flags."""

    def check_args(self, args: argparse.Namespace, model: Path) -> None:
        """The runtime's own flags checked (WorkerFail EXIT_USAGE), before anything is loaded."""

    def start(self, args: argparse.Namespace) -> None:
        """Imports the runtime (the process is pinned by now)."""

    def load(self, model: Path, args: argparse.Namespace, input_shapes: list[list[int]] | None, profiling: bool,
             plain: bool) -> None:
        """Loads ``model`` for ``args.threads`` threads, with its inputs made (``input_shapes``:
        from ``--input-shape``, None: the runtime's own); ``profiling``: a profiled mode
        (``args.mode``: op or kernel); ``plain``: also a
        twin without the profiler for :meth:`run_plain`."""
        raise NotImplementedError

    def runs(self) -> ContextManager[Any]:
        """Entered around all runs (an inference mode, a profiler)."""
        return contextlib.nullcontext()

    def run(self) -> None:
        """One inference (the timed call)."""
        raise NotImplementedError

    def run_plain(self) -> None:
        """One inference of the twin without the profiler (overhead rounds)."""
        raise NotImplementedError

    def profile(self, runs: list[dict[str, Any]]) -> Profile:
        """The profiler's events after the runs (a profiled mode); ``runs``: every run record of
        the loop (warm-up, timed, overhead; ``profiled`` says which ran with the profiler)."""
        raise NotImplementedError

    def meta(self) -> dict[str, Any]:
        """The runtime's fields of the meta record: runtime, runtime_version, model_kind, format,
        precision, input_shapes, threads, interop_threads and its own."""
        return {}


# ---------------------------------------------------------------- helpers
def parse_cpu_list(text: str) -> list[int]:
    """'0,1' / '0-3' / '0-1,3' -> sorted CPU ids (ValueError if malformed)."""
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            lo_i, hi_i = int(lo), int(hi)
            if lo_i < 0 or hi_i < lo_i:
                raise ValueError(f"bad CPU range {part!r}")
            out.update(range(lo_i, hi_i + 1))
        else:
            c = int(part)
            if c < 0:
                raise ValueError(f"bad CPU {part!r}")
            out.add(c)
    if not out:
        raise ValueError("empty CPU list")
    return sorted(out)


def thread_affinities(library: frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """Every thread of this process: tid, name, role (main | runtime | library: one of the
    ``library`` tids, there before the runtime loaded), cpus (Cpus_allowed_list), cpu/wait time."""
    pid = os.getpid()
    out = []
    for entry in sorted(Path("/proc/self/task").iterdir(), key=lambda p: int(p.name)):
        tid = int(entry.name)
        try:
            name = (entry / "comm").read_text().strip()
            cpus: list[int] = []
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    cpus = parse_cpu_list(line.split(":", 1)[1])
                    break
            try:
                run_ns, wait_ns = (int(v) for v in (entry / "schedstat").read_text().split()[:2])
            except (OSError, ValueError):
                run_ns = wait_ns = -1
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        role = "main" if tid == pid else "library" if tid in library else "runtime"
        out.append({"tid": tid, "name": name, "role": role, "cpus": cpus, "cpu_time_ns": run_ns,
                    "wait_time_ns": wait_ns})
    return out


def affinity_fields(cpus: list[int], library: frozenset[int] = frozenset()) -> tuple[dict[str, Any], str | None]:
    """The thread fields of the meta and end records, and the first thread outside ``cpus`` (None: none).
    Compute threads are the main thread and the runtime's (not the libraries' idle ones)."""
    threads = thread_affinities(library)
    bad = next((t for t in threads if t["cpus"] != cpus), None)
    fields = {"thread_affinity": threads, "threads_observed": len(threads),
              "compute_threads_observed": sum(t["role"] != "library" for t in threads),
              "runtime_threads_active": sum(t["role"] == "runtime" and t["cpu_time_ns"] > 0 for t in threads),
              "affinity_ok": bad is None and bool(threads)}
    return fields, (f"thread {bad['tid']} ({bad['name']}) on CPUs {bad['cpus']}" if bad else None)


def clock_offset(reads: int = 7) -> dict[str, int]:
    """CLOCK_REALTIME minus CLOCK_MONOTONIC, from the read with the tightest monotonic bracket."""
    best = None
    for _ in range(reads):
        m0 = time.monotonic_ns()
        r = time.time_ns()
        m1 = time.monotonic_ns()
        if best is None or m1 - m0 < best[0]:
            best = (m1 - m0, r - (m0 + m1) // 2)
    return {"offset_ns": best[1], "uncertainty_ns": best[0]}


def realtime_alignment(start: dict[str, int], end: dict[str, int], profiler_clock: str) -> dict[str, Any]:
    """meta.clock_alignment of a profiler stamping CLOCK_REALTIME: the :func:`clock_offset` reads
    bracketing its start and its end; ``offset_ns`` (their mean) is what to subtract."""
    return {"profiler_clock": profiler_clock,
            "method": "offset = realtime - monotonic (tightest of 7 bracketed reads) at profiler start and stop; "
                      "monotonic_ns = profiler_ns - mean offset",
            "offset_start_ns": start["offset_ns"], "offset_end_ns": end["offset_ns"],
            "offset_drift_ns": end["offset_ns"] - start["offset_ns"],
            "read_uncertainty_ns": max(start["uncertainty_ns"], end["uncertainty_ns"]),
            "offset_ns": (start["offset_ns"] + end["offset_ns"]) // 2}


def page_faults() -> int:
    """Minor plus major page faults of this process so far."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt + usage.ru_majflt


def parse_shapes(model: Path, given: list[str] | None) -> list[list[int]] | None:
    """``--input-shape`` values (``1,3,32,32`` or ``1x3x32x32``) as lists (None: none given)."""
    if not given:
        return None
    try:
        shapes = [[int(v) for v in s.replace("x", ",").split(",") if v.strip()] for s in given]
    except ValueError:
        raise WorkerFail(EXIT_USAGE, f"{model}: bad --input-shape {given!r} (want e.g. 1,3,32,32)") from None
    if any(not s or min(s) <= 0 for s in shapes):
        raise WorkerFail(EXIT_USAGE, f"{model}: bad --input-shape {given!r} (want e.g. 1,3,32,32)")
    return shapes


def sidecar_shapes(model: Path) -> list[list[int]] | None:
    """Input shapes from ``<stem>.facts.json`` beside the model (the export stage's), None: none."""
    sidecar = model.parent / f"{model.stem}.facts.json"
    if sidecar.is_file():
        try:
            return [list(map(int, i["shape"])) for i in json.loads(sidecar.read_text())["inputs"]]
        except (ValueError, KeyError, TypeError):
            return None
    return None


def median_or_zero(values: Sequence[float]) -> float:
    """The median (0.0 of nothing)."""
    return float(statistics.median(values)) if values else 0.0


def _ts_us(ns_rel: int) -> float:
    return round(ns_rel / 1000.0, 3)


_TRACE_OMIT = ("type", "name", "start_ns", "duration_ns")


def write_trace(path: str | os.PathLike, records: list[dict[str, Any]], t0_ns: int, process_name: str) -> None:
    """A Chrome-trace / Perfetto JSON timeline with latbench-run's track layout."""
    pid = os.getpid()
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": process_name}}]
    for tid, name in TRACKS.items():
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    for r in records:
        t = r.get("type")
        if t == "run":
            label = f"run {r['run']} ({r['phase']}{', ' + r['condition'] if r.get('condition') else ''})"
            events.append({"ph": "X", "name": label, "pid": pid, "tid": TID_RUNS, "ts": _ts_us(r["start_ns"] - t0_ns),
                           "dur": _ts_us(r["duration_ns"]),
                           "args": {k: r[k] for k in ("run", "phase", "profiled", "condition") if k in r}})
        elif t in ("op", "kernel", "runtime"):
            tid = TID_OPS if t == "op" else TID_KERNELS if t == "kernel" else TID_RUNTIME
            events.append({"ph": "X", "name": r["name"], "pid": pid, "tid": tid,
                           "ts": _ts_us(r["start_ns"] - t0_ns), "dur": _ts_us(r["duration_ns"]),
                           "args": {k: v for k, v in r.items() if k not in _TRACE_OMIT}})
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write('{"displayTimeUnit":"ns","traceEvents":[\n')
        f.write(",\n".join(json.dumps(e, separators=(",", ":")) for e in events))
        f.write("\n]}\n")


# ---------------------------------------------------------------- the worker
class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, our exit code (argparse would exit 2 with a usage block)
        raise _ArgError(message)


def parser(runtime: Runtime) -> argparse.ArgumentParser:
    """The worker's flags: the common ones and the runtime's own."""
    kinds = " or ".join(runtime.kinds) or "the model file"
    p = _Parser(prog=runtime.tool, description=runtime.description)
    p.add_argument("--model", required=True, help=f"the {kinds} file")
    p.add_argument("--records", required=True, help='JSON-lines records ("-": stdout)')
    p.add_argument("--trace", help="Chrome-trace JSON timeline (tracks runs, ops, kernels, runtime)")
    p.add_argument("--cpus", help="CPUs to pin the process to, e.g. 0,1 or 0-3 (default: all allowed now)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1)")
    p.add_argument("--mode", default="e2e", help=f"{' or '.join(runtime.modes)}: e2e has no profiler, "
                                                 "op records one event per operator, kernel one per kernel")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--overhead-pairs", type=int, default=0,
                   help="op or kernel mode: after the timed runs, N rounds of a plain and a profiled run, "
                        "alternating")
    p.add_argument("--input-shape", action="append", help="input shape, e.g. 1,3,32,32 (once per input)")
    runtime.add_arguments(p)
    return p


def model_of(argv: Sequence[str]) -> str:
    """The ``--model`` value of a command line, for error lines written before it is parsed."""
    return next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--model"),
                next((a.split("=", 1)[1] for a in argv if a.startswith("--model=")), "(no --model)"))


def pin(cpus_text: str | None, model: str) -> list[int]:
    """Pins this process to the ``--cpus`` list (None: as it is); returns its CPUs. A bad,
    impossible or refused set is a :class:`WorkerFail` (EXIT_CPUS) naming ``model``."""
    if cpus_text is not None:
        try:
            cpus = parse_cpu_list(cpus_text)
        except ValueError as e:
            raise WorkerFail(EXIT_CPUS, f"{model}: bad CPU list {cpus_text!r} ({e})") from None
        allowed = os.sched_getaffinity(0)
        outside = [c for c in cpus if c not in allowed]
        if outside:
            raise WorkerFail(EXIT_CPUS, f"{model}: impossible CPU set {cpus_text!r}: CPU {outside[0]} does "
                                        f"not exist or is not allowed (allowed: {','.join(map(str, sorted(allowed)))})")
        try:
            os.sched_setaffinity(0, cpus)
        except OSError as e:
            raise WorkerFail(EXIT_CPUS, f"{model}: cannot pin to CPUs {cpus_text!r}: {e.strerror}") from None
    return sorted(os.sched_getaffinity(0))


def main(runtime: Runtime, argv: Sequence[str] | None = None, process_start: str = "exec") -> int:
    """The worker: ``argv`` (default ``sys.argv[1:]``) parsed, the process pinned, ``runtime``
    measured; returns the exit code. ``process_start``: how this process began (meta)."""
    t_start = time.monotonic_ns()
    wall_start = time.time_ns()
    raw = list(sys.argv[1:] if argv is None else argv)
    model_arg = model_of(raw)
    try:
        try:
            args = parser(runtime).parse_args(raw)
        except _ArgError as e:
            raise WorkerFail(EXIT_USAGE, str(e)) from None
        model_arg = args.model
        # 1. pin first: the runtime is not imported yet, so every thread it makes inherits the set
        cpus = pin(args.cpus, model_arg)
        return _measure(runtime, args, cpus, t_start, wall_start, process_start)
    except WorkerFail as e:
        msg = " ".join(str(e).split())
        if model_arg not in msg:
            msg = f"{model_arg}: {msg}"
        print(f"{runtime.tool}: error: {msg}", file=sys.stderr, flush=True)
        return e.code


def _check_args(runtime: Runtime, args: argparse.Namespace, model: Path) -> None:
    if args.mode not in runtime.modes:
        raise WorkerFail(EXIT_USAGE, f"{model}: unknown mode {args.mode!r} (known: {', '.join(runtime.modes)})")
    if args.threads < 1 or args.warmup < 0 or args.runs < 1 or args.overhead_pairs < 0:
        raise WorkerFail(EXIT_USAGE, f"{model}: need --threads >= 1, --warmup >= 0, --runs >= 1, --overhead-pairs >= 0")
    runtime.check_args(args, model)
    if not model.exists():
        raise WorkerFail(EXIT_MISSING, f"{model}: model file not found")
    if not model.is_file() or not os.access(model, os.R_OK):
        raise WorkerFail(EXIT_MISSING, f"{model}: model file is not a readable file")
    if runtime.kinds and model.suffix not in runtime.kinds:
        raise WorkerFail(EXIT_INVALID, f"{model}: not a {' or '.join(runtime.kinds)} file")


@dataclass
class _Loop:
    """What the timed loop measured."""

    runs: list[dict[str, Any]] = field(default_factory=list)  # every run record, in order
    affinity: tuple[dict[str, Any], str | None] | None = None  # read after the first run
    faults_per_run: float = 0.0
    overhead: dict[str, Any] | None = None


def _loop(runtime: Runtime, args: argparse.Namespace, cpus: list[int], library: frozenset[int],
          profiling: bool) -> _Loop:
    """Warm-up and timed runs (then the overhead rounds), timed around the run call only."""
    out = _Loop()
    n_total = args.warmup + args.runs
    starts, ends = [0] * n_total, [0] * n_total
    mono = time.monotonic_ns
    run = runtime.run
    faults_at_timed = 0
    pairs = args.overhead_pairs if profiling else 0
    cond: list[tuple[str, int, int]] = []
    blocks: list[tuple[str, int, int, int]] = []  # e2e overhead: (condition, round, start, end)
    with runtime.runs():
        for i in range(n_total):
            if i == args.warmup:  # outside the timed window
                faults_at_timed = page_faults()
            t0 = mono()
            run()
            t1 = mono()
            starts[i], ends[i] = t0, t1
            if i == 0:  # after the first run: every thread the runtime made so far exists
                out.affinity = affinity_fields(cpus, library)
        out.faults_per_run = (page_faults() - faults_at_timed) / args.runs
        for _ in range(max(args.warmup, 1) if pairs else 0):  # the twin's own warm-up, untimed
            runtime.run_plain()
        for p in range(pairs):  # plain and profiled alternating, the first of a round alternating too
            for plain in ((True, False) if p % 2 == 0 else (False, True)):
                call = runtime.run_plain if plain else run
                t0 = mono()
                call()
                t1 = mono()
                cond.append(("plain" if plain else "profiled", t0, t1))
        if not profiling and args.overhead_pairs:
            blocks = _e2e_overhead_rounds(run, args.overhead_pairs)
    for i in range(n_total):
        timed = i >= args.warmup
        out.runs.append({"type": "run", "phase": "timed" if timed else "warmup", "run": i - args.warmup if timed else i,
                         "start_ns": starts[i], "end_ns": ends[i], "duration_ns": ends[i] - starts[i],
                         "profiled": profiling})
    for k, (c, t0, t1) in enumerate(cond):
        out.runs.append({"type": "run", "phase": "overhead", "run": k, "start_ns": t0, "end_ns": t1,
                         "duration_ns": t1 - t0, "profiled": c == "profiled", "condition": c})
    if blocks:
        out.runs += [{"type": "run", "phase": "overhead", "run": k, "start_ns": t0, "end_ns": t1, "duration_ns": t1 - t0,
                      "profiled": False, "condition": c} for k, (c, _, t0, t1) in enumerate(blocks)]
        out.overhead = _e2e_overhead(blocks, args.overhead_pairs)
    if cond:
        plain = [t1 - t0 for c, t0, t1 in cond if c == "plain"]
        prof = [t1 - t0 for c, t0, t1 in cond if c == "profiled"]
        med_plain, med_prof = median_or_zero(plain), median_or_zero(prof)
        out.overhead = {"type": "overhead", "mode": args.mode, "pairs": pairs,
                        "baseline": "plain: a second session of the same file without the profiler",
                        "median_unprofiled_ns": med_plain, "median_profiled_ns": med_prof,
                        "ratio": med_prof / med_plain if med_plain > 0 else 0.0,
                        "median_pair_ratio": median_or_zero([b / a for a, b in zip(plain, prof) if a > 0])}
    return out


E2E_BLOCK = 5  # runs per condition of an e2e overhead round (as latbench-run's)


def _e2e_overhead_rounds(run: Callable[[], None], pairs: int) -> list[tuple[str, int, int, int]]:
    """The e2e mode's overhead rounds: what the instrument itself adds to a run. Per round,
    :data:`E2E_BLOCK` runs timed as the timed runs are (two clock reads each, kept) and as many
    timed as one block (two clock reads for all), in alternating order; the uninstrumented run
    is the block's time over its runs. Returns (condition, round, start, end) per timed interval."""
    mono = time.monotonic_ns
    out: list[tuple[str, int, int, int]] = []
    for p in range(pairs):
        for blocked in ((False, True) if p % 2 == 0 else (True, False)):
            if blocked:
                b0 = mono()
                for _ in range(E2E_BLOCK):
                    run()
                out.append(("block", p, b0, mono()))
            else:
                for _ in range(E2E_BLOCK):
                    t0 = mono()
                    run()
                    t1 = mono()
                    out.append(("instrumented", p, t0, t1))
    return out


def _e2e_overhead(blocks: list[tuple[str, int, int, int]], pairs: int) -> dict[str, Any]:
    """The overhead record of :func:`_e2e_overhead_rounds`' intervals (latbench-run's layout)."""
    inst = [sum(t1 - t0 for c, q, t0, t1 in blocks if c == "instrumented" and q == p) / E2E_BLOCK for p in range(pairs)]
    block = [sum(t1 - t0 for c, q, t0, t1 in blocks if c == "block" and q == p) / E2E_BLOCK for p in range(pairs)]
    med_inst, med_block = median_or_zero(inst), median_or_zero(block)
    return {"type": "overhead", "mode": "e2e", "pairs": pairs, "runs_per_condition": E2E_BLOCK,
            "baseline": f"block: {E2E_BLOCK} runs timed as one interval, without per-run clock reads or records",
            "median_unprofiled_ns": med_block, "median_profiled_ns": med_inst,
            "ratio": med_inst / med_block if med_block > 0 else 0.0,
            "median_pair_ratio": median_or_zero([i / b for i, b in zip(inst, block) if b > 0])}


def assign_runs(events: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of the timed runs as records: each goes to the run whose [start_ns, end_ns]
    window holds its midpoint (else the nearest window); events of warm-up and overhead runs are
    dropped. Records get ``run`` and ``order`` (per run and type, by start time; events starting
    together keep the profiler's order; ops also ``node`` = order when the runtime gave none, and
    ``subgraph`` 0)."""
    windows = [(r["start_ns"], r["end_ns"], r["run"] if r["phase"] == "timed" else None) for r in runs]

    def run_of(start: int, end: int) -> int | None:
        mid = (start + end) // 2
        best, dist = None, None
        for a, b, run in windows:
            d = 0 if a <= mid <= b else min(abs(mid - a), abs(mid - b))
            if dist is None or d < dist:
                best, dist = run, d
        return best

    out, order = [], {}
    for e in sorted(events, key=lambda e: e["start_ns"]):  # stable: ties keep the profiler's order
        run = run_of(e["start_ns"], e["start_ns"] + e["duration_ns"])
        if run is None:
            continue
        k = order.get((e["type"], run), 0)
        order[(e["type"], run)] = k + 1
        rec = {"type": e["type"], "run": run, "order": k}
        if e["type"] == "op":
            rec.update({"node": k, "subgraph": 0})
        rec.update({key: v for key, v in e.items() if key != "type"})
        out.append(rec)
    return out


def _measure(runtime: Runtime, args: argparse.Namespace, cpus: list[int], t_start: int, wall_start: int,
             process_start: str) -> int:
    model = Path(args.model)
    _check_args(runtime, args, model)
    shapes = parse_shapes(model, args.input_shape)
    profiling = args.mode != "e2e"
    # 2. the runtime, after the pinning; the threads its import leaves are the libraries'
    try:
        runtime.start(args)
    except Exception as e:
        raise WorkerFail(EXIT_RUNTIME, f"{model}: cannot start the runtime: {first_line(e)}") from None
    library = frozenset(int(t) for t in os.listdir("/proc/self/task")) - {os.getpid()}
    try:
        runtime.load(model, args, shapes, profiling, plain=profiling and args.overhead_pairs > 0)
    except WorkerFail:
        raise
    except Exception as e:
        raise WorkerFail(EXIT_INVALID, f"{model}: cannot load it: {first_line(e)}") from None
    try:
        loop = _loop(runtime, args, cpus, library, profiling)
        prof = runtime.profile(loop.runs) if profiling else None
    except WorkerFail:
        raise
    except Exception as e:
        raise WorkerFail(EXIT_RUNTIME, f"{model}: the model failed to run: {first_line(e)}") from None
    # 3. records, all after the runs
    timed_runs = [r for r in loop.runs if r["phase"] == "timed"]
    events = assign_runs(prof.events, loop.runs) if prof else []
    ops = [e for e in events if e["type"] == "op"]
    kernels = [e for e in events if e["type"] == "kernel"]
    spans = [e for e in events if e["type"] == "runtime"]
    final_aff, bad_final = affinity_fields(cpus, library)
    first_aff, bad_first = loop.affinity or (final_aff, bad_final)
    meta = {"type": "meta", "tool": runtime.tool, "tool_version": runtime.version, "framework": runtime.framework,
            **runtime.meta(), "model": str(model), "model_bytes": model.stat().st_size, "cpus": cpus,
            "threads_requested": args.threads, "mode": args.mode, "profiling": profiling, "warmup": args.warmup,
            "runs": args.runs, "overhead_pairs": args.overhead_pairs,
            "hostname": socket.gethostname(), "pid": os.getpid(), "clock": "CLOCK_MONOTONIC",
            "clock_resolution_ns": int(time.clock_getres(time.CLOCK_MONOTONIC) * 1e9), "start_unix_ns": wall_start,
            "process_start": process_start, "affinity_read": "after the first run", "allocator": allocator.in_use(),
            **first_aff}
    if prof:
        meta["clock_alignment"] = prof.alignment
    durs = [r["duration_ns"] for r in timed_runs]
    per_run: dict[int, list[int]] = {}
    for o in ops:
        per_run.setdefault(o["run"], []).append(o["duration_ns"])
    op_sums = [sum(per_run.get(r["run"], [])) for r in timed_runs] if profiling else []
    end = {"type": "end", "timed_runs": args.runs, "median_run_ns": median_or_zero(durs),
           "profiler_events": prof.count if prof else 0, "ops": len(ops),
           **({"kernels": len(kernels)} if args.mode == "kernel" else {}),
           "ops_per_run": sorted({len(per_run.get(r["run"], [])) for r in timed_runs}) if profiling else [],
           "median_op_sum_ns": median_or_zero(op_sums) if profiling else None,
           "op_sum_ratio": median_or_zero([s / d for s, d in zip(op_sums, durs) if d > 0]) if profiling else None,
           "page_faults_per_run": loop.faults_per_run, "elapsed_ns": time.monotonic_ns() - t_start, **final_aff}
    records = [meta, *loop.runs, *ops, *kernels, *spans, *([loop.overhead] if loop.overhead else []), end]
    try:
        text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
        if args.records == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            write_text(args.records, text)
        if args.trace:
            write_trace(args.trace, records, t_start, f"{runtime.tool} {model.name}")
    except OSError as e:
        raise WorkerFail(EXIT_OUTPUT, f"{model}: cannot write {e.filename or 'output'}: {e.strerror}") from None
    bad = bad_first or bad_final
    if bad:
        raise WorkerFail(EXIT_CPUS, f"{model}: {bad} ran outside the requested CPU set {','.join(map(str, cpus))}")
    return EXIT_OK


# ---------------------------------------------------------------- the parent side
def worker_args(model: str | os.PathLike, *, records: str | os.PathLike, trace: str | os.PathLike | None = None,
                cpus: str | Iterable[int] | None = None, threads: int = 1, mode: str = "e2e", warmup: int = 5,
                runs: int = 50, overhead_pairs: int = 0, input_shapes: Sequence[Sequence[int]] | None = None,
                extra: Sequence[str] = ()) -> list[str]:
    """The worker's own arguments (what :func:`main` parses); ``extra``: the runtime's flags."""
    args = ["--model", str(model), "--records", str(records), "--threads", str(threads), "--mode", mode,
            "--warmup", str(warmup), "--runs", str(runs)]
    if trace is not None:
        args += ["--trace", str(trace)]
    cpu_list = cpus_arg(cpus)
    if cpu_list is not None:
        args += ["--cpus", cpu_list]
    if overhead_pairs:
        args += ["--overhead-pairs", str(int(overhead_pairs))]
    for shape in input_shapes or ():
        args += ["--input-shape", ",".join(str(int(v)) for v in shape)]
    return [*args, *extra]


def build_argv(runtime: type[Runtime] | Runtime, model: str | os.PathLike, *, python: str | None = None,
               **kw: Any) -> list[str]:
    """The command running ``runtime``'s worker as a fresh interpreter (``kw``: :func:`worker_args`'s)."""
    return [python or sys.executable, "-m", runtime.program, *worker_args(model, **kw)]


def worker_env(runtime: type[Runtime] | Runtime, base: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's environment: ``base`` (default this process's) with the project on
    PYTHONPATH and the runtime's ``env``."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("PYTHONWARNINGS", "ignore")
    env.update(runtime.env)
    return env


def worker_error(runtime: type[Runtime] | Runtime, returncode: int, stderr: str, model: str) -> NativeRunError:
    """The runtime's error (``runtime.error``) of a worker that exited with ``returncode``: the
    kind from the exit code, the message from its last error line in ``stderr``."""
    prefix = f"{runtime.tool}: error: "
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith(prefix)]
    msg = ours[-1][len(prefix):] if ours else (lines[-1] if lines else "")
    kind, msg = exit_failure(returncode, f"the {runtime.tool} worker", msg)
    msg = " ".join(msg.split())
    if model not in msg:
        msg = f"{model}: {msg}"
    return runtime.error(msg, kind=kind, returncode=returncode, model=model)


def forkable(runtime: type[Runtime]) -> Any:
    """The zygote's view of ``runtime``'s worker (:class:`pipelines.runners.forkable.Forkable`): a
    zygote imports ``runtime.shared`` once and forks :func:`main` of ``runtime`` per process."""
    from .forkable import Forkable

    return Forkable(f"the {runtime.framework} zygote", runtime.preload,
                    lambda argv: main(runtime(), argv, process_start="zygote"), env=dict(runtime.env),
                    jemalloc=runtime.jemalloc)


def _forks(runtime: type[Runtime] | Runtime) -> bool:
    return bool(runtime.shared)


def run_worker(runtime: type[Runtime] | Runtime, model: str | os.PathLike, *, cpus: str | Iterable[int] | None = None,
               threads: int = 1, mode: str = "e2e", warmup: int = 5, runs: int = 50, overhead_pairs: int = 0,
               input_shapes: Sequence[Sequence[int]] | None = None, records_path: str | os.PathLike | None = None,
               trace_path: str | os.PathLike | None = None, timeout: float | None = DEFAULT_TIMEOUT,
               extra: Sequence[str] = (), python: str | None = None, fork: bool = True) -> NativeRun:
    """Runs ``runtime``'s worker once in a fresh process (killed after ``timeout`` seconds) and
    returns its records; raises ``runtime.error`` (a NativeRunError, one line naming the model).
    The process is forked by the runtime's zygote (:mod:`.zygote`) when the runtime has
    ``shared`` imports and ``fork`` is true, else a fresh interpreter; the records' ``argv`` is the
    program's command either way, and a forked run's ``outside_cpu_s`` is the child's CPU time
    (the child is the zygote's, so this process's getrusage cannot see it)."""
    from .zygote import ZygoteError, zygote

    model = str(model)
    err = runtime.error
    cpu_s = None
    with tempfile.TemporaryDirectory(prefix=f"{runtime.tool}-") as tmp:
        rec = Path(records_path) if records_path is not None else Path(tmp) / "records.jsonl"
        kw = dict(records=rec, trace=trace_path, cpus=cpus, threads=threads, mode=mode, warmup=warmup, runs=runs,
                  overhead_pairs=overhead_pairs, input_shapes=input_shapes, extra=extra)
        argv = build_argv(runtime, model, python=python, **kw)
        try:
            if fork and _forks(runtime):
                stderr_path = Path(tmp) / "stderr.txt"
                try:
                    returncode, cpu_s = zygote(runtime.program, python).run(worker_args(model, **kw), stderr_path,
                                                                            timeout)
                except ZygoteError as e:
                    raise err(f"{model}: {e}", kind="crashed", model=model) from None
                stderr = stderr_path.read_text(errors="replace") if stderr_path.is_file() else ""
            else:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=worker_env(runtime))
                returncode, stderr = proc.returncode, proc.stderr or ""
        except subprocess.TimeoutExpired:
            raise err(f"{model}: the {runtime.tool} worker timed out after {timeout} s", kind="timeout",
                      model=model) from None
        if returncode != 0:
            raise worker_error(runtime, returncode, stderr, model)
        try:
            records = read_records(rec)
        except FileNotFoundError:
            raise err(f"{model}: the {runtime.tool} worker wrote no records", kind="output", model=model) from None
        except NativeRunError as e:
            raise err(f"{model}: {e}", kind="output", model=model) from None
    run = native_run(records, records_path, trace_path, argv)
    if cpu_s is not None:
        run.outside_cpu_s = cpu_s
    return run


def launcher(runtime: type[Runtime]) -> Callable[..., NativeRun]:
    """The runner's ``launch`` (pipelines/runners/__init__.py) for a runtime on this worker: one
    process of ``scenario`` as the host device runs it, the worker with the scenario's threads
    pinned to ``cpus`` (``engine`` is PyTorch's: not used)."""
    def launch(artifact: str | os.PathLike, *, scenario: Any, cpus: list[int] | None, mode: str = "e2e",
               warmup: int = 5, runs: int = 50, overhead_pairs: int = 0, records_path: str | os.PathLike,
               trace_path: str | os.PathLike | None = None, timeout: float | None = None,
               engine: str | None = None) -> NativeRun:
        return run_worker(runtime, artifact, cpus=cpus, threads=scenario.threads, mode=mode, warmup=warmup,
                          runs=runs, overhead_pairs=overhead_pairs, records_path=records_path,
                          trace_path=trace_path, timeout=timeout)

    return launch
