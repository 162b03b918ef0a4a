"""PyTorch runtime runner: TorchScript (``.pt``) and lite-interpreter (``.ptl``) artifacts, fp32 and int8.

Its measuring process is the shared Python worker (:mod:`.worker`) with :class:`TorchRuntime`,
``python -m pipelines.runners.torch --model M.pt --cpus 0,1 --threads N --mode e2e|op ...``
(``latbench-torch``): pinned before torch makes a thread (this module imports nothing of torch at
module level), one inter-op thread (the traced artifacts never fork), the forward call alone
timed, the records written after the last run. The archive is checked against
foundation/limits.py before torch inflates it; input shapes come from ``--input-shape`` or the
``<stem>.facts.json`` beside the model (a TorchScript file does not say them); ``--engine``
picks the quantized engine before an int8 model is loaded (its weights are packed at load).

In op mode torch.profiler runs around every run (it cannot pause for a plain twin, so op mode
takes no ``--overhead-pairs``); its events (CLOCK_REALTIME) are aligned to CLOCK_MONOTONIC from
bracketed clock reads before and after profiling. e2e mode measures the instrument's own
overhead like every worker.

The parent side: the torch zygote (:mod:`.torch_zygote`, on jemalloc: :mod:`.allocator`) forks
the worker's processes and holds ``run_torch`` and the registry's ``launch``; :func:`build_argv`
is the worker as a program. docs/measure.md (*The PyTorch worker*) has the flags, the record
fields, the clock alignment, the trace and the exit codes.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Any, ContextManager, Sequence

# NB: no torch import at module level: the worker pins the CPUs before torch exists.
from . import worker
from .records import NativeRunError
from .worker import EXIT_INVALID, EXIT_USAGE, Profile, WorkerFail, clock_offset, realtime_alignment

TOOL = "latbench-torch"
ENGINES = ("x86", "qnnpack")
KINDS = {".pt": "torchscript", ".ptl": "torchscript-lite"}
ERROR_PREFIX = f"{TOOL}: error: "


class TorchRunError(NativeRunError):
    """The torch worker failed; ``str(err)`` is one line naming the model file."""


class TorchRuntime(worker.Runtime):
    """PyTorch (TorchScript and the lite interpreter) in the worker (see the module docstring)."""

    tool = TOOL
    framework = "pytorch"
    program = "pipelines.runners.torch"
    description = ("Times a TorchScript (.pt) or lite (.ptl) artifact in this process, pinned before torch makes a "
                   "thread (see pipelines/runners/torch.py).")
    modes = ("e2e", "op")
    kinds = KINDS
    error = TorchRunError
    # numpy's OpenBLAS would start an idle pool thread at import (torch imports numpy); torch never
    # computes on it (its BLAS and convolutions are MKL's and oneDNN's, on its own intra-op pool)
    env = {"OPENBLAS_NUM_THREADS": "1"}
    shared = ("torch",)
    jemalloc = True  # freed pages kept: runs take no page faults (pipelines/runners/allocator.py)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--engine", help="quantized engine: x86 or qnnpack (int8 artifacts need the one they were "
                                             "made for; default: torch's default)")

    def check_args(self, args: argparse.Namespace, model: Path) -> None:
        if args.engine is not None and args.engine not in ENGINES:
            raise WorkerFail(EXIT_USAGE, f"{model}: unknown engine {args.engine!r} (known: {', '.join(ENGINES)})")
        if args.mode == "op" and args.overhead_pairs:
            raise WorkerFail(EXIT_USAGE, f"{model}: op mode takes no --overhead-pairs (torch.profiler runs around "
                                         "every run: no plain twin)")
        if model.is_file() and model.suffix in KINDS:
            from generators.importers.common import UnsupportedModelError, check_zip

            try:  # the artifact is a zip archive: its directory is held to foundation/limits.py before torch inflates it
                check_zip(model)
            except UnsupportedModelError as e:
                raise WorkerFail(EXIT_INVALID, str(e)) from None

    def start(self, args: argparse.Namespace) -> None:
        import torch

        self.torch = torch
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(1)

    def load(self, model: Path, args: argparse.Namespace, input_shapes: list[list[int]] | None, profiling: bool,
             plain: bool) -> None:
        import warnings

        torch = self.torch
        shapes = input_shapes or worker.sidecar_shapes(model)
        if not shapes:
            raise WorkerFail(EXIT_USAGE, f"{model}: input shape unknown (no {model.stem}.facts.json beside it): "
                                         "pass --input-shape")
        self.kind, self.engine_requested = KINDS[model.suffix], args.engine
        if args.engine is not None:
            if args.engine not in torch.backends.quantized.supported_engines:
                raise WorkerFail(EXIT_USAGE, f"{model}: engine {args.engine!r} is not supported by this torch build "
                                             f"(supported: {', '.join(torch.backends.quantized.supported_engines)})")
            torch.backends.quantized.engine = args.engine  # before loading: int8 weights are packed at load
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if self.kind == "torchscript-lite":
                    from torch.jit.mobile import _export_operator_list, _load_for_lite_interpreter

                    module = _load_for_lite_interpreter(str(model))
                    self.opnames = sorted(_export_operator_list(module))
                else:
                    module = torch.jit.load(str(model), map_location="cpu").eval()
                    self.opnames = sorted(torch.jit.export_opnames(module))
        except Exception as e:  # torch raises RuntimeError / ValueError with multi-line text
            raise WorkerFail(EXIT_INVALID, f"{model}: not a loadable {self.kind} artifact: "
                                           f"{worker.first_line(e)}") from None
        self.precision = "int8" if any(n.startswith("quantized::") for n in self.opnames) else "fp32"
        gen = torch.Generator().manual_seed(0)
        self.shapes = shapes
        self.inputs = tuple(torch.randn(*s, generator=gen) for s in shapes)
        self.forward = module.forward if self.kind == "torchscript" else module  # lite: __call__ runs forward
        self.profiling = profiling

    # -------- running
    @contextlib.contextmanager
    def _session(self):
        import warnings

        torch = self.torch
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if not self.profiling:
                yield
                return
            from torch.profiler import ProfilerActivity, profile

            self.prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
            self.align_start = clock_offset()
            self.prof.__enter__()
            try:
                yield
            finally:
                self.prof.__exit__(None, None, None)
                self.align_end = clock_offset()

    def runs(self) -> ContextManager[Any]:
        return self._session()

    def run(self) -> None:
        self.forward(*self.inputs)

    def profile(self, runs: list[dict[str, Any]] | None = None) -> Profile:
        alignment = realtime_alignment(self.align_start, self.align_end, "CLOCK_REALTIME (torch.profiler / Kineto)")
        events, count = profiler_events(self.prof, alignment["offset_ns"])
        return Profile(events=events, alignment=alignment, count=count)

    def meta(self) -> dict[str, Any]:
        torch = self.torch
        return {"runtime": "torch", "runtime_version": torch.__version__, "model_kind": self.kind,
                "format": self.kind, "precision": self.precision, "engine": torch.backends.quantized.engine,
                "engine_requested": self.engine_requested, "operators": self.opnames, "input_shapes": self.shapes,
                "threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads()}


def profiler_events(prof: Any, offset_ns: int) -> tuple[list[dict[str, Any]], int]:
    """The op and runtime events (CLOCK_MONOTONIC) of a finished torch.profiler session, and how
    many events it recorded: the calling thread's operators (a TorchScript ``forward``'s children,
    the lite interpreter's top-level events) and each ``forward`` span."""
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
    out = []
    for e in top:
        if e.thread != main_thread:
            continue
        parts = [("runtime", e), *(("op", c) for c in e.cpu_children)] if e.name == "forward" else [("op", e)]
        for kind, ev in parts:  # TorchScript: the module call, then its operators; lite: operators
            s, t = mono_ns(ev.time_range.start), mono_ns(ev.time_range.end)
            rec = {"type": kind, "name": ev.name, "start_ns": s, "duration_ns": t - s}
            if kind == "op":
                rec.update({"input_shapes": ev.input_shapes, "thread": ev.thread})
            out.append(rec)
    return out, len(events)


# ---------------------------------------------------------------- for the parent: the command line and errors
def main(argv: Sequence[str] | None = None, process_start: str = "exec") -> int:
    """The worker (:func:`pipelines.runners.worker.main` with :class:`TorchRuntime`).
    ``process_start``: "exec" (a fresh interpreter) or "zygote" (forked by :mod:`.torch_zygote`)."""
    return worker.main(TorchRuntime(), argv, process_start=process_start)


def worker_args(model: str | os.PathLike, *, engine: str | None = None, **kw: Any) -> list[str]:
    """The worker's own arguments (``kw``: :func:`pipelines.runners.worker.worker_args`'s), ``--engine`` added."""
    return worker.worker_args(model, extra=["--engine", engine] if engine is not None else [], **kw)


def build_argv(model: str | os.PathLike, *, python: str | None = None, engine: str | None = None,
               **kw: Any) -> list[str]:
    """The command running the worker as a fresh interpreter (``kw``: :func:`worker_args`'s)."""
    return [python or sys.executable, "-m", TorchRuntime.program, *worker_args(model, engine=engine, **kw)]


if __name__ == "__main__":
    sys.exit(main())
