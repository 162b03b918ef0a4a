"""PyTorch runtime runner: TorchScript (``.pt``) and lite-interpreter (``.ptl``) artifacts, fp32 and int8.

Two halves, which mirror ``latbench-run`` (same records, trace layout and exit codes):

- the **worker**, ``python -m pipelines.runners.torch --model M.pt --cpus 0,1 --threads N
  --mode e2e|op ...``, one fresh process per scenario. Its ``main`` pins the process *before*
  torch is imported (this module imports nothing of torch at module level), so every thread
  torch creates later inherits the CPU set; it keeps one inter-op thread (the traced artifacts
  never fork), times the forward call only and writes its records after the last run;
- the **parent** side: the worker's command line (:func:`worker_args`, :func:`build_argv`) and
  what a failed worker said (:func:`worker_error`: a :class:`TorchRunError`, one line naming the
  model file). The torch zygote (:mod:`.torch_zygote`, on jemalloc: :mod:`.allocator`) forks the
  worker's processes and holds the parent API ``run_torch`` and the registry's ``launch``, which
  return a :class:`pipelines.runners.records.NativeRun`.

In op mode torch.profiler's events (CLOCK_REALTIME) are aligned to CLOCK_MONOTONIC from
bracketed clock reads before and after profiling, and assigned to the timed runs. docs/measure.md
(*The PyTorch worker*) has the flags, the record fields, the clock alignment, the trace and the
exit codes.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from foundation.atomic import write_text

# NB: no torch import at module level: main() pins the CPUs before torch exists.
from . import allocator
from .process import cpus_arg, exit_failure
from .records import NativeRunError
from .worker import (EXIT_CPUS, EXIT_INVALID, EXIT_MISSING, EXIT_OK, EXIT_OUTPUT, EXIT_RUNTIME, EXIT_USAGE, MODES,
                     WorkerFail, clock_offset, median_or_zero, model_of, pin, realtime_alignment, write_trace)
from .worker import affinity_fields as _affinity_fields
from .worker import page_faults as _faults

TOOL = "latbench-torch"
VERSION = "0.1.0"
ENGINES = ("x86", "qnnpack")
KINDS = {".pt": "torchscript", ".ptl": "torchscript-lite"}
ERROR_PREFIX = f"{TOOL}: error: "



class TorchRunError(NativeRunError):
    """The torch worker failed; ``str(err)`` is one line naming the model file."""


_Fail = WorkerFail  # a failure with the worker's exit code


# ---------------------------------------------------------------- helpers (torch-free)
def _input_shapes(model: Path, given: list[str] | None) -> list[list[int]]:
    if given:
        try:
            shapes = [[int(v) for v in s.replace("x", ",").split(",") if v.strip()] for s in given]
        except ValueError:
            raise _Fail(EXIT_USAGE, f"{model}: bad --input-shape {given!r} (want e.g. 1,3,32,32)") from None
        if any(not s or min(s) <= 0 for s in shapes):
            raise _Fail(EXIT_USAGE, f"{model}: bad --input-shape {given!r} (want e.g. 1,3,32,32)")
        return shapes
    sidecar = model.parent / f"{model.stem}.facts.json"  # written by the export stage
    if sidecar.is_file():
        try:
            facts = json.loads(sidecar.read_text())
            return [list(map(int, i["shape"])) for i in facts["inputs"]]
        except (ValueError, KeyError, TypeError):
            pass
    raise _Fail(EXIT_USAGE, f"{model}: input shape unknown (no {sidecar.name} beside it): pass --input-shape")


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, our exit code (argparse would exit 2 with a usage block)
        raise _ArgError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog=TOOL, description="Times a TorchScript (.pt) or lite (.ptl) artifact "
                                "in this process, pinned before torch is imported (see the module docstring).")
    p.add_argument("--model", required=True, help="the .pt or .ptl file")
    p.add_argument("--records", required=True, help='JSON-lines records ("-": stdout)')
    p.add_argument("--trace", help="Chrome-trace JSON timeline (tracks runs, ops, kernels, runtime)")
    p.add_argument("--cpus", help="CPUs to pin the process to, e.g. 0,1 or 0-3 (default: all allowed now)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1)")
    p.add_argument("--mode", default="e2e", help="e2e (no profiler) or op (torch.profiler, one op record per operator)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--engine", help="quantized engine: x86 or qnnpack (int8 artifacts need the one they were made for; "
                                    "default: torch's default)")
    p.add_argument("--input-shape", action="append", help="input shape, e.g. 1,3,32,32 (once per input; default: "
                                                          "from <stem>.facts.json beside the model)")
    return p


def main(argv: Sequence[str] | None = None, process_start: str = "exec") -> int:
    """The worker. ``process_start``: how this process began, kept in the meta record: "exec"
    (a fresh interpreter, this module run as a program) or "zygote" (forked by
    :mod:`.torch_zygote`, torch already imported, no thread yet)."""
    t_start = time.monotonic_ns()
    wall_start = time.time_ns()
    parser = _parser()
    raw = list(sys.argv[1:] if argv is None else argv)
    model_arg = model_of(raw)
    try:
        try:
            args = parser.parse_args(argv)
        except _ArgError as e:
            raise _Fail(EXIT_USAGE, str(e)) from None
        model_arg = args.model
        # 1. pin first: torch has made no thread yet (not imported, or imported by the zygote
        # that forked this process), so every thread it makes inherits the set
        cpus = pin(args.cpus, model_arg)
        return _run(args, cpus, t_start, wall_start, process_start)
    except _Fail as e:
        msg = " ".join(str(e).split())
        if model_arg not in msg:
            msg = f"{model_arg}: {msg}"
        print(ERROR_PREFIX + msg, file=sys.stderr, flush=True)
        return e.code


def _check_args(args, model: Path) -> None:
    if args.mode not in MODES:
        raise _Fail(EXIT_USAGE, f"{model}: unknown mode {args.mode!r} (known: {', '.join(MODES)})")
    if args.threads < 1 or args.warmup < 0 or args.runs < 1:
        raise _Fail(EXIT_USAGE, f"{model}: need --threads >= 1, --warmup >= 0, --runs >= 1")
    if args.engine is not None and args.engine not in ENGINES:
        raise _Fail(EXIT_USAGE, f"{model}: unknown engine {args.engine!r} (known: {', '.join(ENGINES)})")
    if not model.exists():
        raise _Fail(EXIT_MISSING, f"{model}: model file not found")
    if not model.is_file() or not os.access(model, os.R_OK):
        raise _Fail(EXIT_MISSING, f"{model}: model file is not a readable file")
    if model.suffix not in KINDS:
        raise _Fail(EXIT_INVALID, f"{model}: not a TorchScript (.pt) or lite-interpreter (.ptl) file")


def _run(args, cpus: list[int], t_start: int, wall_start: int, process_start: str) -> int:
    model = Path(args.model)
    _check_args(args, model)
    from generators.importers.common import UnsupportedModelError, check_zip

    try:  # the artifact is a zip archive: its directory is held to foundation/limits.py before torch inflates it
        check_zip(model)
    except UnsupportedModelError as e:
        raise _Fail(EXIT_INVALID, str(e)) from None
    shapes = _input_shapes(model, args.input_shape)
    kind = KINDS[model.suffix]

    # 2. torch, after the pinning
    import warnings

    import torch

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    if args.engine is not None:
        if args.engine not in torch.backends.quantized.supported_engines:
            raise _Fail(EXIT_USAGE, f"{model}: engine {args.engine!r} is not supported by this torch build "
                                    f"(supported: {', '.join(torch.backends.quantized.supported_engines)})")
        torch.backends.quantized.engine = args.engine  # before loading: int8 weights are packed at load
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if kind == "torchscript-lite":
                from torch.jit.mobile import _export_operator_list, _load_for_lite_interpreter

                module = _load_for_lite_interpreter(str(model))
                opnames = sorted(_export_operator_list(module))
            else:
                module = torch.jit.load(str(model), map_location="cpu").eval()
                opnames = sorted(torch.jit.export_opnames(module))
    except Exception as e:  # torch raises RuntimeError / ValueError with multi-line text
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        raise _Fail(EXIT_INVALID, f"{model}: not a loadable {kind} artifact: {first[:300]}") from None
    precision = "int8" if any(n.startswith("quantized::") for n in opnames) else "fp32"

    gen = torch.Generator().manual_seed(0)
    inputs = tuple(torch.randn(*s, generator=gen) for s in shapes)
    forward = module.forward if kind == "torchscript" else module  # lite module: __call__ runs forward

    profiling = args.mode == "op"
    n_total = args.warmup + args.runs
    starts = [0] * n_total
    ends = [0] * n_total
    affinity = None
    prof = None
    align_start = align_end = None
    mono = time.monotonic_ns

    faults_at_timed = 0

    def one(i: int) -> None:
        nonlocal affinity, faults_at_timed
        if i == args.warmup:  # outside the timed window
            faults_at_timed = _faults()
        x = inputs
        t0 = mono()
        forward(*x)
        t1 = mono()
        starts[i], ends[i] = t0, t1
        if i == 0:  # after the first run: every thread torch made so far exists
            affinity = _affinity_fields(cpus)

    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if profiling:
                from torch.profiler import ProfilerActivity, profile

                prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
                align_start = clock_offset()
                prof.__enter__()
                try:
                    for i in range(n_total):
                        one(i)
                finally:
                    prof.__exit__(None, None, None)
                align_end = clock_offset()
            else:
                for i in range(n_total):
                    one(i)
    except _Fail:
        raise
    except Exception as e:
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        raise _Fail(EXIT_RUNTIME, f"{model}: the model failed to run: {first[:300]}") from None

    page_faults_per_run = (_faults() - faults_at_timed) / args.runs
    # 3. records, all after the runs
    runs = []
    for i in range(n_total):
        timed = i >= args.warmup
        runs.append({"type": "run", "phase": "timed" if timed else "warmup",
                     "run": i - args.warmup if timed else i, "start_ns": starts[i], "end_ns": ends[i],
                     "duration_ns": ends[i] - starts[i], "profiled": profiling})
    timed_runs = runs[args.warmup:]
    ops: list[dict[str, Any]] = []
    spans: list[dict[str, Any]] = []
    n_events = 0
    alignment = None
    if profiling:
        alignment = realtime_alignment(align_start, align_end, "CLOCK_REALTIME (torch.profiler / Kineto)")
        offset = alignment["offset_ns"]
        ops, spans, n_events = _profiler_ops(prof, offset, runs)
    final_aff, bad_final = _affinity_fields(cpus)
    if affinity is None:
        affinity = (final_aff, bad_final)
    first_aff, bad_first = affinity

    meta = {"type": "meta", "tool": TOOL, "tool_version": VERSION, "framework": "pytorch", "runtime": "torch",
            "runtime_version": torch.__version__, "model": str(model), "model_bytes": model.stat().st_size,
            "model_kind": kind, "format": kind, "precision": precision, "engine": torch.backends.quantized.engine,
            "engine_requested": args.engine, "operators": opnames, "input_shapes": shapes, "cpus": cpus,
            "threads": torch.get_num_threads(), "threads_requested": args.threads,
            "interop_threads": torch.get_num_interop_threads(), "mode": args.mode, "profiling": profiling,
            "warmup": args.warmup, "runs": args.runs, "hostname": socket.gethostname(), "pid": os.getpid(),
            "clock": "CLOCK_MONOTONIC", "clock_resolution_ns": int(time.clock_getres(time.CLOCK_MONOTONIC) * 1e9),
            "start_unix_ns": wall_start, "process_start": process_start, "affinity_read": "after the first run",
            "allocator": allocator.in_use(),
            **first_aff}
    if alignment:
        meta["clock_alignment"] = alignment
    durs = [r["duration_ns"] for r in timed_runs]
    per_run: dict[int, list[int]] = {}
    for o in ops:
        per_run.setdefault(o["run"], []).append(o["duration_ns"])
    op_sums = [sum(per_run.get(r["run"], [])) for r in timed_runs] if profiling else []
    end = {"type": "end", "timed_runs": args.runs, "median_run_ns": median_or_zero(durs), "profiler_events": n_events,
           "ops": len(ops),
           "ops_per_run": sorted({len(per_run.get(r["run"], [])) for r in timed_runs}) if profiling else [],
           "median_op_sum_ns": median_or_zero(op_sums) if profiling else None,
           "op_sum_ratio": median_or_zero([s / d for s, d in zip(op_sums, durs) if d > 0]) if profiling else None,
           "page_faults_per_run": page_faults_per_run,
           "elapsed_ns": time.monotonic_ns() - t_start, **final_aff}
    records = [meta, *runs, *ops, *spans, end]
    try:
        text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
        if args.records == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            write_text(args.records, text)
        if args.trace:
            write_trace(args.trace, records, t_start, f"{TOOL} {model.name}")
    except OSError as e:
        raise _Fail(EXIT_OUTPUT, f"{model}: cannot write {e.filename or 'output'}: {e.strerror}") from None
    bad = bad_first or bad_final
    if bad:
        raise _Fail(EXIT_CPUS, f"{model}: {bad} ran outside the requested CPU set {','.join(map(str, cpus))}")
    return EXIT_OK


def _profiler_ops(prof, offset_ns: int, all_runs: list[dict[str, Any]]):
    """Op and runtime records of the timed runs from a finished torch.profiler session."""
    base = prof.profiler.kineto_results.trace_start_ns()  # FunctionEvent times are us relative to this
    events = list(prof.events())

    def mono_ns(us: float) -> int:
        return base + int(round(us * 1000.0)) - offset_ns

    # the calling thread: the one with the forward spans / the most top-level events
    top = [e for e in events if e.cpu_parent is None]
    main_thread = None
    fw = [e for e in top if e.name == "forward"]
    if fw:
        main_thread = fw[0].thread
    elif top:
        counts: dict[int, int] = {}
        for e in top:
            counts[e.thread] = counts.get(e.thread, 0) + 1
        main_thread = max(counts, key=counts.get)
    op_events, span_events = [], []
    for e in top:
        if e.thread != main_thread:
            continue
        if e.name == "forward":  # TorchScript: the module call; its children are the operators
            span_events.append(e)
            op_events.extend(c for c in e.cpu_children)
        else:  # lite interpreter: operators at the top level
            op_events.append(e)
    # every run's window (warm-ups included); an event belongs to the window holding its
    # midpoint, else to the nearest one; events of warm-up runs are dropped
    windows = [(r["start_ns"], r["end_ns"], r["run"] if r["phase"] == "timed" else None) for r in all_runs]

    def run_of(start: int, end: int) -> int | None:
        mid = (start + end) // 2
        best, dist = None, None
        for a, b, run in windows:
            d = 0 if a <= mid <= b else min(abs(mid - a), abs(mid - b))
            if dist is None or d < dist:
                best, dist = run, d
        return best

    def collect(evts, kind: str) -> list[dict[str, Any]]:
        out, order = [], {}
        for e in sorted(evts, key=lambda e: e.time_range.start):
            s, t = mono_ns(e.time_range.start), mono_ns(e.time_range.end)
            run = run_of(s, t)
            if run is None:
                continue
            k = order.get(run, 0)
            order[run] = k + 1
            rec = {"type": kind, "run": run, "order": k}
            if kind == "op":
                rec.update({"node": k, "subgraph": 0})
            rec.update({"name": e.name, "start_ns": s, "duration_ns": t - s})
            if kind == "op":
                rec["input_shapes"] = e.input_shapes
                rec["thread"] = e.thread
            out.append(rec)
        return out

    ops = collect(op_events, "op")
    spans = collect(span_events, "runtime")
    return ops, spans, len(events)


# ---------------------------------------------------------------- for the parent: the command line and errors
PROGRAM = ("-m", "pipelines.runners.torch")  # after the interpreter: the worker run as a program


def worker_args(model: str | os.PathLike, *, records: str | os.PathLike, trace: str | os.PathLike | None = None,
                cpus: str | Iterable[int] | None = None, threads: int = 1, mode: str = "e2e", warmup: int = 5,
                runs: int = 50, engine: str | None = None,
                input_shapes: Sequence[Sequence[int]] | None = None) -> list[str]:
    """The worker's own arguments (what its ``main`` parses), for the zygote or the program."""
    args = ["--model", str(model), "--records", str(records), "--threads", str(threads), "--mode", mode,
            "--warmup", str(warmup), "--runs", str(runs)]
    if trace is not None:
        args += ["--trace", str(trace)]
    cpu_list = cpus_arg(cpus)
    if cpu_list is not None:
        args += ["--cpus", cpu_list]
    if engine is not None:
        args += ["--engine", engine]
    for shape in input_shapes or ():
        args += ["--input-shape", ",".join(str(int(v)) for v in shape)]
    return args


def program_argv(args: Sequence[str], python: str | None = None) -> list[str]:
    """The command running the worker with ``args`` (:func:`worker_args`) as a fresh interpreter."""
    return [python or sys.executable, *PROGRAM, *args]


def build_argv(model: str | os.PathLike, *, python: str | None = None, **kw: Any) -> list[str]:
    """The command running the worker as a fresh interpreter (``kw``: :func:`worker_args`'s)."""
    return program_argv(worker_args(model, **kw), python)


def worker_error(returncode: int, stderr: str, model: str) -> TorchRunError:
    """The :class:`TorchRunError` of a worker that exited with ``returncode`` (the kind from
    its exit code, the message from its last error line in ``stderr``)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith(ERROR_PREFIX)]
    msg = ours[-1][len(ERROR_PREFIX):] if ours else (lines[-1] if lines else "")
    kind, msg = exit_failure(returncode, "the torch worker", msg)
    msg = " ".join(msg.split())
    if model not in msg:
        msg = f"{model}: {msg}"
    return TorchRunError(msg, kind=kind, returncode=returncode, model=model)


if __name__ == "__main__":
    sys.exit(main())
