"""The ONNX Runtime runner: ``.onnx`` files on ORT's CPU execution provider, fp32 and int8 (QDQ).

Its measuring process is the shared Python worker (:mod:`.worker`) with :class:`OrtRuntime`,
``python -m pipelines.runners.onnxruntime --model M.onnx --cpus 0 --threads 1 --mode e2e|op ...``:
pinned before onnxruntime is imported (this module imports nothing of it at module level). The
session is what a deployed app makes: CPUExecutionProvider only, ``intra_op_num_threads`` =
``--threads``, one inter-op thread, sequential execution, every graph optimization
(``ORT_ENABLE_ALL``: fusions and NCHWc layouts), inputs and outputs bound once (IOBinding), so the
timed call is ``run_with_iobinding`` alone. The model is checked against foundation/limits.py
(file size, node count) before ORT parses it.

Op mode enables ORT's profiler (a session option: it starts with the session). Its ``Node``
events become op records (name = the operator type ORT ran, ``node`` its node index,
``node_name``, ``provider``, input and output shapes), its ``model_run`` spans runtime records.
The profiler stamps CLOCK_REALTIME (``std::chrono::high_resolution_clock``) in whole
microseconds relative to its start; the start is checked to lie between two realtime reads around
the session's creation, and the events are mapped to CLOCK_MONOTONIC with the bracketed offsets
read before the session and after the profiler stops (``meta.clock_alignment``). With
``--overhead-pairs`` the process holds a second session without the profiler, and the two
alternate (the overhead record). docs/measure.md (*The ONNX Runtime worker*) has the fields.

The parent side: :func:`run_onnxruntime` and :func:`launch` (the registry's) run the worker in a
fresh process and return a NativeRun, or raise :class:`OrtRunError` (one line naming the model).
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

# NB: no onnxruntime (nor numpy) import at module level: the worker pins the CPUs first.
from . import worker
from .records import NativeRun, NativeRunError
from .worker import EXIT_INVALID, EXIT_RUNTIME, EXIT_USAGE, Profile, WorkerFail, first_line

PROVIDER = "CPUExecutionProvider"
# operator types of a quantized ONNX graph (QDQ, QOperator or integer formats)
INT8_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"})
# ONNX tensor element types of the inputs a worker can make: 'tensor(float)' -> numpy dtype name
DTYPES = {"float": "float32", "float16": "float16", "double": "float64", "int64": "int64", "int32": "int32",
          "int8": "int8", "uint8": "uint8", "bool": "bool"}


class OrtRunError(NativeRunError):
    """The ONNX Runtime worker failed; ``str(err)`` is one line naming the model file."""


def detect_precision(op_types: Iterable[str], float16: bool = False) -> str:
    """int8 when the graph quantizes (QDQ pairs, QLinear* or integer operators), fp16 when it
    holds float16 tensors, else fp32."""
    ops = set(op_types)
    if ops & INT8_OPS or any(o.startswith("QLinear") for o in ops):
        return "int8"
    return "fp16" if float16 else "fp32"


def _shape(type_shape: Any) -> list[int] | None:
    """The shape of one entry of a profiler event's ``input_type_shape`` (``{"float": [1, 3]}``)."""
    if isinstance(type_shape, dict) and len(type_shape) == 1:
        dims = next(iter(type_shape.values()))
        if isinstance(dims, list):
            return [int(d) for d in dims]
    return None


class OrtRuntime(worker.Runtime):
    """ONNX Runtime in the worker (see the module docstring)."""

    tool = "latbench-onnxruntime"
    framework = "onnxruntime"
    program = "pipelines.runners.onnxruntime"
    description = ("Times an ONNX model on ONNX Runtime's CPU execution provider in this process, pinned before "
                   "onnxruntime is imported (see pipelines/runners/onnxruntime.py).")
    kinds = {".onnx": "onnx"}
    error = OrtRunError
    # numpy's OpenBLAS would start an idle pool thread at import; ORT never computes on it
    env = {"OPENBLAS_NUM_THREADS": "1"}
    # what a zygote imports once: onnx reads the file's graph; onnxruntime itself starts a thread
    # at import, so each child imports it after pinning (start)
    shared = ("numpy", "onnx", "generators.importers.onnx")

    def start(self, args: argparse.Namespace) -> None:
        import numpy
        import onnxruntime

        self.np, self.ort = numpy, onnxruntime
        onnxruntime.set_default_logger_severity(3)  # errors only: its warnings are not ours to print

    # -------- loading
    def _read_graph(self, model: Path) -> None:
        """Op types, opset and tensor types from the file, its bounds checked first."""
        import onnx

        from generators.importers.common import UnsupportedModelError, check_graph_nodes, read_model_file
        from generators.importers.onnx import count_nodes

        try:
            data = read_model_file(model, "ONNX file")
            check_graph_nodes(count_nodes(data, str(model)), str(model))
            proto = onnx.load_model_from_string(data)
        except UnsupportedModelError as e:
            raise WorkerFail(EXIT_INVALID, str(e)) from None
        except Exception as e:  # DecodeError and friends
            raise WorkerFail(EXIT_INVALID, f"{model}: not a readable ONNX model: {first_line(e)}") from None
        g = proto.graph
        if proto.ir_version < 1 or not g.node:
            raise WorkerFail(EXIT_INVALID, f"{model}: not an ONNX model (no IR version or no graph nodes)")
        self.operators = dict(sorted(Counter(n.op_type for n in g.node).items()))
        self.opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=None)
        f16 = onnx.TensorProto.FLOAT16
        float16 = any(t.data_type == f16 for t in g.initializer) or any(
            v.type.tensor_type.elem_type == f16 for v in g.input)
        self.precision = detect_precision(self.operators, float16)

    def _options(self, threads: int, profile_prefix: str | None) -> Any:
        ort = self.ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        if profile_prefix is not None:
            so.enable_profiling = True
            so.profile_file_prefix = profile_prefix
        return so

    def _session(self, model: Path, so: Any) -> Any:
        try:
            sess = self.ort.InferenceSession(str(model), so, providers=[PROVIDER])
        except Exception as e:
            raise WorkerFail(EXIT_INVALID, f"{model}: ONNX Runtime cannot load it: {first_line(e)}") from None
        if sess.get_providers() != [PROVIDER]:
            raise WorkerFail(EXIT_RUNTIME, f"{model}: the session runs on {sess.get_providers()}, not {PROVIDER} alone")
        return sess

    def _inputs(self, model: Path, sess: Any, given: list[list[int]] | None) -> None:
        np = self.np
        declared = sess.get_inputs()
        if given is not None and len(given) != len(declared):
            raise WorkerFail(EXIT_USAGE, f"{model}: {len(given)} --input-shape for {len(declared)} inputs")
        if given is None and not all(isinstance(d, int) and d > 0 for inp in declared for d in inp.shape):
            given = worker.sidecar_shapes(model)  # free dimensions: the shapes beside it, if any
            if given is not None and len(given) != len(declared):
                given = None
        rng = np.random.default_rng(0)
        self.feeds: list[tuple[str, Any]] = []
        for k, inp in enumerate(declared):
            dims = list(inp.shape)
            if given is not None:
                shape = given[k]
                if len(shape) != len(dims) or any(isinstance(d, int) and d != s for d, s in zip(dims, shape)):
                    raise WorkerFail(EXIT_USAGE, f"{model}: --input-shape {shape} does not fit input {inp.name!r} "
                                                 f"{dims}")
            elif all(isinstance(d, int) and d > 0 for d in dims):
                shape = [int(d) for d in dims]
            else:
                raise WorkerFail(EXIT_USAGE, f"{model}: input {inp.name!r} has free dimensions {dims}: pass "
                                             f"--input-shape (or a {model.stem}.facts.json beside it)")
            elem = inp.type[len("tensor("):-1] if inp.type.startswith("tensor(") else inp.type
            if elem not in DTYPES:
                raise WorkerFail(EXIT_INVALID, f"{model}: input {inp.name!r} of type {inp.type} (the worker makes "
                                               f"{', '.join(DTYPES)})")
            dtype = np.dtype(DTYPES[elem])
            x = (rng.standard_normal(shape).astype(dtype) if dtype.kind == "f" else np.zeros(shape, dtype))
            self.feeds.append((inp.name, x))

    def _bind(self, sess: Any) -> Any:
        """An IOBinding of ``sess`` with the inputs and preallocated outputs (ORT allocates an
        output whose shape is not fixed in the file)."""
        ort, np = self.ort, self.np
        binding = sess.io_binding()
        keep = self._values  # the bound OrtValues live as long as the process
        for name, x in self.feeds:
            v = ort.OrtValue.ortvalue_from_numpy(x)
            keep.append(v)
            binding.bind_ortvalue_input(name, v)
        for out in sess.get_outputs():
            elem = out.type[len("tensor("):-1] if out.type.startswith("tensor(") else out.type
            if all(isinstance(d, int) and d > 0 for d in out.shape) and elem in DTYPES:
                v = ort.OrtValue.ortvalue_from_shape_and_type(list(out.shape), np.dtype(DTYPES[elem]))
                keep.append(v)
                binding.bind_ortvalue_output(out.name, v)
            else:
                binding.bind_output(out.name, "cpu")
        return binding

    def load(self, model: Path, args: argparse.Namespace, input_shapes: list[list[int]] | None, profiling: bool,
             plain: bool) -> None:
        self._read_graph(model)
        self.threads = args.threads
        self._tmp = tempfile.mkdtemp(prefix="latbench-ort-profile-") if profiling else None
        if profiling:
            atexit.register(shutil.rmtree, self._tmp, True)  # the profiler's file, however the process ends
            self._align_start = worker.clock_offset()
            rt0 = time.time_ns()
        self.sess = self._session(model, self._options(args.threads, os.path.join(self._tmp, "ort") if profiling
                                                       else None))
        if profiling:
            rt1 = time.time_ns()
            self._prof_start = int(self.sess.get_profiling_start_time_ns())
            if not rt0 <= self._prof_start <= rt1:
                raise WorkerFail(EXIT_RUNTIME, f"{model}: ORT's profiler start ({self._prof_start} ns) is not a "
                                               "CLOCK_REALTIME time read while the session was made")
        self._inputs(model, self.sess, input_shapes)
        self._values: list[Any] = []
        self.binding = self._bind(self.sess)
        self.plain_sess = self._session(model, self._options(args.threads, None)) if plain else None
        self.plain_binding = self._bind(self.plain_sess) if plain else None
        so = self.sess.get_session_options()
        self.session_options = {
            "intra_op_num_threads": so.intra_op_num_threads, "inter_op_num_threads": so.inter_op_num_threads,
            "execution_mode": str(so.execution_mode).rsplit(".", 1)[-1],
            "graph_optimization_level": str(so.graph_optimization_level).rsplit(".", 1)[-1],
            "enable_profiling": so.enable_profiling, "intra_op_spinning": "ORT's default (on)",
            "binding": "IOBinding: inputs and outputs bound once before the runs"}

    # -------- running
    def run(self) -> None:
        self.sess.run_with_iobinding(self.binding)

    def run_plain(self) -> None:
        self.plain_sess.run_with_iobinding(self.plain_binding)

    def profile(self, runs: list[dict[str, Any]] | None = None) -> Profile:
        path = self.sess.end_profiling()
        align = worker.realtime_alignment(self._align_start, worker.clock_offset(),
                                          "CLOCK_REALTIME (ORT profiler: std::chrono::high_resolution_clock, "
                                          "whole us after get_profiling_start_time_ns)")
        try:
            raw = json.loads(Path(path).read_text())
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)
        align["method"] += "; profiler_ns = profiling start + ts_us * 1000"
        base = self._prof_start - align["offset_ns"]
        events = []
        for e in raw:
            if e.get("ph") != "X":
                continue
            start, dur = base + int(e["ts"]) * 1000, int(e["dur"]) * 1000
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                a = e.get("args", {})
                events.append({"type": "op", "name": a.get("op_name", "?"), "node": int(a.get("node_index", -1)),
                               "node_name": e["name"][:-len("_kernel_time")], "provider": a.get("provider"),
                               "start_ns": start, "duration_ns": dur,
                               "input_shapes": [_shape(t) for t in a.get("input_type_shape", [])],
                               "output_shapes": [_shape(t) for t in a.get("output_type_shape", [])],
                               "thread": e.get("tid")})
            elif e.get("cat") == "Session" and e["name"] == "model_run":
                events.append({"type": "runtime", "name": "model_run", "start_ns": start, "duration_ns": dur})
        return Profile(events=events, alignment=align, count=len(raw))

    def meta(self) -> dict[str, Any]:
        return {"runtime": "onnxruntime", "runtime_version": self.ort.__version__, "model_kind": "onnx",
                "format": "onnx", "precision": self.precision, "operators": self.operators, "opset": self.opset,
                "input_shapes": [list(map(int, x.shape)) for _, x in self.feeds],
                "input_types": [str(x.dtype) for _, x in self.feeds], "threads": self.threads,
                "interop_threads": 1, "execution_providers": self.sess.get_providers(),
                "session_options": self.session_options}


# ---------------------------------------------------------------- the parent side
def run_onnxruntime(model: str | os.PathLike, cpus: str | Iterable[int] | None = None, threads: int = 1,
                    mode: str = "e2e", warmup: int = 5, runs: int = 50, overhead_pairs: int = 0, *,
                    input_shapes: Sequence[Sequence[int]] | None = None,
                    records_path: str | os.PathLike | None = None, trace_path: str | os.PathLike | None = None,
                    timeout: float | None = worker.DEFAULT_TIMEOUT) -> NativeRun:
    """Runs the ONNX Runtime worker once in a fresh process and returns its records; raises
    :class:`OrtRunError` (one line naming the model) on any failure."""
    return worker.run_worker(OrtRuntime, model, cpus=cpus, threads=threads, mode=mode, warmup=warmup, runs=runs,
                             overhead_pairs=overhead_pairs, input_shapes=input_shapes, records_path=records_path,
                             trace_path=trace_path, timeout=timeout)


launch = worker.launcher(OrtRuntime)  # the registry's launch


if __name__ == "__main__":
    sys.exit(worker.main(OrtRuntime()))
