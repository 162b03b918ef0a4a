"""The importers held against real model zoos: every model of a zoo, converted the way its users
convert it, imported into the IR and counted against the source.

A *case* is one model of one zoo (:data:`ZOOS`) through one *route* (:data:`ROUTES`): how the
model becomes a file the importers read. The zoos are Keras' applications (``weights=None``,
with their preprocessing layers) and pytorchcv's ImageNet models (``pretrained=False``); the
routes are TFLite's converter with its default options (a Keras model with its free batch, or
rebuilt on a batch-1 input) and PyTorch's two ONNX exporters (TorchScript-based and dynamo); a
zoo's *extra* routes run only when named: litert-torch, PyTorch to .tflite, lives in an
environment of its own (scripts/setup-litert-torch-env.sh) and runs as a subprocess. For
each case :func:`check` reports whether the source builds, whether the route converts it,
whether the importer takes the file (else the one-line error, naming the operator), and, when it
does, the IR's multiply-accumulates and parameters against the source's own counts:

- MACs of the source: PyTorch's ``torch.utils.flop_counter`` over a forward pass (its FLOPs over
  2), Keras' from the TensorFlow graph of the model's call (``Conv2D``, ``DepthwiseConv2dNative``,
  ``MatMul``, ``BatchMatMulV2`` and ``Einsum`` from their tensor shapes); both count what the
  IR's ``flops`` counts (docs/IR.md), so the two agree within 1% when the import is faithful;
  where they do not and the zoo can trace its model (PyTorch), the source is counted again over
  its traced graph with the dead code removed: a model that computes outputs it discards
  (MSDNet's early-exit classifiers) does that work in eager mode, but an exporter drops it, so
  the count the file is held to is the live one (the eager count stays in ``extra``);
- parameters of the source as its framework counts them, beside the IR's (a batch norm the
  exporter folds into a convolution is a known difference: its 2 x C parameters leave, a bias
  may join);
- outputs: the IR as a PyTorch module with the file's weights (:mod:`.carry`) against the file
  in its own runtime (ONNX Runtime, LiteRT) on one random input, within :data:`OUTPUT_TOLERANCE`
  of the largest output or twice what the runtime itself differs from the source framework;
  where that difference exceeds :data:`CHAOTIC` (a deep randomly initialised network amplifies
  rounding) the case says so and is not judged on its outputs.

``benchmarks/bench_importer_coverage.py`` runs every case and prints the coverage table;
``tests/test_importer_coverage.py`` runs a sample in CI.
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from foundation.registry import Registry

MACS_TOLERANCE = 0.01  # the IR's MACs within 1% of the source's
# the IR with the file's weights against the file in its runtime, fp32: max |difference| over
# max |output| (summation orders differ between the runtimes, and grow with depth), or twice
# what the file's runtime itself differs from the source framework, if more
OUTPUT_TOLERANCE = 1e-3
# the file's runtime against the source framework beyond this: the randomly initialised network
# amplifies rounding (EfficientNet-B7's logits reach 1e4 and two runtimes disagree by 70%), and
# no comparison of outputs can tell a faithful import from another network
CHAOTIC = 1e-2


@dataclass
class SourceModel:
    """A zoo's model, built: what it computes on and how its framework counts it."""

    zoo: str
    name: str
    model: Any  # the keras.Model or torch.nn.Module
    input_shape: list[int]  # NCHW, batch 1 (the IR's layout)
    params: int
    macs: int | None = None  # filled on first use (the zoo's ``macs``)
    live_macs: int | None = None  # filled when needed (the zoo's ``live_macs``)


@dataclass
class Zoo:
    """A model zoo: the names it offers, how one is built, how its MACs are counted."""

    name: str
    names: Callable[[], list[str]]
    build: Callable[[str], SourceModel]
    macs: Callable[[SourceModel], int]
    routes: tuple[str, ...]
    run: Callable[[SourceModel, Any], Any]  # the source framework's output on an NCHW input
    # routes run only when named (check_model's ``routes``, the benchmark's --route): a converter
    # in an environment of its own, which the default runs neither need nor wait for
    extra_routes: tuple[str, ...] = ()
    # the MACs of the work the output depends on (the traced graph without dead code), taken
    # when the IR's count differs from ``macs``; None: the zoo has no such count
    live_macs: Callable[[SourceModel], int] | None = None


@dataclass
class Route:
    """How a built model becomes a file the importers read (``convert`` writes it and returns its
    path), and the importer that reads it."""

    name: str
    suffix: str
    convert: Callable[[SourceModel, Path], Path]
    importer: str  # onnx | tflite: the importer that reads it (generators.importers)


ZOOS: Registry[Zoo] = Registry("model zoo")
ROUTES: Registry[Route] = Registry("conversion route")


@dataclass
class Case:
    """One model of one zoo through one route: what happened and what the IR counts."""

    zoo: str
    model: str
    route: str
    status: str = "pending"  # imported | refused | not converted | not built
    error: str = ""  # the one-line reason when not imported
    src_macs: int | None = None
    ir_macs: int | None = None
    src_params: int | None = None
    ir_params: int | None = None
    ir_nodes: int | None = None
    output_error: float | None = None  # the IR's output against the file's (:data:`OUTPUT_TOLERANCE`)
    reference_error: float | None = None  # the file's runtime against the source framework, the same way
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def macs_error(self) -> float | None:
        """The IR's MACs relative to the source's, minus 1 (None when either is missing)."""
        if not self.src_macs or self.ir_macs is None:
            return None
        return self.ir_macs / self.src_macs - 1

    @property
    def same_outputs(self) -> bool | None:
        """The IR computes what the file computes (None: not compared)."""
        if self.output_error is None or (self.reference_error is not None and self.reference_error > CHAOTIC):
            return None
        return self.output_error <= max(OUTPUT_TOLERANCE, 2 * (self.reference_error or 0.0))

    @property
    def conforms(self) -> bool:
        """Imported, with MACs within :data:`MACS_TOLERANCE` of the source's and, where compared,
        the file's outputs."""
        e = self.macs_error
        return self.status == "imported" and e is not None and abs(e) <= MACS_TOLERANCE and self.same_outputs is not False

    def row(self) -> dict:
        d = asdict(self)
        d["macs_error"] = self.macs_error
        d["same_outputs"] = self.same_outputs
        d["conforms"] = self.conforms
        return d


@contextlib.contextmanager
def _silent_stdout():
    """The process's standard output (file descriptor 1) to /dev/null: TFLite's converter prints
    every captured tensor of the model it saves there."""
    import sys

    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def _quiet_tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    return tf


# ---------------------------------------------------------------- Keras applications
def keras_names() -> list[str]:
    _quiet_tf()
    import keras

    return sorted(n for n in dir(keras.applications) if n[:1].isupper() and callable(getattr(keras.applications, n)))


def keras_build(name: str) -> SourceModel:
    _quiet_tf()
    import keras

    fn = getattr(keras.applications, name, None)
    if fn is None:
        raise KeyError(f"keras.applications has no {name!r}")
    m = fn(weights=None)
    h, w, ch = m.input_shape[1:]
    if h is None or w is None:  # a free image size (MobileNetV3): the application's default
        m = fn(weights=None, input_shape=(224, 224, ch))
        h = w = 224
    _vary_vectors(m)
    return SourceModel("keras", name, m, [1, int(ch), int(h), int(w)], int(m.count_params()))


def _vary_vectors(m: Any, seed: int = 0) -> None:
    """Random values in the model's vectors (biases, batch norm gains, shifts and statistics; a
    fresh application has zeros and ones there, and some give every class the same score, which
    no output comparison can tell from another network's): gains and variances near 1, the rest
    near 0. Kernels keep their initialisation."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for v in m.weights:
        if len(v.shape) != 1:
            continue
        name = v.path if hasattr(v, "path") else v.name
        near_one = any(k in name for k in ("gamma", "variance", "scale"))
        r = rng.standard_normal(v.shape).astype("float32")
        v.assign(1 + 0.1 * r if near_one else 0.1 * r)


def _tf_macs(op: Any) -> int:
    """Multiply-accumulates of one TensorFlow graph operation (0 for anything else)."""
    t = op.type
    if t not in ("Conv2D", "DepthwiseConv2dNative", "MatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum"):
        return 0
    out = [int(d) for d in op.outputs[0].shape]
    a, b = ([int(d) for d in x.shape] for x in op.inputs[:2])
    if t == "Conv2D":  # filter [kh, kw, in/groups, out]
        return math.prod(out) * b[0] * b[1] * b[2]
    if t == "DepthwiseConv2dNative":  # filter [kh, kw, in, multiplier]
        return math.prod(out) * b[0] * b[1]
    if t == "Einsum":
        eq = op.get_attr("equation").decode()
        ins, res = eq.split("->")
        sizes = {}
        for spec, shape in zip(ins.split(","), (a, b)):
            sizes.update(zip(spec.replace("...", ""), shape[-len(spec.replace("...", "")):]))
        contracted = set(ins.replace(",", "").replace("...", "")) - set(res.replace("...", ""))
        return math.prod(out) * math.prod(sizes[k] for k in contracted)
    adj = op.get_attr("transpose_a" if t == "MatMul" else "adj_x")
    return math.prod(out) * (a[-2] if adj else a[-1])


def keras_macs(src: SourceModel) -> int:
    """MACs of the model's call on a batch-1 input, from its TensorFlow graph."""
    tf = _quiet_tf()
    _, ch, h, w = src.input_shape
    fn = tf.function(lambda x: src.model(x, training=False))
    graph = fn.get_concrete_function(tf.TensorSpec([1, h, w, ch], tf.float32)).graph
    return _graph_macs(graph)


def _graph_macs(graph: Any) -> int:
    total = 0
    for op in graph.get_operations():
        total += _tf_macs(op)
        for attr in ("then_branch", "body", "f"):  # function-valued attributes hold the rest
            try:
                f = op.get_attr(attr)
            except (ValueError, TypeError):
                continue
            total += _graph_macs(graph._get_function(f.name).graph) if hasattr(f, "name") else 0
    return total


def keras_run(src: SourceModel, x: Any) -> Any:
    """The Keras model's output on the NCHW input ``x`` (given to it in NHWC)."""
    import numpy as np

    return np.asarray(src.model(x.transpose(0, 2, 3, 1), training=False))


def _keras_tflite(batch: int | None) -> Callable[[SourceModel, Path], Path]:
    def convert(src: SourceModel, work: Path) -> Path:
        tf = _quiet_tf()
        import keras

        m = src.model
        if batch is not None:
            inp = keras.Input(shape=m.input_shape[1:], batch_size=batch)
            m = keras.Model(inp, m(inp))
        out = work / f"{src.name}-b{batch or 'None'}.tflite"
        with warnings.catch_warnings(), _silent_stdout():
            warnings.simplefilter("ignore")
            out.write_bytes(tf.lite.TFLiteConverter.from_keras_model(m).convert())
        return out
    return convert


# ---------------------------------------------------------------- pytorchcv
# name parts of pytorchcv's models for other data sets and tasks (CIFAR, SVHN, segmentation,
# detection, pose, face, re-identification, speech): the zoo here is its ImageNet classifiers
_OTHER_TASKS = ("cifar", "svhn", "_voc", "_coco", "ade20k", "cityscapes", "celebamaskhq", "widerface", "_cub",
                "_hp", "_lip", "_mpii", "wflw", "ibppose", "_cs", "_ls", "market", "duke", "_aflw", "_300w",
                "librispeech", "mcv", "_en", "_ru", "_de", "_fr", "_it", "_es", "_ca", "_pl", "_fa")


def pytorchcv_names() -> list[str]:
    from pytorchcv.model_provider import _models

    return sorted(n for n in _models if not any(s in n for s in _OTHER_TASKS))


def pytorchcv_build(name: str) -> SourceModel:
    import torch

    from .pytorch import build_pytorchcv

    torch.manual_seed(0)
    m = build_pytorchcv(name, device="cpu")  # with the NumPy alias pytorchcv's RegNet needs
    classes = getattr(m, "num_classes", None)
    if classes != 1000:
        raise ValueError(f"{name}: not an ImageNet classifier ({classes} classes)")
    size = tuple(getattr(m, "in_size", (224, 224)))
    ch = int(getattr(m, "in_channels", 3))
    shape = [1, ch, *map(int, size)]
    _calibrate_norms(m, shape)
    return SourceModel("pytorchcv", name, m, shape, int(sum(p.numel() for p in m.parameters())))


def _calibrate_norms(m: Any, shape: list[int], batches: int = 2) -> None:
    """Batch norm statistics of the model's own activations on random inputs (a cumulative
    average over a few batches of two in training mode), then evaluation mode. A fresh model's
    statistics (mean 0, variance 1) normalise nothing: a deep residual network's activations
    then grow layer by layer until two runtimes' rounding differs in the first digit, and no
    output comparison means anything."""
    import torch

    norms = [mod for mod in m.modules() if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for mod in norms:
        mod.reset_running_stats()
        mod.momentum = None  # a cumulative average of the batches
    gen = torch.Generator().manual_seed(0)
    m.train()
    try:
        with torch.no_grad():
            for _ in range(batches):
                m(torch.randn([2, *shape[1:]], generator=gen))
    finally:
        m.eval()


def torch_macs(src: SourceModel) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        src.model(torch.zeros(src.input_shape))
    return int(fc.get_total_flops()) // 2


def torch_live_macs(src: SourceModel) -> int:
    """MACs of what the output of ``src`` depends on: the model traced to ATen operators
    (functionalized, so an in-place write is not kept for its side effect), its dead code
    eliminated, counted by PyTorch's flop counter as :func:`torch_macs` counts."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.zeros(src.input_shape)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gm = make_fx(torch.func.functionalize(src.model))(x)
        gm.graph.eliminate_dead_code()
        gm.recompile()
        with FlopCounterMode(display=False) as fc:
            gm(x)
    return int(fc.get_total_flops()) // 2


def torch_run(src: SourceModel, x: Any) -> Any:
    import torch

    with torch.no_grad():
        return src.model(torch.from_numpy(x)).numpy()


def _onnx(dynamo: bool) -> Callable[[SourceModel, Path], Path]:
    def convert(src: SourceModel, work: Path) -> Path:
        import logging

        import torch

        out = work / f"{src.name}-{'dynamo' if dynamo else 'ts'}.onnx"
        buf = io.BytesIO() if not dynamo else None
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            logging.getLogger("torch.onnx").setLevel(logging.ERROR)
            x = torch.zeros(src.input_shape)
            if dynamo:
                torch.onnx.export(src.model, (x,), str(out), dynamo=True, input_names=["x"],
                                  dynamic_shapes={"x": {0: torch.export.Dim("batch", max=64)}}, verbose=False,
                                  external_data=False)
            else:
                torch.onnx.export(src.model, (x,), buf, dynamo=False, input_names=["x"], dynamic_axes={"x": {0: "N"}})
                out.write_bytes(buf.getvalue())
        return out
    return convert


# ---------------------------------------------------------------- litert-torch (its own environment)
LITERT_TORCH_SETUP = "scripts/setup-litert-torch-env.sh"
LITERT_TORCH_TIMEOUT = 1800  # seconds for one model's conversion
_ROOT = Path(__file__).resolve().parents[2]


class ConverterUnavailable(RuntimeError):
    """The route's converter is not installed here (its environment is absent)."""


def litert_torch_python() -> Path:
    """The interpreter of the litert-torch environment: ``LATBENCH_LITERT_TORCH_PYTHON``, else
    ``.venv-litert-torch/bin/python`` of the repository. litert-torch lives apart from the
    project's environment (it pins older pydantic and typing_extensions); when neither exists,
    :class:`ConverterUnavailable` names the script that creates it."""
    env = os.environ.get("LATBENCH_LITERT_TORCH_PYTHON")
    path = Path(env) if env else _ROOT / ".venv-litert-torch" / "bin" / "python"
    if not path.is_file():
        where = f"LATBENCH_LITERT_TORCH_PYTHON={env}" if env else f"{path}"
        raise ConverterUnavailable(f"no litert-torch environment ({where} does not exist): run {LITERT_TORCH_SETUP}")
    return path


def _litert_torch(src: SourceModel, work: Path) -> Path:
    """``src`` converted by litert-torch in its own environment (generators/importers/
    litert_torch_convert.py as a subprocess), from the source's own weights and batch norm
    statistics (saved to ``work`` for it); its one-line error when it fails."""
    import subprocess

    import torch

    python = litert_torch_python()
    out = work / f"{src.name}-litert-torch.tflite"
    state = work / f"{src.name}-state.pt"
    torch.save(src.model.state_dict(), state)
    script = Path(__file__).with_name("litert_torch_convert.py")
    # -I: neither the script's folder (this package: its onnx.py would shadow the onnx package)
    # nor PYTHONPATH on the other environment's path
    cmd = [str(python), "-I", str(script), src.name, "--shape", *map(str, src.input_shape), "--out", str(out),
           "--state", str(state)]
    try:
        r = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=LITERT_TORCH_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{src.name}: litert-torch did not finish in {LITERT_TORCH_TIMEOUT} s") from None
    finally:
        state.unlink(missing_ok=True)
    if r.returncode != 0 or not out.is_file():
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        raise RuntimeError(lines[-1] if lines else f"{src.name}: litert-torch exited with status {r.returncode}")
    return out


ROUTES.register("tflite")(Route("tflite", ".tflite", _keras_tflite(None), "tflite"))
ROUTES.register("tflite-batch1")(Route("tflite-batch1", ".tflite", _keras_tflite(1), "tflite"))
ROUTES.register("onnx-torchscript")(Route("onnx-torchscript", ".onnx", _onnx(False), "onnx"))
ROUTES.register("onnx-dynamo")(Route("onnx-dynamo", ".onnx", _onnx(True), "onnx"))
ROUTES.register("tflite-litert-torch")(Route("tflite-litert-torch", ".tflite", _litert_torch, "tflite"))
ZOOS.register("keras")(Zoo("keras", keras_names, keras_build, keras_macs, ("tflite", "tflite-batch1"), keras_run))
ZOOS.register("pytorchcv")(Zoo("pytorchcv", pytorchcv_names, pytorchcv_build, torch_macs,
                               ("onnx-torchscript", "onnx-dynamo"), torch_run, ("tflite-litert-torch",),
                               torch_live_macs))


# ---------------------------------------------------------------- one case
def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}"


def _import(route: Route, path: Path, src: SourceModel) -> tuple[Any, Callable[[], Any], Callable[[Any], list]]:
    """(graph, its weights from the file, the file run on an NCHW input) for ``path``."""
    from . import carry

    blob = path.read_bytes()
    if route.importer == "onnx":
        import onnx

        from .onnx import import_onnx_with_origins

        g, origins = import_onnx_with_origins(blob, input_shape=src.input_shape, name=src.name)
        return g, lambda: carry.onnx_weights(onnx.load_model_from_string(blob), g, origins), \
            lambda x: carry.run_onnx(blob, x)
    from .tflite import import_tflite_with_origins

    g, origins = import_tflite_with_origins(blob, input_shape=src.input_shape, name=src.name)
    return g, lambda: carry.tflite_weights(blob, g, origins), lambda x: _run_tflite(blob, g, x)


def _run_tflite(blob: bytes, g: Any, x: Any) -> list:
    """The TFLite file in LiteRT on the NCHW input ``x``: as it is when the file's input is NCHW,
    its outputs as they are (a PyTorch model converted by litert-torch keeps PyTorch's layout at
    its inputs and outputs and transposes inside), else in NHWC, its outputs back to NCHW, as the
    file of a TensorFlow model wants it (:func:`run_interpreter`)."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from generators.export.tflite import run_interpreter

    it = Interpreter(model_content=blob, num_threads=1)
    (d,) = it.get_input_details()
    if x.ndim != 4 or list(d["shape"]) != list(x.shape) or d["dtype"] != np.float32:
        return run_interpreter(it, g, {g.input_nodes[0].name: x})
    it.allocate_tensors()
    it.set_tensor(d["index"], np.ascontiguousarray(x, dtype=np.float32))
    it.invoke()
    return [np.array(it.get_tensor(o["index"])) for o in it.get_output_details()]


def check(src: SourceModel, route: str, work: Path, outputs: bool = True, keep_file: bool = False,
          predict: str | None = None) -> Case:
    """``src`` through ``route`` (its file written in ``work``, removed afterwards unless
    ``keep_file``), imported and counted against the source; with ``outputs``, the IR with the
    file's weights run against the file in its runtime on one random input; with ``predict`` (a
    shelf scenario), the committed predictor shelf's prediction there (``extra["predicted_ms"]``,
    or ``extra["predict_error"]``)."""
    import numpy as np

    from . import carry
    from .common import UnsupportedModelError

    case = Case(src.zoo, src.name, route, src_params=src.params)
    t0 = time.perf_counter()
    r = ROUTES.get(route)
    path = None
    try:
        try:
            path = r.convert(src, work)
        except Exception as e:  # noqa: BLE001 - a converter's failure is the case's outcome
            case.status, case.error = "not converted", _one_line(e)
            return case
        try:
            g, weights, run_file = _import(r, path, src)
        except UnsupportedModelError as e:
            case.status, case.error = "refused", str(e).splitlines()[0][:400]
            return case
        case.status, case.ir_macs, case.ir_params, case.ir_nodes = "imported", int(g.flops), int(g.params), len(g.nodes)
        if src.macs is None:
            src.macs = ZOOS.get(src.zoo).macs(src)
        case.src_macs = src.macs
        _live_macs(case, src)
        if outputs:
            x = np.random.default_rng(0).standard_normal(src.input_shape).astype(np.float32)
            try:
                ref = run_file(x)[0]
                if float(np.ptp(ref)) == 0.0:  # every output equal: no comparison can tell networks apart
                    case.extra["outputs"] = "the file's output is constant on a random input: not compared"
                else:
                    case.output_error = carry.relative_error(carry.run_ir(g, weights(), x)[0], ref)
                    case.reference_error = carry.relative_error(ref, ZOOS.get(src.zoo).run(src, x))
                    if case.reference_error > CHAOTIC:
                        case.extra["outputs"] = (f"the file's runtime differs from {src.zoo}'s own output by "
                                                 f"{case.reference_error:.2g} of its largest value: not comparable")
            except Exception as e:  # noqa: BLE001 - a comparison that cannot run is stated, not hidden
                case.output_error = float("inf")
                case.extra["outputs"] = _one_line(e)
        if predict:
            _predict(case, g, predict)
        return case
    finally:
        case.seconds = round(time.perf_counter() - t0, 2)
        if path is not None and not keep_file:
            Path(path).unlink(missing_ok=True)


def _live_macs(case: Case, src: SourceModel) -> None:
    """Where the IR's MACs are off the source's eager count and the zoo can count the live work
    (:attr:`Zoo.live_macs`), the case is held to the live count, the eager one kept as
    ``extra["eager_macs"]`` (a failed trace is stated in ``extra["live_macs"]``)."""
    z = ZOOS.get(src.zoo)
    e = case.macs_error
    if z.live_macs is None or e is None or abs(e) <= MACS_TOLERANCE:
        return
    if src.live_macs is None:
        try:
            src.live_macs = z.live_macs(src)
        except Exception as err:  # noqa: BLE001 - an untraceable model keeps its eager count, said so
            case.extra["live_macs"] = f"not counted: {_one_line(err)}"
            return
    if src.live_macs != src.macs:
        case.extra["eager_macs"] = src.macs
        case.src_macs = src.live_macs


def _predict(case: Case, g: Any, scenario: str) -> None:
    """What ``latbench predict`` answers for the imported graph in ``scenario``, from the
    committed shelf (the shelf's one-line error when it cannot)."""
    from shelf import Shelf, ShelfError

    global _SHELF
    try:
        if _SHELF is None:
            _SHELF = Shelf()
        case.extra["predicted_ms"] = float(_SHELF.predict([g], scenario)[0])
    except (ShelfError, ValueError, KeyError) as e:
        case.extra["predict_error"] = _one_line(e)


_SHELF = None  # the committed shelf, loaded on the first prediction


def check_model(zoo: str, name: str, work: Path, routes: tuple[str, ...] | None = None, outputs: bool = True,
                predict: str | None = None) -> list[Case]:
    """Every route of ``zoo`` (or ``routes``) for its model ``name``; a model that does not build
    offline is one case per route with status ``not built``."""
    z = ZOOS.get(zoo)
    routes = routes or z.routes
    t0 = time.perf_counter()
    try:
        src = z.build(name)
    except Exception as e:  # noqa: BLE001 - the zoo's own failure is the case's outcome
        return [Case(zoo, name, r, "not built", _one_line(e), seconds=round(time.perf_counter() - t0, 2)) for r in routes]
    return [check(src, r, work, outputs, predict=predict) for r in routes]


__all__ = ["CHAOTIC", "Case", "MACS_TOLERANCE", "OUTPUT_TOLERANCE", "ROUTES", "Route", "SourceModel", "ZOOS", "Zoo", "check", "check_model"]
