"""The ExecuTorch runner: ``.pte`` programs on ExecuTorch's CPU runtime with the XNNPACK delegate, fp32 and int8.

Its measuring process is the shared Python worker (:mod:`.worker`) with :class:`EtRuntime`,
``python -m pipelines.runners.executorch --model M.pte --cpus 0 --threads 1 --mode e2e|op|kernel ...``:
pinned before executorch is imported (this module imports nothing of it at module level). The
program is loaded with ``executorch.runtime.Runtime.get().load_program`` and its ``forward``
method executed on inputs made once (the program's fixed shapes; a ``--input-shape`` or
``<stem>.facts.json`` that differs is refused; the timed call is the method's execute alone). Threads:
``_unsafe_reset_threadpool(--threads)`` sizes ExecuTorch's threadpool (the pthreadpool the
XNNPACK delegate computes on: the main thread and threads - 1 workers) before the program loads.
:func:`read_program` reads the file first (its size bounded by foundation/limits.py, the
``ET12`` identifier, the operators of its execution plan, the delegates, the XNNPACK graphs' value
types): ``precision`` is int8 when an XNNPACK graph holds quantized values, fp16 when it holds
half values, else fp32.

e2e mode loads the program without ETDump: no profiling code runs. op and kernel modes load it
with ETDump on (no debug buffer); after the last run the ETDump is written once and read with
:func:`pipelines.runners.etdump.read_etdump`. Its clock counts from the runtime's start, so it
is aligned to CLOCK_MONOTONIC by the ``Method::execute`` spans: each must lie inside the
worker's own window of its run, and the offset is the middle of the interval every run allows
(``meta.clock_alignment``). Op records are the portable kernels' events (what the XNNPACK
delegate does not run; ``call``: the instruction's position in the run); kernel mode records
them too, as op and as kernel (``source`` portable), and every XNNPACK operator as a kernel
(``source`` xnnpack, ``partition`` = the delegate call's ordinal in the run,
``index_in_partition``): XNNPACK's own duration in whole microseconds, its start synthesised by
the delegate. ``Method::execute`` and each delegate or operator call are runtime records. With
``--overhead-pairs`` a second program without ETDump alternates with the profiled one.

The parent side: :func:`run_executorch_worker` and :func:`launch` (the registry's) run the
worker in a fresh process and return a NativeRun, or raise :class:`EtRunError` (one line naming
the model). docs/measure.md (*The ExecuTorch worker*) has the fields.
"""
from __future__ import annotations

import argparse
import atexit
import os
import re
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

# NB: no executorch (nor torch) import at module level: the worker pins the CPUs first.
from . import worker
from .bare import bare_exir
from .records import NativeRun, NativeRunError
from .worker import EXIT_INVALID, EXIT_RUNTIME, EXIT_USAGE, Profile, WorkerFail, first_line

BACKEND = "XnnpackBackend"
METHOD = "forward"
FILE_IDENTIFIER = b"ET12"  # a .pte flatbuffer's identifier: bytes 4-7
# XNNPACK value types (backends/xnnpack/serialization/schema.fbs XNNDatatype) that make a program int8
INT8_TYPES = frozenset({"xnn_datatype_qint8", "xnn_datatype_quint8", "xnn_datatype_qcint8", "xnn_datatype_qdint8",
                        "xnn_datatype_qpint8"})
# ExecuTorch ScalarType codes of the inputs a worker can make -> torch dtype name
DTYPES = {6: "float32", 5: "float16", 7: "float64", 4: "int64", 3: "int32", 1: "int8", 0: "uint8", 11: "bool"}


class EtRunError(NativeRunError):
    """The ExecuTorch worker failed; ``str(err)`` is one line naming the model file."""


class PteError(ValueError):
    """A ``.pte`` file :func:`read_program` cannot read; the message is one line naming the file."""


def detect_precision(datatypes: Iterable[str]) -> str:
    """int8 when an XNNPACK graph holds quantized 8-bit values, fp16 when it holds half values, else fp32."""
    types = set(datatypes)
    if types & INT8_TYPES:
        return "int8"
    return "fp16" if "xnn_datatype_fp16" in types else "fp32"


def _package_dir() -> Path:
    """executorch's folder, found without importing it (its backends' packages import the compiler)."""
    import importlib.util

    return Path(importlib.util.find_spec("executorch").submodule_search_locations[0])


def _xnnpack_datatypes(payload: bytes, where: str) -> set[str]:
    """The value types of one XNNPACK delegate payload (its flatbuffer decompiled by ExecuTorch's flatc)."""
    from executorch.exir._serialize._flatbuffer import _flatc_decompile

    if payload[4:8] == b"XH00":  # the XNNPACK header: the flatbuffer's offset and size
        off, size = int.from_bytes(payload[10:14], "little"), int.from_bytes(payload[14:18], "little")
        payload = payload[off:off + size]
    schema = _package_dir() / "backends" / "xnnpack" / "serialization" / "schema.fbs"
    with tempfile.TemporaryDirectory(prefix="latbench-pte-") as tmp:
        (Path(tmp) / "graph.bin").write_bytes(payload)
        try:
            _flatc_decompile(tmp, str(schema), str(Path(tmp) / "graph.bin"))
            text = (Path(tmp) / "graph.json").read_text()
        except Exception as e:
            raise PteError(f"{where}: an XNNPACK delegate payload is not readable ({first_line(e)})") from None
    return set(re.findall(r'"datatype":\s*"(\w+)"', text))


def read_program(path: str | os.PathLike) -> dict[str, Any]:
    """What a ``.pte`` file says of itself, read without running it: ``operators`` (the
    execution plan's, ``name.overload`` -> instructions calling it), ``delegates`` (backend id ->
    calls), ``instructions``, ``xnnpack_datatypes`` and ``precision`` (:func:`detect_precision`).
    The file's size is held to ``limits.MODEL_FILE_BYTES`` and its instructions to
    ``limits.GRAPH_NODES`` first; PteError (one line naming the file) when it is not a program."""
    from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program
    from executorch.exir._serialize._program import _get_extended_header
    from executorch.exir.schema import DataLocation

    from foundation import limits
    from generators.importers.common import UnsupportedModelError, read_model_file

    try:
        data = read_model_file(path, "ExecuTorch program")
    except UnsupportedModelError as e:
        raise PteError(str(e)) from None
    if data[4:8] != FILE_IDENTIFIER:
        raise PteError(f"{path}: not an ExecuTorch program (no {FILE_IDENTIFIER.decode()} file identifier)")
    header = _get_extended_header(data)
    size = header.program_size if header is not None and header.is_valid() else len(data)
    try:
        program = _flatbuffer_to_program(data[:size])
    except Exception as e:
        raise PteError(f"{path}: not a readable ExecuTorch program ({first_line(e)})") from None
    operators: Counter = Counter()
    delegates: Counter = Counter()
    types: set[str] = set()
    instructions = 0
    for plan in program.execution_plan:
        for chain in plan.chains:
            instructions += len(chain.instructions)
            if instructions > limits.GRAPH_NODES:
                raise PteError(f"{path}: more than {limits.GRAPH_NODES} instructions (limits.GRAPH_NODES); not read")
            for ins in chain.instructions:
                args = ins.instr_args
                if hasattr(args, "op_index"):
                    op = plan.operators[args.op_index]
                    operators[f"{op.name}.{op.overload}" if op.overload else op.name] += 1
                elif hasattr(args, "delegate_index"):
                    delegates[plan.delegates[args.delegate_index].id] += 1
        for d in plan.delegates:
            if d.id != BACKEND:
                continue
            if d.processed.location == DataLocation.INLINE:
                payload = bytes(program.backend_delegate_data[d.processed.index].data)
            elif header is not None and header.is_valid():
                seg = program.segments[d.processed.index]
                payload = data[header.segment_base_offset + seg.offset:header.segment_base_offset + seg.offset + seg.size]
            else:
                raise PteError(f"{path}: an XNNPACK delegate's data is in a segment the file does not hold")
            types |= _xnnpack_datatypes(payload, str(path))
    if not program.execution_plan:
        raise PteError(f"{path}: not an ExecuTorch program (no execution plan)")
    return {"operators": dict(sorted(operators.items())), "delegates": dict(sorted(delegates.items())),
            "instructions": instructions, "xnnpack_datatypes": sorted(types), "precision": detect_precision(types),
            "methods": [p.name for p in program.execution_plan]}


def align_offset(executions: list[dict[str, Any]], windows: list[tuple[int, int]]) -> tuple[int, int]:
    """(offset, slack) mapping ETDump times to CLOCK_MONOTONIC: every ``Method::execute`` span
    plus the offset lies inside its run's ``(start_ns, end_ns)`` window; ``offset`` is the middle
    of the interval all runs allow, ``slack`` its width. ValueError when no offset fits them all."""
    lo = max(w0 - e["start_ns"] for e, (w0, _) in zip(executions, windows))
    hi = min(w1 - e["start_ns"] - e["duration_ns"] for e, (_, w1) in zip(executions, windows))
    if lo > hi:
        raise ValueError(f"no one offset puts every Method::execute span inside its run ({lo - hi} ns apart)")
    return (lo + hi) // 2, hi - lo


class EtRuntime(worker.Runtime):
    """ExecuTorch in the worker (see the module docstring)."""

    tool = "latbench-executorch"
    framework = "executorch"
    program = "pipelines.runners.executorch"
    description = ("Times an ExecuTorch program (.pte, XNNPACK delegate) on the CPU in this process, pinned before "
                   "executorch is imported (see pipelines/runners/executorch.py).")
    modes = ("e2e", "op", "kernel")
    kinds = {".pte": "pte"}
    error = EtRunError
    # numpy's OpenBLAS would start an idle pool thread at import; ExecuTorch never computes on it
    env = {"OPENBLAS_NUM_THREADS": "1"}
    # none starts a thread (ExecuTorch's threadpool is sized, and its threads made, in load)
    shared = ("torch", "executorch.extension.pybindings.portable_lib", "executorch.runtime",
              "executorch.exir._serialize._flatbuffer_program", "executorch.exir._serialize._program")

    @classmethod
    def preload(cls) -> dict[str, str]:
        bare_exir()  # the runtime without the compiler (see bare_exir)
        return super().preload()

    def start(self, args: argparse.Namespace) -> None:
        self.preload()  # the shared imports, exir bare (a zygote's child has them: nothing to do)
        import torch
        from executorch.extension.pybindings import portable_lib
        from executorch.runtime import Runtime

        self.torch, self.pl = torch, portable_lib
        self.rt = Runtime.get()

    # -------- loading
    def _load(self, model: Path, etdump: bool) -> tuple[Any, Any]:
        try:
            prog = self.rt.load_program(model, enable_etdump=etdump)
            method = prog.load_method(self.method_name)
        except Exception as e:
            raise WorkerFail(EXIT_INVALID, f"{model}: ExecuTorch cannot load it: {first_line(e)}") from None
        if method is None:
            raise WorkerFail(EXIT_INVALID, f"{model}: ExecuTorch cannot load its method {self.method_name!r}")
        return prog, method  # the program is kept: a method outliving it reads freed memory

    def _inputs(self, model: Path, meta: Any, given: list[list[int]] | None) -> None:
        torch = self.torch
        n = meta.num_inputs()
        if given is None:  # the shapes beside it (the export stage's, or the profile's --shape): checked
            given = worker.sidecar_shapes(model)
        if given is not None and len(given) != n:
            raise WorkerFail(EXIT_USAGE, f"{model}: {len(given)} --input-shape for {n} inputs")
        gen = torch.Generator().manual_seed(0)
        self.inputs = []
        for k in range(n):
            info = meta.input_tensor_meta(k)
            shape = [int(d) for d in info.sizes()]
            if given is not None and given[k] != shape:  # a program's shapes are fixed at export
                raise WorkerFail(EXIT_USAGE, f"{model}: input shape {given[k]} does not fit input {k} {shape} "
                                             "(an ExecuTorch program's input shapes are fixed at export)")
            code = int(info.dtype())
            if code not in DTYPES:
                raise WorkerFail(EXIT_INVALID, f"{model}: input {k} of ScalarType {code} (the worker makes "
                                               f"{', '.join(DTYPES.values())})")
            dtype = getattr(torch, DTYPES[code])
            self.inputs.append(torch.randn(shape, generator=gen).to(dtype) if dtype.is_floating_point
                               else torch.zeros(shape, dtype=dtype))

    def load(self, model: Path, args: argparse.Namespace, input_shapes: list[list[int]] | None, profiling: bool,
             plain: bool) -> None:
        try:
            self.facts = read_program(model)
        except PteError as e:
            raise WorkerFail(EXIT_INVALID, str(e)) from None
        self.method_name = METHOD if METHOD in self.facts["methods"] else self.facts["methods"][0]
        if not self.rt.backend_registry.is_available(BACKEND):
            raise WorkerFail(EXIT_RUNTIME, f"{model}: this ExecuTorch has no {BACKEND}")
        self.threads = args.threads
        self.pl._unsafe_reset_threadpool(args.threads)  # before the program: XNNPACK takes the pool at init
        self.pool_threads = int(self.pl._threadpool_get_thread_count())
        if self.pool_threads != args.threads:
            raise WorkerFail(EXIT_RUNTIME, f"{model}: ExecuTorch's threadpool has {self.pool_threads} threads, "
                                           f"asked for {args.threads}")
        self.profiling, self.mode = profiling, args.mode
        self.prog, self.method = self._load(model, profiling)
        self._inputs(model, self.method.metadata, input_shapes)
        self._call = self.method._method  # the bound ExecuTorchMethod: one Python frame less per run
        self.plain_prog, self.plain_method = self._load(model, False) if plain else (None, None)
        self._plain_call = self.plain_method._method if plain else None
        if profiling:
            self._tmp = tempfile.mkdtemp(prefix="latbench-etdump-")
            atexit.register(shutil.rmtree, self._tmp, True)  # the ETDump, however the process ends

    # -------- running
    def run(self) -> None:
        self._call(self.inputs)

    def run_plain(self) -> None:
        self._plain_call(self.inputs)

    def profile(self, runs: list[dict[str, Any]] | None = None) -> Profile:
        from .etdump import EtdumpError, read_etdump, write_etdump

        try:
            dump = read_etdump(write_etdump(self.prog, Path(self._tmp) / "run.etdump"))
        except EtdumpError as e:
            raise WorkerFail(EXIT_RUNTIME, str(e)) from None
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)
        ex = dump["executions"]
        profiled = sorted((r for r in runs or [] if r["profiled"]), key=lambda r: r["start_ns"])
        if len(ex) != len(profiled):
            raise WorkerFail(EXIT_RUNTIME, f"the ETDump holds {len(ex)} executions for {len(profiled)} profiled runs")
        try:
            offset, slack = align_offset(ex, [(r["start_ns"], r["end_ns"]) for r in profiled])
        except ValueError as e:
            raise WorkerFail(EXIT_RUNTIME, f"the ETDump's clock: {e}") from None
        align = {"profiler_clock": "ExecuTorch's runtime clock (steady_clock ns since the runtime started)",
                 "method": "offset = middle of the interval that puts every Method::execute span inside the "
                           "worker's CLOCK_MONOTONIC window of its run; monotonic_ns = profiler_ns + offset",
                 "offset_ns": offset, "slack_ns": slack, "executions": len(ex)}
        events: list[dict[str, Any]] = []
        for e in ex:
            events.append({"type": "runtime", "name": "Method::execute", "start_ns": e["start_ns"] + offset,
                           "duration_ns": e["duration_ns"]})
        ordinal: dict[tuple[int, int], int] = {}  # (run, call) -> the delegate call's ordinal in the run
        for c in dump["calls"]:
            name = "DELEGATE_CALL" if c["kind"] == "delegate" else "OPERATOR_CALL"
            if c["kind"] == "delegate":
                ordinal[(c["run"], c["call"])] = sum(k[0] == c["run"] for k in ordinal)
            events.append({"type": "runtime", "name": name, "call": c["call"], "start_ns": c["start_ns"] + offset,
                           "duration_ns": c["duration_ns"]})
        index: Counter = Counter()
        for e in dump["events"]:
            span = {"start_ns": e["start_ns"] + offset, "duration_ns": e["duration_ns"]}
            if e["kind"] == "portable":
                events.append({"type": "op", "name": e["name"], "call": e["call"], "source": "portable", **span})
                if self.mode == "kernel":
                    events.append({"type": "kernel", "name": e["name"], "call": e["call"], "source": "portable",
                                   **span})
            elif self.mode == "kernel":
                part = ordinal.get((e["run"], e["call"]))
                events.append({"type": "kernel", "name": e["name"], "source": "xnnpack", "partition": part,
                               "index_in_partition": index[(e["run"], part)], "call": e["call"],
                               "start": "synthesised by the delegate", **span})
                index[(e["run"], part)] += 1
        return Profile(events=events, alignment=align, count=len(ex) + len(dump["calls"]) + len(dump["events"]))

    def meta(self) -> dict[str, Any]:
        import executorch.version

        f = self.facts
        return {"runtime": "executorch", "runtime_version": executorch.version.__version__, "model_kind": "pte",
                "format": "executorch", "precision": f["precision"], "delegate": BACKEND,
                "delegate_calls": sum(f["delegates"].values()), "delegates": f["delegates"],
                "operators": f["operators"], "xnnpack_datatypes": f["xnnpack_datatypes"], "method": self.method_name,
                "input_shapes": [list(map(int, x.shape)) for x in self.inputs],
                "input_types": [str(x.dtype).removeprefix("torch.") for x in self.inputs], "threads": self.threads,
                "threadpool_threads": self.pool_threads, "interop_threads": 1, "etdump": self.profiling}


# ---------------------------------------------------------------- the parent side
def run_executorch_worker(model: str | os.PathLike, cpus: str | Iterable[int] | None = None, threads: int = 1,
                          mode: str = "e2e", warmup: int = 5, runs: int = 50, overhead_pairs: int = 0, *,
                          input_shapes: Sequence[Sequence[int]] | None = None,
                          records_path: str | os.PathLike | None = None,
                          trace_path: str | os.PathLike | None = None,
                          timeout: float | None = worker.DEFAULT_TIMEOUT) -> NativeRun:
    """Runs the ExecuTorch worker once in a fresh process and returns its records; raises
    :class:`EtRunError` (one line naming the model) on any failure."""
    return worker.run_worker(EtRuntime, model, cpus=cpus, threads=threads, mode=mode, warmup=warmup, runs=runs,
                             overhead_pairs=overhead_pairs, input_shapes=input_shapes, records_path=records_path,
                             trace_path=trace_path, timeout=timeout)


launch = worker.launcher(EtRuntime)  # the registry's launch


if __name__ == "__main__":
    sys.exit(worker.main(EtRuntime()))
