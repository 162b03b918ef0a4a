"""``latbench profile MODEL``: one model file of the user's through the measure stage's instrument.

A mobile developer with a ``.tflite`` or TorchScript file wants what TFLite's benchmark_model and
nnPerf show: how long it takes end to end (with how sure we are), which ops and kernels take
the time, and how much of the run is not in any op. This module runs the file through exactly
the code path of the measure stage (:class:`pipelines.measure.Sweep`: fresh pinned processes,
the stopping rule, its load check, op and kernel processes with their overhead check; ``--allow-load``
keeps loaded ones) on the host's CPU or GPU or an adb phone, and reads the record it writes.

How the file enters the sweep
-----------------------------
The sweep reads artifacts as ``<artifacts>/<model_id>/<format file>``; the file is copied there
under a model id made of its content hash (the same file always gets the same id: an interrupted
profile resumes like a sweep, a finished one is reused and says so, ``--fresh`` measures anew).
Two preparations, both stated in the record's folder:

- TFLite files converted with a free batch dimension (Keras' usual ``None``) carry ``-1`` in
  their tensors' shape signatures, and LiteRT's compiled model refuses them ("Failed to get
  num packed bytes"). :func:`static_tflite` resolves them: the Python interpreter resizes the
  inputs (batch 1, or ``--shape``), propagates the shapes through the graph, and every tensor
  with a free dimension gets the propagated shape written into a copy of the flatbuffer.
- TorchScript files carry no input shape: ``--shape`` gives it (written beside the copy as the
  ``.facts.json`` the export stage writes for its own artifacts).

Precision ``auto`` reads it from the file: a TFLite file whose conv/fc weights are int8 is
int8, float16 weights fp16, else fp32; a TorchScript file with ``quantized::`` operators is
int8, else fp32; an ONNX file (ONNX Runtime) with quantizing operators is int8 and runs with its
own input shapes (``--shape`` for free dimensions); an ExecuTorch program (``.pte``) whose XNNPACK
graphs hold quantized values is int8, else fp32, and runs with the input shapes it was exported
for (a ``--shape`` that differs is refused). The scenario id says which precision ran.

Before anything reads the file into objects, inflates it or runs it, :func:`check_model_file`
holds it to the bounds of ``foundation/limits.py``: its size (``MODEL_FILE_BYTES``); a TorchScript
file's zip directory (``ARCHIVE_MEMBERS``, ``ARCHIVE_UNPACKED_BYTES``, ``ARCHIVE_RATIO``); an ONNX
file's nodes (``GRAPH_NODES``); an ExecuTorch program's instructions (``GRAPH_NODES``); a TFLite
file's operators (``GRAPH_NODES``) and every tensor's shape (``TENSOR_ELEMENTS``: what a runtime
would allocate), as the importers check them; and ``--shape`` (``TENSOR_ELEMENTS``). A refusal is
one line naming the file and the bound.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .devices.base import Device

PROFILE_SOURCE = "profile"  # the record's generator source: the model came from the user, not a generator
# TFLite tensor types of weights (schema TensorType) that decide the precision of a file
_TFLITE_FLOAT16, _TFLITE_INT8, _TFLITE_UINT8 = 1, 9, 3
_WEIGHTED_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV")


class ProfileError(ValueError):
    """A model file or option the profile cannot use (one line naming the file or option)."""


@dataclass
class ProfileRequest:
    """What to profile and where (the options of ``latbench profile``)."""

    model: Path
    device: str = "host"  # host | gpu (the host's GPU) | an adb serial
    cores: str = "1large"
    precision: str = "auto"
    threads: int | None = None
    shape: list[int] | None = None  # the input shape (batch 1 and the file's own shape if None)
    out: Path | None = None  # default: profiles/<file stem>/
    processes: int | None = None  # e2e processes (default: the measure config's)
    adb_server: str = "127.0.0.1:5037"  # for an adb serial
    # keep processes taken under load or in a slow episode, with a warning (measure.load.check
    # off), instead of measuring them again and refusing as the measure stage does
    allow_load: bool = False
    fresh: bool = False  # remove the model's stored record(s) of the scenario and measure anew


@dataclass
class Profile:
    """The outcome: the measure record, where it and the traces are, and the scenario."""

    record: dict[str, Any]
    out: Path
    scenario_id: str
    notes: list[str] = field(default_factory=list)  # what was done to the file on the way
    reused: str | None = None  # the stored record's date when it was read, not measured, by this run
    # host CPU scenarios: the committed release's speed-probe reference (release_reference)
    release: dict[str, Any] | None = None

    def trace(self, mode: str) -> Path | None:
        m = self.record.get(mode)
        return self.out / m["trace"] if m and m.get("trace") else None


# ---------------------------------------------------------------- the file
def framework_of(path: Path) -> str:
    from .runners import framework_by_suffix

    known = framework_by_suffix()
    fw = known.get(path.suffix.lower())
    if fw is None:
        raise ProfileError(f"{path}: unknown model kind {path.suffix or '(no suffix)'!r} (profile takes "
                           f"{', '.join(known)}; import it into the IR and export it first)")
    return fw


def model_id_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def check_model_file(path: Path, framework: str, shape: list[int] | None = None) -> None:
    """The bounds of foundation/limits.py on a user's model file (see the module docstring),
    checked before torch or LiteRT opens it; ProfileError names the file and the bound."""
    from generators.importers.common import UnsupportedModelError, check_zip, read_model_file, too_many_elements
    from generators.importers.tflite import check_tflite

    try:
        if framework == "pytorch":
            check_zip(path)  # a TorchScript file is a zip archive: its directory, before torch inflates it
        elif framework == "onnxruntime":
            onnx_operators(path)  # its size and node count, before anything parses it
        elif framework == "executorch":
            pte_program(path)  # its size, identifier and instruction count, before the runtime loads it
        else:
            check_tflite(read_model_file(path, "TFLite file"), str(path))
    except UnsupportedModelError as e:
        raise ProfileError(str(e)) from None
    fault = too_many_elements(shape or [], "--shape")
    if fault:
        raise ProfileError(f"{path}: {fault}")


def _read_tflite(path: Path):
    from ai_edge_litert.tools import flatbuffer_utils

    try:
        return flatbuffer_utils.read_model(str(path))
    except Exception as e:  # noqa: BLE001 - any parse failure of a user's file is one line
        raise ProfileError(f"{path}: not a TFLite flatbuffer ({type(e).__name__}: {str(e)[:120]})") from None


def tflite_precision(path: Path) -> str:
    """fp32 | fp16 | int8 of a TFLite file, from the type of its conv/fc weight tensors."""
    from ai_edge_litert import schema_py_generated as s

    model = _read_tflite(path)
    names = {v: k for k, v in vars(s.BuiltinOperator).items() if not k.startswith("_")}
    types = set()
    for sg in model.subgraphs:
        for op in sg.operators:
            code = model.operatorCodes[op.opcodeIndex]
            name = names.get(max(code.builtinCode, code.deprecatedBuiltinCode), "")
            if name in _WEIGHTED_OPS and len(op.inputs) > 1 and op.inputs[1] >= 0:
                types.add(sg.tensors[op.inputs[1]].type)
    if types & {_TFLITE_INT8, _TFLITE_UINT8}:
        return "int8"
    return "fp16" if _TFLITE_FLOAT16 in types else "fp32"


def onnx_operators(path: Path) -> dict[str, int]:
    """Operator counts of an ONNX file, its size and node count held to foundation/limits.py first."""
    from collections import Counter

    import onnx

    from generators.importers.common import UnsupportedModelError, check_graph_nodes, read_model_file
    from generators.importers.onnx import count_nodes

    try:
        data = read_model_file(path, "ONNX file")
        check_graph_nodes(count_nodes(data, str(path)), str(path))
        proto = onnx.load_model_from_string(data)
    except UnsupportedModelError as e:
        raise ProfileError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - any parse failure of a user's file is one line
        raise ProfileError(f"{path}: not an ONNX model ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})") from None
    if proto.ir_version < 1 or not proto.graph.node:
        raise ProfileError(f"{path}: not an ONNX model (no IR version or no graph nodes)")
    return dict(Counter(n.op_type for n in proto.graph.node))


def pte_program(path: Path) -> dict[str, Any]:
    """What an ExecuTorch program says of itself (pipelines/runners/executorch.py read_program:
    operators, delegates, precision), its size and instructions held to foundation/limits.py first."""
    from .runners.executorch import PteError, read_program

    try:
        return read_program(path)
    except PteError as e:
        raise ProfileError(str(e)) from None


def torchscript_precision(path: Path) -> str:
    import torch

    try:
        m = torch.jit.load(str(path), map_location="cpu")
    except Exception as e:  # noqa: BLE001
        raise ProfileError(f"{path}: not a TorchScript file ({type(e).__name__}: {str(e).splitlines()[0][:120]})") from None
    return "int8" if "quantized::" in str(m.inlined_graph) else "fp32"


def static_tflite(path: Path, out: Path, shape: list[int] | None = None) -> tuple[Path, str | None]:
    """``path`` itself when every tensor shape is fixed and no ``shape`` is asked; else a copy at
    ``out`` with the shapes the interpreter propagates from the resolved input shape (free
    dimensions 1, or ``shape`` for the first input), and a note saying what changed."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter
    from ai_edge_litert.tools import flatbuffer_utils

    from generators.importers.common import too_many_elements

    model = _read_tflite(path)
    free = [(g, i) for g, sg in enumerate(model.subgraphs) for i, t in enumerate(sg.tensors)
            if t.shapeSignature is not None and len(t.shapeSignature) and (np.asarray(t.shapeSignature) < 0).any()]
    if not free and shape is None:
        return path, None
    from ai_edge_litert.interpreter import OpResolverType

    # no default delegate: the interpreter only propagates shapes here (and XNNPACK would log)
    it = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    inputs = it.get_input_details()
    for k, d in enumerate(inputs):
        sig = list(d.get("shape_signature", d["shape"]))
        want = list(shape) if (shape is not None and k == 0) else [1 if v < 0 else int(v) for v in sig]
        if len(want) != len(sig) or any(s >= 0 and s != w for s, w in zip(sig, want) if shape is None):
            raise ProfileError(f"{path}: --shape {'x'.join(map(str, want))} does not fit input {d['name']} "
                               f"of shape {'x'.join(str(int(v)) for v in sig)}")
        it.resize_tensor_input(d["index"], want)
    try:
        it.allocate_tensors()
    except (RuntimeError, ValueError) as e:
        raise ProfileError(f"{path}: the interpreter cannot propagate input shape {want}: {str(e).splitlines()[0]}") from None
    shapes = {t["index"]: [int(v) for v in t["shape"]] for t in it.get_tensor_details()}
    for t in it.get_tensor_details():  # the shapes the input shape gives the tensors, before a runtime allocates them
        fault = too_many_elements(shapes[t["index"]], f"tensor {t['name']!r} of propagated shape")
        if fault:
            raise ProfileError(f"{path}: with input shape {'x'.join(map(str, want))}, {fault}")
    main = model.subgraphs[0]
    for i, t in enumerate(main.tensors):  # the main subgraph: tensor index = interpreter index
        if i in shapes and (shape is not None or any(g == 0 and j == i for g, j in free)):
            t.shape = np.asarray(shapes[i], dtype=np.int32)
            t.shapeSignature = None
    left = [(g, i) for g, i in free if g != 0]
    if left:
        raise ProfileError(f"{path}: subgraph {left[0][0]} has free dimensions the profile cannot resolve")
    out.parent.mkdir(parents=True, exist_ok=True)
    flatbuffer_utils.write_model(model, str(out))
    first = inputs[0]
    note = (f"input {first['name']}: {'x'.join(str(int(v)) for v in first.get('shape_signature', first['shape']))} -> "
            f"{'x'.join(map(str, shapes[first['index']]))}; {len(free)} tensors with free dimensions fixed")
    return out, note


# ---------------------------------------------------------------- the device and the scenario
def device_config(spec: str, adb_server: str = "127.0.0.1:5037") -> tuple[Any, str]:
    """(device config section, accelerator) for ``--device``: host, gpu (the host's GPU through
    LiteRT's GPU accelerator) or an adb serial."""
    from .config import DeviceConfig

    if spec in ("host", "cpu"):
        return DeviceConfig(name="host", kind="host", gpu=None), "cpu"
    if spec == "gpu":
        return DeviceConfig(name="host", kind="host", gpu="auto"), "gpu"
    if not re.fullmatch(r"[A-Za-z0-9._:-]+", spec):
        raise ProfileError(f"--device: expected host, gpu or an adb serial, got {spec!r}")
    name = re.sub(r"[^a-z0-9_]", "_", spec.lower())
    return DeviceConfig(name=name, kind="adb", gpu=None, serial=spec, adb_server=adb_server), "cpu"


def run_profile(cfg: Any, req: ProfileRequest, *, device: Device | None = None, progress: bool = True,
                on_process: Callable[[str, int, dict], None] | None = None) -> Profile:
    """Measure ``req.model`` as the measure stage measures a generated network (see the module
    docstring); ``cfg`` is the composed configuration (its ``measure`` protocol is used)."""
    import copy

    from .devices import make_device
    from .artifacts import artifact_path
    from .measure import Sweep, resolve_plan, stage_scenario
    from .runners import RUNNERS
    from generators.export.formats import FORMATS

    path = Path(req.model)
    if not path.is_file():
        raise ProfileError(f"{path}: no such model file")
    framework = framework_of(path)
    dev_cfg, accelerator = device_config(req.device, req.adb_server)
    if accelerator == "gpu" and framework != "tflite":
        raise ProfileError(f"{path}: --device gpu runs TFLite files only (the suite's GPU runner is LiteRT's)")
    if framework == "pytorch" and req.shape is None:
        raise ProfileError(f"{path}: a TorchScript file does not say its input shape: pass --shape, e.g. 1x3x224x224")
    check_model_file(path, framework, req.shape)  # before torch or LiteRT reads, inflates or runs it
    precision = req.precision
    if precision == "auto":
        if framework == "onnxruntime":
            from .runners.onnxruntime import detect_precision

            precision = detect_precision(onnx_operators(path))
        elif framework == "executorch":
            precision = pte_program(path)["precision"]
        else:
            precision = tflite_precision(path) if framework == "tflite" else torchscript_precision(path)
    if accelerator == "gpu" and req.precision == "auto":
        precision = "fp32"  # the GPU runs the float file; fp32 compute unless asked for fp16
    device = device or make_device(dev_cfg)
    st = stage_scenario(device, framework, precision, req.cores, req.threads, accelerator)
    if st.scenario is None:
        raise ProfileError(f"{path}: {st.reason}")
    scenario = st.scenario
    mid = model_id_of(path)
    out = Path(req.out or Path("profiles") / path.stem)
    fmt = RUNNERS[(framework, accelerator)].formats[precision]
    art = artifact_path(out / "artifacts", mid, fmt)
    art.parent.mkdir(parents=True, exist_ok=True)
    notes = []
    if framework == "tflite":
        src, note = static_tflite(path, art.parent / "static.tflite", req.shape)
        if note:
            notes.append(note)
        shutil.copyfile(src, art)
    else:
        shutil.copyfile(path, art)
        if req.shape is not None:  # the worker's input shape (an ONNX file may say its own)
            facts = art.parent / f"{art.stem}.facts.json"
            facts.write_text(json.dumps({"inputs": [{"shape": list(req.shape)}], "source_file": str(path)}))
    m = copy.deepcopy(cfg.measure)
    if req.allow_load:  # keep and warn (summary_lines), as the config's load.check: false does
        m.load.check = False
    if req.processes:
        m.processes = req.processes
        m.stopping.max_processes = max(m.stopping.max_processes, req.processes)
    rec_dir = out / scenario.scenario_id
    with device.lock(out / ".lock"):
        if req.fresh:
            forget(rec_dir, mid)
        plan = resolve_plan(device, scenario, m, rec_dir, out / "artifacts", [(PROFILE_SOURCE, mid)],
                            getattr(cfg, "release", None))
        # the plan skips a pair done under the same protocol digest: nothing is measured now
        reused = None if any(pr.model_id == mid for pr in plan.pairs) else _stored_date(plan, mid)
        notes += [f"resumed {len(pr.processes)} e2e process(es) an interrupted profile finished"
                  for pr in plan.pairs if pr.processes]
        sweep = Sweep(plan, device, progress=progress)
        sweep.on_process = (lambda proc: on_process(scenario.scenario_id, proc["process"], proc)) if on_process else None
        sweep.say = lambda line: None  # a failure is the ProfileError below, one line
        sweep.run()
    rec_path = plan.record_path(mid)
    if not rec_path.is_file():
        raise ProfileError(_failure(path, plan, mid, art, reused))
    record = json.loads(rec_path.read_text())
    (rec_dir / "source.json").write_text(json.dumps({"model_file": str(path.resolve()), "model_id": mid,
                                                     "format": FORMATS.get(fmt).name, "notes": notes}, indent=1))
    return Profile(record, rec_dir, scenario.scenario_id, notes, reused=reused,
                   release=release_reference(cfg, device, scenario))


def forget(rec_dir: Path, model_id: str) -> list[Path]:
    """``--fresh``: removes what the scenario's folder holds of ``model_id`` (its record or error
    record, traces, the unfinished processes of an interrupted profile); the paths removed."""
    gone = sorted(rec_dir.glob(f"{model_id}.*"))
    for f in gone:
        f.unlink()
    work = rec_dir / ".work" / model_id
    if work.is_dir():
        shutil.rmtree(work)
        gone.append(work)
    return gone


def _stored_date(plan: Any, model_id: str) -> str | None:
    """When the stored record (or failure on record) of ``model_id`` was written (local time;
    None: the folder holds neither)."""
    import time

    for path in (plan.record_path(model_id), plan.error_path(model_id)):
        if path.is_file():
            return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(path.stat().st_mtime))
    return None


def _failure(path: Path, plan: Any, model_id: str, artifact: Path, reused: str | None) -> str:
    """The one line of a profile that wrote no record: a refusal under load says what was seen
    and what to do; a failure on record from an earlier run says so."""
    err = json.loads(plan.error_path(model_id).read_text()) if plan.error_path(model_id).is_file() else {}
    what = str(err.get("error", "no record written")).replace(f"{artifact}: ", "")
    if err.get("kind") == "loaded":
        return (f"{path}: refused: {what} (measure.load.retries {plan.protocol.load.retries}); close other "
                "programs and profile again, or pass --allow-load to keep the numbers with a warning")
    stored = f" (stored failure from {reused}, {plan.error_path(model_id)}; measure anew with --fresh)" if reused else ""
    return f"{path}: {err.get('kind', 'failed')}: {what}{stored}"


def release_reference(cfg: Any, device: Device, scenario: Any) -> dict[str, Any] | None:
    """For a host CPU scenario, the configured release's speed-probe reference of this device
    name (``RELEASE.json``'s ``probe_reference_s``: seconds of the probe's fixed work per CPU on
    the release's machine) and the processors it was measured on; None elsewhere (the GPU, a
    phone) or when the release has none."""
    from .release import Release

    rel_cfg = getattr(cfg, "release", None)
    release = Release.configured(rel_cfg) if rel_cfg is not None else None
    if release is None or getattr(device, "kind", None) != "host" or scenario.accelerator != "cpu":
        return None
    ref = release.probe_reference(device.name)
    if not ref:
        return None
    return {"label": release.label, "probe_reference_s": {str(c): s for c, s in ref.items()},
            "processors": sorted(release.processors(device.name)),
            "processor": device.describe().get("cpu_model")}


# ---------------------------------------------------------------- what the developer reads
def _share_rows(entries: list[dict], total: float, top: int, label: Callable[[dict], str]) -> list[str]:
    by_name: dict[str, list[float]] = {}
    for e in entries:
        by_name.setdefault(label(e), []).append(float(e.get("median_ms") or 0.0))
    rows = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))
    out = []
    for name, times in rows[:top]:
        t = sum(times)
        out.append(f"  {name[:44]:<44} x{len(times):<3} {t:9.3f} ms {100 * t / total if total else 0:6.1f}%")
    if len(rows) > top:
        rest = sum(sum(t) for _, t in rows[top:])
        out.append(f"  {'(' + str(len(rows) - top) + ' more types)':<44} {'':4} {rest:9.3f} ms "
                   f"{100 * rest / total if total else 0:6.1f}%")
    return out


def _kernel_label(k: dict) -> str:
    fused = k.get("fused")
    return "+".join([str(k.get("kernel_kind") or k["name"]), *map(str, fused)]) if fused else str(k["name"])


def _ms(v: float) -> str:
    """Milliseconds with three decimals, or three significant digits below 1 ms."""
    return f"{v:.3f}" if abs(v) >= 1 else f"{v:#.3g}"


def interval_lines(e2e: dict[str, Any]) -> list[str]:
    """The e2e median with an interval that always exists (:func:`pipelines.stats.median_interval`:
    the record's distribution-free CI across processes when there are enough, else a t-interval
    over the process medians, else a bootstrap over one process's runs), and the spreads."""
    from .stats import median_ci_ranks, median_interval

    pooled = e2e.get("pooled", {})
    level = float(pooled.get("ci_level") or 0.95)
    k = int(e2e["processes"])
    lo, hi = e2e.get("medians_ci_low_ms"), e2e.get("medians_ci_high_ms")
    if lo is not None and hi is not None and not (math.isnan(lo) or math.isnan(hi)):  # the record's own
        how = f"distribution-free, across the {k} process medians"
    else:
        iv = median_interval(e2e["samples_ns"], level)
        lo, hi = iv["low_ms"], iv["high_ms"]
        need = next(n for n in range(2, 1000) if median_ci_ranks(n, level))
        how = {"t": f"t-interval over the {k} process medians; the distribution-free one needs {need} processes",
               "bootstrap": (f"bootstrap over the {iv['runs']} runs of 1 process: within-process noise only, the "
                             "drift between processes is not in it (--processes 2 or more)")
               }.get(iv["kind"], f"distribution-free, across the {k} process medians")
    return [f"e2e  median {_ms(e2e['latency_ms'])} ms, {level:.0%} interval {_ms(lo)}-{_ms(hi)} ms ({how})",
            (f"     {k} processes, {e2e['n']} runs; between-process spread {100 * e2e.get('between_rel_range', 0):.1f}%, "
             f"within-process CV {100 * e2e.get('within_cv', 0):.1f}%; pooled p10-p90 {pooled.get('p10_ms', 0):.3f}-"
             f"{pooled.get('p90_ms', 0):.3f} ms")]


def kept_loads(record: dict[str, Any]) -> list[dict[str, Any]]:
    """What the machine did around each kept process of the record (e2e, op, kernel; a process
    that recorded two granularities counted once), observed ones only."""
    loads = [pp.get("load") for pp in record["e2e"].get("per_process", [])]
    loads += [(record.get(mode) or {}).get("load") for mode in ("op", "kernel")]
    seen, out = set(), []
    for x in loads:
        key = json.dumps(x, sort_keys=True)
        if x and x.get("observed") and key not in seen:
            seen.add(key)
            out.append(x)
    return out


def load_lines(record: dict[str, Any]) -> list[str]:
    """The load and the speed probe's reading over the kept processes, and the limits the
    measure stage's check (:func:`pipelines.machine_load.judge`) held them to; with the check off
    (``--allow-load``), which processes it would have measured again, and a warning."""
    from .machine_load import LoadConfig, judge, judged_share

    load = record.get("load") or {}
    loads = kept_loads(record)
    if not load.get("observed") or not loads:
        return [f"load and speed probe: not read ({load.get('reason') or 'no load recorded'})"]
    check = load.get("check") or {}
    limits = LoadConfig(**{**{k: v for k, v in check.items() if k in LoadConfig.__dataclass_fields__}, "check": True})
    checked = check.get("check", True)
    share = max(judged_share(x) for x in loads)
    unresolved = (f"; up to {100 * load['max_foreign_busy_frac']:.0f}% within /proc/stat's two clock ticks per core, "
                  "not counted") if load["max_foreign_busy_frac"] > share else ""
    lines = [(f"load: other processes used at most {100 * share:.0f}% of the pinned cores "
              f"(limit {100 * limits.max_foreign_busy:.0f}%{unresolved}), the hypervisor stole at most "
              f"{100 * load['max_steal_frac']:.0f}% (limit {100 * limits.max_steal:.0f}%), load average up to "
              f"{load.get('max_loadavg')}; {load.get('remeasured') or 0} process(es) measured again under load")]
    probes = [x["probe"] for x in loads if x.get("probe")]
    if probes:
        import statistics

        slow = [float(pr["slowdown"]) for pr in probes]
        ref = ", ".join(f"CPU {c} {1e3 * float(v):.3f} ms" for c, v in sorted(probes[-1]["best_s"].items()))
        limit = (f"limit {100 * limits.max_slowdown:.0f}% (measure.load.max_slowdown)"
                 if limits.max_slowdown is not None else "no limit (measure.load.max_slowdown: null)")
        lines.append(f"probe: over the {len(probes)} kept processes the pinned cores ran the speed probe a median "
                     f"{100 * statistics.median(slow):.0f}% and at most {100 * max(slow):.0f}% slower than their "
                     f"fastest (reference {ref}); {limit}")
    else:
        lines.append("probe: not run (measure.load.probe: false)")
    if not checked:
        why = [w for w in (judge(x, limits) for x in loads) if w]
        warn = f", e.g. {why[0]}: these times are slower than a quiet machine's" if why else ""
        lines.append(f"load check off (--allow-load, or measure.load.check: false): {len(why)} of {len(loads)} kept "
                     f"processes would have been measured again{warn}")
    return lines


RELEASE_SPEED_TOLERANCE = 0.10  # this machine's probe within 10% of the release's reference reads "as fast"


def release_line(record: dict[str, Any], release: dict[str, Any] | None) -> str | None:
    """How this machine's cores compare with the release's machine (host CPU scenarios only):
    the median of the speed probe's readings around the kept processes over the release's
    ``probe_reference_s`` of the same CPU. Slower than the release's machine means host
    predictions, priced on that machine, read fast here."""
    if not release:
        return None
    import statistics

    readings: dict[str, list[float]] = {}
    for x in kept_loads(record):
        for side in ("before_s", "after_s"):
            for c, v in ((x.get("probe") or {}).get(side) or {}).items():
                readings.setdefault(str(c), []).append(float(v))
    label, ref = release["label"], release["probe_reference_s"]
    if not readings:
        return f"release: no speed probe in the record (measure.load.probe: false): no comparison with {label}"
    common = sorted(set(readings) & set(ref), key=int)
    if not common:
        return f"release: {label} has no probe reference for CPU(s) {', '.join(sorted(readings, key=int))}"
    ratio = {c: statistics.median(readings[c]) / float(ref[c]) for c in common}
    worst = max(ratio.values())
    cpus = ", ".join(f"CPU {c} {1e3 * statistics.median(readings[c]):.3f} ms vs {1e3 * float(ref[c]):.3f} ms "
                     f"({ratio[c]:.2f}x)" for c in common)
    machine = f", {', '.join(release.get('processors') or [])}" if release.get("processors") else ""
    if worst > 1 + RELEASE_SPEED_TOLERANCE:
        verdict = (f"this machine reads {100 * (worst - 1):.0f}% slower than the release's machine{machine}, so "
                   "host predictions (latbench predict), priced on that machine, read fast here")
    elif worst < 1 - RELEASE_SPEED_TOLERANCE:  # every CPU of the set reads faster
        verdict = (f"this machine reads {100 * (1 - worst):.0f}% faster than the release's machine{machine}, so "
                   "host predictions, priced on that machine, read slow here")
    else:
        verdict = f"as fast as the release's machine{machine}, within {100 * RELEASE_SPEED_TOLERANCE:.0f}%"
    other = release.get("processor")
    if other and release.get("processors") and other not in release["processors"]:
        verdict += f"; this machine's processor is {other}"
    n = sum(len(v) for v in readings.values())
    return (f"release: the speed probe here (median of {n} readings around the kept processes) against "
            f"{label}'s reference: {cpus}: {verdict}")


def summary_lines(p: Profile, top: int = 8) -> list[str]:
    """The report ``latbench profile`` prints: whether the record was reused, the e2e median with
    its interval, the load and speed probe (and, on the host CPU, this machine against the
    release's), the top ops and kernels, gaps, where the files are."""
    r = p.record
    sc = r["scenario"]
    where = f"cpus {','.join(map(str, sc.get('cpus') or [])) or '-'}, {sc.get('threads')} thread(s)" \
        if sc.get("accelerator") == "cpu" else f"gpu {r.get('runtime', {}).get('gpu') or ''}".strip()
    lines = [f"{p.scenario_id}  ({where})"]
    if p.reused:
        check = (r.get("load") or {}).get("check") or {}
        unchecked = ", kept with the load check off" if check.get("check") is False else ""
        lines.append(f"reused the stored record from {p.reused} ({p.out / (r['model_id'] + '.json')}{unchecked}); "
                     "measure anew with --fresh")
    lines += interval_lines(r["e2e"])
    lines += load_lines(r)
    rel = release_line(r, p.release)
    if rel:
        lines.append(rel)
    for mode, what, entries, label in (("op", "ops", "ops", lambda o: str(o["name"])),
                                       ("kernel", "kernels", "kernels", _kernel_label)):
        m = r.get(mode)
        if not m or not m.get(entries):
            why = r["protocol"].get("granularities_not_offered", {}).get(mode)
            if why:
                lines.append(f"{what}: not offered here: {why}")
            continue
        run_ms = float(m["summary"]["median_ms"])
        total = sum(float(x.get("median_ms") or 0.0) for x in m[entries])
        fw = sc.get("framework")
        kind = {"op": "builtin kernels, XNNPACK off" if fw == "tflite" else
                "ONNX Runtime's profiler" if fw == "onnxruntime" else
                "ExecuTorch's portable kernels, ETDump" if fw == "executorch" else "torch.profiler",
                "kernel": "as the runtime executed them"}[mode]
        lines.append(f"top {what} ({len(m[entries])} in the {mode} process, {kind}; share of their sum):")
        lines += _share_rows(m[entries], total, top, label)
        gap = run_ms - total
        lines.append(f"  {mode} process run median {run_ms:.3f} ms, sum of {what} {total:.3f} ms: "
                     f"{gap:.3f} ms ({100 * gap / run_ms if run_ms else 0:.1f}%) outside any {what[:-1]} "
                     f"(nnPerf's data preparation: inputs, outputs, runtime overhead)")
        ov = m.get("overhead") or {}
        if ov.get("ratio"):
            lines.append(f"  profiler overhead: profiled/unprofiled run ratio {ov['ratio']:.3f}")
        if mode == "kernel":
            parts = sorted({k.get("partition") for k in m[entries] if k.get("partition") is not None})
            fused = [k for k in m[entries] if k.get("fused")]
            if fused:
                lines.append(f"  fused kernels: {len(fused)} of {len(m[entries])} run several ops, e.g. "
                             + ", ".join(sorted({_kernel_label(k) for k in fused})[:4]))
            elif parts:
                lines.append(f"  {len(m[entries])} kernels in {len(parts)} delegate partition(s); XNNPACK fuses "
                             "activations and batch norm into the conv/fc kernel it names")
    for mode in ("op", "kernel"):
        t = p.trace(mode)
        if t is not None and t.is_file():
            lines.append(f"trace ({mode}): {t}  (open in https://ui.perfetto.dev or chrome://tracing)")
    lines.append(f"record: {p.out / (r['model_id'] + '.json')}")
    for n in p.notes:
        lines.append(f"note: {n}")
    return lines


__all__ = ["Profile", "ProfileError", "ProfileRequest", "check_model_file", "device_config", "forget",
           "framework_of", "interval_lines", "load_lines", "pte_program", "release_line", "release_reference",
           "run_profile", "static_tflite", "summary_lines", "tflite_precision", "torchscript_precision"]
