"""The ``assemble`` stage: IR files and measurement records -> the dataset tables and card.

Reads, under ``data_dir``, what the measure stages wrote (``measurements/<device>/<scenario>/``:
``SCENARIO.json``, one ``<model_id>.json`` record per measured pair, ``<model_id>.error.json``
per failed pair), the IR of every network a record names (``models/<source>/<model_id>.json``)
and the measured ``.tflite`` files for the op configuration (a TFLite pair whose file ``latbench
prune`` deleted takes its rows from the release instead; the other runtimes' records hold their
op configuration themselves). Writes ``dataset/``: the five tables
(``pipelines/dataset/schema.py``, checked on write), ``failures.csv`` and DATASET.md with its
figures (``pipelines/dataset/card.py``). Every row has ``dataset = latbench`` and its provenance
(``source_file`` relative to ``data_dir``, ``source_column`` the JSON path inside it).

Deterministic: rows are sorted by their keys and nothing depends on the clock or on the order
files are listed in, so the same inputs give byte-identical files. Records are read through their
type (:class:`pipelines.measure.records.Record`, which the measure stage writes). A record that
lacks part of its structure, contradicts its folder (another scenario, another model id, an
unknown schema) or names a network without an IR file is an :class:`AssembleError` naming the
file. docs/dataset.md (*Assembling the suite's own
measurements*) has what goes into each table, column by column.
"""
from __future__ import annotations

import csv
import json
import math
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from foundation.atomic import atomic_path

from .dataset.opfeatures import (
    TfliteReadError,
    kernel_type,
    op_type,
    read_tflite_ops,
    onnx_features,
    tflite_features,
    torch_features,
)
from .dataset.schema import TABLES, TableBuilder
from .measure.records import Record, RecordError
from .prune import is_dropped
from .release import Release
from .runners import RUNNERS, runner_for
from .runners.records import GPU_EVENT_KEYS

DATASET = "latbench"
OUT = "dataset"  # <data_dir>/dataset
FAILURES = "failures.csv"
FAILURE_COLUMNS = ("model_id", "scenario_id", "kind", "error", "processes_done", "source_file")
LATENCY_STAT = "median_of_process_medians"
# the parameters of a stopping rule that apply to it (the record keeps all of the config section)
STOPPING_PARAMS = {"fixed": ("runs",), "adaptive": ("rel_width", "level", "batch", "max_processes")}
# kernel source -> what timed its kernels (kernels.config.timing); ExecuTorch's kernels (XNNPACK
# operators and portable kernels) are timed by its ETDump whatever their source
KERNEL_TIMING = {"xnnpack": "litert_profiler", "builtin": "litert_profiler", "gpu": "gpu_timestamps"}
ETDUMP_TIMING = "executorch_etdump"
# what a kernels row keeps in config of its aggregated entry (the keys it has)
KERNEL_CONFIG_KEYS = ("source", "partition", "index_in_partition", "node", *GPU_EVENT_KEYS, "shader_mismatch")


class AssembleError(ValueError):
    """Input the stage cannot assemble; one line naming the file and what is wrong."""


# ---------------------------------------------------------------- model families
def _meta(key: str) -> Callable[[dict, str], Any]:
    return lambda meta, name: meta.get(key)


def _pytorch_family(meta: dict, name: str) -> str:
    from .dataset.usc import usc_family

    return usc_family(meta.get("pytorchcv") or name)


# generator source -> (family, arch recipe) from the IR's meta and name; one entry per source
FAMILIES: dict[str, Callable[[dict, str], Any]] = {
    "nasbench201": lambda meta, name: "nasbench201",
    "zoo": _meta("family"),
    "synthetic": lambda meta, name: "synthetic",
    # the transformer space's networks with a convolution front (stem, conv stages) are hybrids
    "transformer": lambda meta, name: "hybrid" if meta.get("front") == "conv" else "transformer",
    "pytorch": _pytorch_family,
}
ARCHS: dict[str, Callable[[dict, str], Any]] = {
    "nasbench201": _meta("arch_str"),
    "pytorch": _meta("pytorchcv"),
}


# ---------------------------------------------------------------- small helpers
def _num(v: Any) -> float | None:
    """A finite number, else None (records write NaN for statistics too few samples allow)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int(v: Any) -> int | None:
    f = _num(v)
    return None if f is None else int(f)


def _pos(v: Any) -> float | None:
    f = _num(v)
    return f if f is not None and f > 0 else None


def event_latency(entry: dict) -> tuple[float | None, str | None]:
    """(time in ms, which statistic) of an aggregated op or kernel entry: the median over the
    profiled runs; the mean when the median is 0 (below the profiler's 1 us tick) but the mean
    is not; (None, None) when both are 0."""
    med, mean = _num(entry.get("median_ms")), _num(entry.get("mean_ms"))
    if med is not None and med > 0:
        return med, "median"
    if mean is not None and mean > 0:
        return mean, "mean"
    return None, None


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _read_json(path: Path) -> dict:
    try:
        d = json.loads(path.read_text())
    except OSError as e:
        raise AssembleError(f"{path}: cannot read: {e.strerror}") from None
    except ValueError as e:
        raise AssembleError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(d, dict):
        raise AssembleError(f"{path}: expected a JSON object")
    return d


def _get(d: dict, path: Path, *keys: str) -> Any:
    """``d[k1][k2]...``, or an AssembleError naming the file and the missing key."""
    cur: Any = d
    for i, k in enumerate(keys):
        if not isinstance(cur, dict) or k not in cur:
            raise AssembleError(f"{path}: missing key {'.'.join(keys[:i + 1])!r}")
        cur = cur[k]
    return cur


def read_record(path: Path) -> Record:
    """A measure record file as its type; an AssembleError (the :class:`RecordError`'s line:
    the file and the missing or bad key) when it does not have the record's structure."""
    try:
        return Record.from_json(_read_json(path), path)
    except RecordError as e:
        raise AssembleError(str(e)) from None


# ---------------------------------------------------------------- reading the measurements
@dataclass
class ScenarioFolder:
    device: str
    path: Path
    info: dict  # SCENARIO.json
    records: list[Path] = field(default_factory=list)
    errors: list[Path] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.info.get("status", "")


def scan(measurements: Path) -> list[ScenarioFolder]:
    """Every scenario folder (sorted by device, folder name) with its record and error files."""
    out = []
    if not measurements.is_dir():
        return out
    for dev in sorted(p for p in measurements.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for sdir in sorted(p for p in dev.iterdir() if p.is_dir() and not p.name.startswith(".")):
            info_path = sdir / "SCENARIO.json"
            if not info_path.is_file():
                raise AssembleError(f"{sdir}: no SCENARIO.json (not a folder the measure stage wrote?)")
            f = ScenarioFolder(dev.name, sdir, _read_json(info_path))
            for p in sorted(sdir.glob("*.json")):
                if p.name == "SCENARIO.json" or p.name.startswith(".") or p.name.endswith(".trace.json"):
                    continue
                (f.errors if p.name.endswith(".error.json") else f.records).append(p)
            out.append(f)
    return out


def index_models(models_dir: Path) -> dict[str, Path]:
    """model_id -> its IR file (``models/<source>/<model_id>.json``; the first source by name
    when a network was generated by two)."""
    out: dict[str, Path] = {}
    if models_dir.is_dir():
        for p in sorted(models_dir.glob("*/*.json")):
            out.setdefault(p.stem, p)
    return out


# ---------------------------------------------------------------- rows
def model_row(path: Path, rel: str) -> dict[str, Any]:
    """A models row from an IR file (the canonical JSON the generate stage wrote)."""
    text = path.read_text()
    d = _read_json(path)
    if d.get("format") != "latbench-ir":
        raise AssembleError(f"{path}: not a latbench IR file (format={d.get('format')!r})")
    if d.get("model_id") != path.stem:
        raise AssembleError(f"{path}: model_id {d.get('model_id')!r} does not match the file name")
    meta = d.get("meta") or {}
    source = str(_get(d, path, "source"))
    name = str(d.get("name") or path.stem)
    summary = _get(d, path, "summary")
    inputs = [n for n in d.get("nodes", []) if n.get("op") == "input"]
    shape = inputs[0].get("shapes", [[]])[0] if inputs else []
    return dict(
        model_id=path.stem, name=name, source=source,
        family=FAMILIES[source](meta, name) if source in FAMILIES else None,
        seed=_int(meta.get("seed")), arch=ARCHS[source](meta, name) if source in ARCHS else None,
        input_shape="x".join(map(str, shape)) or "unknown", nodes=_int(summary.get("nodes")),
        flops=_int(summary.get("flops")), params=_int(summary.get("params")),
        memory_bytes_fp32=_int((summary.get("memory_bytes") or {}).get("fp32")),
        ir=text, meta=_json(meta), dataset=DATASET, source_file=rel,
    )


def _cpu_words(cores: str | None) -> str:
    from .devices.topology import parse_label

    if not cores:
        return "no CPU core set"
    words = [f"{n} {tag} core{'s' if n > 1 else ''}" for n, tag in parse_label(cores)]
    return " + ".join(words)


def _cpu_description(dev: dict) -> str | None:
    clusters = dev.get("clusters") or []
    if not clusters:
        return None
    parts = []
    for c in clusters:
        khz = _num(c.get("max_freq_khz"))
        parts.append(f"{len(c.get('cpus') or [])}x {c.get('name')}" + (f" {khz / 1e6:.2f} GHz" if khz else ""))
    return " + ".join(parts)


def scenario_row(folder: ScenarioFolder, versions: list[str], rel: str, engines: list[str] = ()) -> dict[str, Any]:
    """A scenarios row from a measured folder's SCENARIO.json; ``versions`` and ``engines`` (the
    quantized engine of PyTorch int8 runs) come from its records."""
    sc = _get(folder.info, folder.path / "SCENARIO.json", "scenario")
    dev = folder.info.get("device") or {}
    device_model = " ".join(str(dev[k]) for k in ("manufacturer", "model") if dev.get(k)) or None
    soc = dev.get("soc") or dev.get("cpu_model")
    fw = sc.get("framework")
    version = ", ".join(versions) or None
    where = f"{sc['device']}" + (f" ({', '.join(str(x) for x in (soc, dev.get('machine')) if x)})" if soc else "")
    threads = sc.get("threads")
    cpus = ",".join(map(str, sc.get("cpus") or []))
    engine = f" ({', '.join(engines)} quantized engine)" if engines and sc.get("precision") == "int8" else ""
    acc = sc.get("accelerator", "cpu")
    runner = runner_for(fw, acc)
    runtime = f"{runner.title if runner and runner.title else fw}{' ' + version if version else ''}"
    gpu = dev.get("gpu") if isinstance(dev.get("gpu"), str) else None
    if acc == "gpu":  # no core set: the precision is the GPU's compute precision (docs/gpu.md)
        desc = (f"{where}, {runtime} on the GPU{f' ({gpu})' if gpu else ''}: {sc.get('precision')} compute, "
                f"batch {sc.get('batch', 1)}")
    else:
        desc = (f"{where}, {runtime} on the {acc.upper()}: {_cpu_words(sc.get('cores'))}"
                f"{f' (CPUs {cpus})' if cpus else ''}, {threads} thread{'s' if threads != 1 else ''}, "
                f"{sc.get('precision')}{engine}, batch {sc.get('batch', 1)}")
    return dict(
        scenario_id=sc["scenario_id"], device=sc["device"], device_model=device_model, soc=soc,
        cpu=_cpu_description(dev), gpu=gpu, framework=fw, framework_version=version, accelerator=acc,
        cores=sc.get("cores"),
        core_count=_int(sc.get("core_count")), threads=_int(threads), heterogeneous=sc.get("heterogeneous"),
        precision=sc.get("precision"), batch=int(sc.get("batch") or 1), description=desc, dataset=DATASET,
        source_file=rel, source_column="scenario",
    )


def runtime_version(meta: dict) -> str | None:
    """``litert 2.3.0 (latbench-run 0.1.0)``: the inference library and the measuring tool."""
    lib = " ".join(str(meta[k]) for k in ("runtime", "runtime_version") if meta.get(k))
    tool = " ".join(str(meta[k]) for k in ("tool", "tool_version") if meta.get(k))
    return (f"{lib} ({tool})" if lib and tool else lib or tool) or None


def output_check(rec: Record) -> dict[str, Any]:
    """The GPU output check of a record's processes (pipelines/gpu/validate.py): ``ok`` or
    ``fp16_overflow`` (a failed check fails the pair, so it never reaches a record)."""
    v = (rec.runtime.get("gpu") or {}).get("validation")
    if not isinstance(v, dict):
        return {}
    return {"output_check": "fp16_overflow" if v.get("fp16_overflow") else "ok",
            "output_rel_err": _num(v.get("rel_l2"))}


def e2e_row(rec: Record, path: Path, rel: str) -> dict[str, Any]:
    e, pooled, proto = rec.e2e, rec.e2e.pooled, rec.protocol
    stop = proto.stopping
    latency = _pos(e.latency_ms)
    if latency is None:
        raise AssembleError(f"{path}: e2e.latency_ms is not a positive number ({e.latency_ms!r})")
    row = dict(
        model_id=rec.model_id, scenario_id=rec.scenario_id, latency_ms=latency,
        latency_stat=LATENCY_STAT, mean_ms=_pos(pooled.mean_ms), median_ms=_pos(pooled.median_ms),
        std_ms=_num(pooled.std_ms), min_ms=_pos(pooled.min_ms), max_ms=_pos(pooled.max_ms),
        p10_ms=_pos(pooled.p10_ms), p90_ms=_pos(pooled.p90_ms), cv=_num(pooled.cv),
        ci_low_ms=_pos(pooled.ci_low_ms), ci_high_ms=_pos(pooled.ci_high_ms),
        ci_level=_pos(pooled.ci_level), repeats=_int(pooled.n), warmup=_int(proto.warmup),
        # records older than the e2e part's own count have the protocol's
        processes=_int(e.processes if e.processes is not None else proto.processes), stopping=stop.policy,
        stop_reason=stop.stop_reason, between_cv=_num(e.between_cv),
        within_cv=_num(e.within_cv), start_ns=_int(e.start_ns), end_ns=_int(e.end_ns),
        runtime_version=runtime_version(rec.runtime), dataset=DATASET, source_file=rel,
        source_column="e2e", page_faults_per_run=_num(e.page_faults_per_run), **output_check(rec),
    )
    for mode in ("op", "kernel"):
        m = rec.profiled(mode)
        if m is not None:
            row[f"{mode}_run_ms"] = _pos(m.summary.median_ms if m.summary else None)
    row.update(load_columns(rec))
    return row


def load_columns(rec: Record) -> dict[str, Any]:
    """The machine's state while the pair was measured (pipelines/machine_load.py); records
    made before the measure stage read it have none (load_observed stays empty)."""
    out: dict[str, Any] = {"host": rec.runtime.get("hostname")}
    load = rec.load
    if load is None:
        return out
    out["load_observed"] = load.observed
    out["remeasured"] = _int(load.remeasured)
    if load.observed:
        out.update(foreign_busy_frac=_num(load.max_foreign_busy_frac), steal_frac=_num(load.max_steal_frac),
                   loadavg_max=_num(load.max_loadavg), probe_slowdown=_num(load.max_probe_slowdown))
        f = load.cpu_freq_khz
        out["cpu_freq_khz"] = f"{f['min']}-{f['max']}" if isinstance(f, dict) else "unknown"
    return out


_STATS = ("runs", "median_ms", "mean_ms", "min_ms", "max_ms")


@dataclass
class Counts:
    """What the assembly met along the way (reported in DATASET.md)."""

    features_missing: Counter = field(default_factory=Counter)  # reason -> op records without features
    stale_protocol: int = 0  # records made with another protocol than their folder's current one


def _tflite_nodes(artifact: Path, rec: Record, cache: dict) -> tuple[list | None, str | None]:
    """The nodes of the measured .tflite, or why its op features cannot be read."""
    key = str(artifact)
    if key not in cache:
        if not artifact.is_file():
            cache[key] = (None, "artifact missing")
        else:
            try:
                cache[key] = (read_tflite_ops(artifact), None)
            except TfliteReadError:
                cache[key] = (None, "artifact unreadable")
    nodes, why = cache[key]
    size = rec.artifact.bytes if rec.artifact else None
    if nodes is not None and size is not None and artifact.stat().st_size != size:
        return None, "artifact changed since it was measured"
    return nodes, why


# frameworks whose op features are read from the measured file (the TFLite flatbuffer's nodes): a
# released pair whose file `latbench prune` deleted keeps the release's rows; the others' rows are
# made again from their records, which hold everything the features need
FEATURES_FROM_ARTIFACT = frozenset({"tflite"})


def _graph(ir: Path, cache: dict) -> Any:
    """The IR graph of ``ir`` (loaded once per assembly)."""
    key = ("graph", str(ir))
    if key not in cache:
        from generators.ir import Graph

        cache[key] = Graph.load(ir)
    return cache[key]


def ir_nodes(ir: Path, artifact: Path | None, rec: Record, cache: dict) -> list[str | None] | None:
    """The IR node of each node of the measured ``.tflite`` (``kernels.xnnpack.file_nodes``:
    when the file's operators are the exporter's plan of ``ir``), else None."""
    if rec.framework != "tflite" or artifact is None:
        return None
    nodes, _ = _tflite_nodes(artifact, rec, cache)
    if nodes is None:
        return None
    key = ("ir_nodes", str(artifact))
    if key not in cache:
        from kernels.xnnpack import file_nodes

        cache[key] = file_nodes(_graph(ir, cache), [(n.name, n.output_names) for n in nodes])
    return cache[key]


def executed_ops(ir: Path, rec: Record, cache: dict) -> list[tuple[str, str, int]] | None:
    """The TFLite operator each kernel of a LiteRT CPU record's kernel process ran, as (IR node,
    builtin, k-th of the node's), from ``kernels.xnnpack.executed_ops`` (the executed XNNPACK
    operators aligned to the deduced ones), else None."""
    k = rec.kernel
    if rec.framework != "tflite" or k is None or not k.kernels:
        return None
    from kernels.xnnpack import executed_ops as align_executed, runtime_group

    groups = [runtime_group(e) for e in k.kernels]
    if any(g is None for g in groups):
        return None
    return align_executed(_graph(ir, cache), [str(e["name"]) for e in k.kernels], groups)


def op_rows(rec: Record, rel: str, artifact: Path | None, counts: Counts, cache: dict,
            nodes_of: list[str | None] | None = None) -> list[dict[str, Any]]:
    """ops rows of one record (its op-granularity process); ``nodes_of`` is the IR node of each
    TFLite node (:func:`ir_nodes`), the rows' ``node``."""
    op = rec.op
    if op is None or not op.ops:
        return []
    fw = rec.framework
    nodes, why = (None, None)
    if fw == "tflite" and artifact is not None:
        nodes, why = _tflite_nodes(artifact, rec, cache)
    rows = []
    for i, o in enumerate(op.ops):
        name = str(o["name"])
        lat, stat = event_latency(o)
        config: dict[str, Any] = {k: o[k] for k in _STATS if k in o}
        config["latency_stat"] = stat
        if stat is None:
            config["latency_missing"] = "median and mean 0: below the profiler's 1 us resolution"
        feats: dict[str, Any]
        if fw == "tflite":
            node = o.get("node")
            config.update(tflite_node=node, kernels="builtin (XNNPACK off in the op-granularity process)")
            n = nodes[node] if nodes is not None and isinstance(node, int) and 0 <= node < len(nodes) else None
            if n is not None and n.name != name:
                why, n = "the artifact's node differs from the record's", None
            if n is None:
                feats = {"op_type": op_type(name)}
                counts.features_missing[why or "node not in the artifact"] += 1
            else:
                feats = tflite_features(n)
                config.update(inputs=n.inputs, outputs=n.outputs, options=n.options)
                if nodes_of is not None:
                    feats["node"] = nodes_of[node]
        elif fw == "onnxruntime":  # a node ONNX Runtime ran, its shapes (the weight's too) from the profiler
            feats = onnx_features(name, o.get("input_shapes"), o.get("output_shapes"))
            config.update(input_shapes=o.get("input_shapes"), output_shapes=o.get("output_shapes"),
                          node_name=o.get("node_name"), provider=o.get("provider"))
        elif fw == "executorch":  # a portable kernel ("upsample_nearest2d.vec_out"): its aten operator
            feats = torch_features(f"aten::{name.split('.')[0]}", None)
            config["portable_kernel"] = name
        else:
            feats = torch_features(name, o.get("input_shapes"))
            config["input_shapes"] = o.get("input_shapes")
        rows.append(dict(
            model_id=rec.model_id, scenario_id=rec.scenario_id, op_index=int(o["order"]),
            framework_op=name, config=_json(config), latency_ms=lat, fused=False, dataset=DATASET,
            source_file=rel, source_column=f"op.ops[{i}]", **feats))
    return rows


def kernel_rows(rec: Record, rel: str, node_to_op: dict[int, int], executed: list[tuple[str, str, int]] | None = None,
                ops: Iterable[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """kernels rows of one record (its kernel-granularity process).

    ``op_index`` is the ops row of the TFLite node a kernel ran: a builtin kernel's own node; an
    XNNPACK operator's, when ``executed`` (:func:`executed_ops`) is given, the row of ``ops`` with
    the same IR node and builtin, k-th among them in op order.

    ``kernel_type`` comes from the kernel's source (``opfeatures.KERNEL_TYPES``); ``config``
    keeps the run statistics, what timed the kernel (``timing``: ``litert_profiler`` in whole
    microseconds, ``executorch_etdump`` for ExecuTorch's, ``gpu_timestamps`` for GPU commands) and the runtime's identification of it:
    the XNNPACK partition or builtin node; for a GPU command the layer's ``kind`` (dispatch |
    copy), ``shader``, ``groups``, ``local_size`` and the program labels ``kernel_kind``,
    ``fused``, ``program`` (pipelines/gpu/programs.py), when the record has them."""
    k = rec.kernel
    if k is None or not k.kernels:
        return []
    op_of: dict[tuple[str, str, int], int] = {}
    seen: Counter = Counter()
    for o in sorted(ops, key=lambda o: o["op_index"]):
        if o.get("node") is not None:
            key = (o["node"], o["framework_op"])
            op_of[(*key, seen[key])] = o["op_index"]
            seen[key] += 1
    rows = []
    for i, e in enumerate(k.kernels):
        lat, stat = event_latency(e)
        src = e.get("source")
        config: dict[str, Any] = {key: e[key] for key in (*_STATS, *KERNEL_CONFIG_KEYS) if key in e}
        config["latency_stat"] = stat
        if rec.framework == "executorch":
            config["timing"] = ETDUMP_TIMING
        elif src in KERNEL_TIMING:
            config["timing"] = KERNEL_TIMING[src]
        if stat is None:
            config["latency_missing"] = "median and mean 0: below the profiler's 1 us resolution"
        node = e.get("node")
        if src == "builtin" and isinstance(node, int):
            op_index = node_to_op.get(node)
        else:
            op_index = op_of.get(executed[i]) if executed is not None else None
        rows.append(dict(
            model_id=rec.model_id, scenario_id=rec.scenario_id, kernel_index=int(e["order"]),
            kernel_name=str(e["name"]), kernel_type=kernel_type(e), op_index=op_index,
            n_ops=1 if op_index is not None else None, latency_ms=lat, config=_json(config), dataset=DATASET,
            source_file=rel, source_column=f"kernel.kernels[{i}]"))
    return rows


# ---------------------------------------------------------------- the stage
@dataclass
class Assembly:
    """The assembled tables plus what the card reports beside them."""

    tables: dict[str, Any]
    failures: list[dict[str, Any]]
    not_offered: list[dict[str, Any]]
    protocols: list[dict[str, Any]]  # one per measured scenario: how its records were made
    counts: Counts

    def summary(self) -> dict[str, int]:
        return {**{t: len(self.tables[t]) for t in TABLES}, "failures": len(self.failures),
                "not_offered": len(self.not_offered)}


def _resolution_counts(table: Any) -> tuple[int, int]:
    """(rows timed by their mean, rows without time) of an ops or kernels table, read from the
    rows' ``config``: the table's own figures, whether a row was assembled from its record or
    taken from the release (a pruned pair), which the assembly walk alone cannot count."""
    if table is None or not len(table) or "config" not in table:
        return 0, 0
    texts = table["config"].dropna().astype(str)
    texts = texts[texts.str.contains('"latency_stat"', regex=False)]  # the suite's rows (public ones have none)
    mean = int(texts.str.contains(r'"latency_stat":\s*"mean"').sum())
    missing = int(texts.str.contains('"latency_missing"', regex=False).sum())
    return mean, missing


def _validate_record(rec: Record, path: Path, folder: ScenarioFolder) -> None:
    """A record against its place (the schema and structure: :func:`read_record`)."""
    if rec.model_id != path.stem:
        raise AssembleError(f"{path}: model_id {rec.model_id!r} does not match the file name")
    sid = rec.scenario_id
    want = folder.info["scenario"]["scenario_id"]
    if sid != want:
        raise AssembleError(f"{path}: scenario {sid!r}, but its folder's SCENARIO.json says {want!r}")


def _artifact(artifacts: Path, rec: Record) -> tuple[Path | None, bool]:
    """The file a record measured, and whether ``latbench prune`` deleted it (pipelines/prune.py)."""
    from generators.export.formats import FORMATS

    sc = rec.scenario
    runner = RUNNERS.get((sc.get("framework"), sc.get("accelerator", "cpu")))
    fmt = (rec.artifact.format if rec.artifact else None) or (runner.formats.get(sc.get("precision")) if runner
                                                             else None)
    try:
        path = artifacts / rec.model_id / FORMATS.get(fmt).filename
    except Exception:  # noqa: BLE001 - an unknown format only costs the op features (counted)
        return None, False
    return path, is_dropped(path.parent, fmt)


def _protocol(folder: ScenarioFolder, recs: list[Record]) -> dict[str, Any]:
    """How one scenario's records were made, from the records (and the folder's settings)."""
    m = folder.info.get("measure") or {}
    stops = Counter(str(r.protocol.stopping.stop_reason) for r in recs)

    def rule(r: Record) -> str:
        stop = r.protocol.stopping
        keep = STOPPING_PARAMS.get(stop.policy, tuple(stop.params))
        return _json({"policy": stop.policy, **{k: stop.params[k] for k in keep if k in stop.params}})

    policies = sorted({rule(r) for r in recs})
    procs = [r.protocol.processes for r in recs]
    runs = [r.protocol.stopping.runs for r in recs]

    def ratio(mode: str) -> float | None:
        """Median profiled / unprofiled run time of the mode's processes (torch records none)."""
        vals = [_num(p.overhead_ratio) for p in (r.profiled(mode) for r in recs) if p is not None]
        vals = sorted(v for v in vals if v is not None)
        return float(np.median(vals)) if vals else None

    return {
        "scenario_id": folder.info["scenario"]["scenario_id"], "records": len(recs), "failures": len(folder.errors),
        "stopping": [json.loads(p) for p in policies], "processes": [min(procs), max(procs)] if procs else None,
        "runs": [min(runs), max(runs)] if runs else None, "stop_reasons": dict(sorted(stops.items())),
        "warmup": sorted({r.protocol.warmup for r in recs}), "op_runs": m.get("op_runs"),
        "overhead_pairs": m.get("overhead_pairs"),
        "granularities": sorted({g for r in recs for g in r.protocol.granularities}),
        "op_overhead": ratio("op"), "kernel_overhead": ratio("kernel"),
    }


def released_failures(release: Release, attempted: set[tuple[str, str]]) -> list[dict[str, Any]]:
    """The committed release's failed pairs (its ``failures.csv``) that this data folder did
    not attempt (no local record or error of the pair): a session measuring only some of the
    grid (a PyTorch-only sweep, say) keeps the other points' failures, which its own walk
    never sees; a pair attempted here is judged by what happened here."""
    path = release.folder / FAILURES
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return [{c: (r.get(c) or None) for c in FAILURE_COLUMNS} for r in rows
            if (r["model_id"], r["scenario_id"]) not in attempted]


def merge_release(frames: dict, release: Release, local_pairs: set[tuple[str, str]],
                  failed_models: set[str] = frozenset()) -> dict:
    """The committed release's rows of the pairs measured elsewhere (no local record of them):
    a sweep continued on another machine assembles into one dataset. Local records win; a
    released scenario or model row is taken where no local one exists (``failed_models``: the
    networks of the release's carried failures, which keep their model rows without e2e rows)."""
    import pandas as pd

    root = release.folder
    if not (root / "e2e.parquet").is_file():
        return frames
    from .dataset.load import load_dataset

    rel = load_dataset(root)
    out = dict(frames)
    for t in ("e2e", "ops", "kernels"):
        r = rel.tables()[t]
        keep = [(m, s) not in local_pairs for m, s in zip(r["model_id"], r["scenario_id"])]
        out[t] = pd.concat([frames[t], r[keep]], ignore_index=True) if any(keep) else frames[t]
    used_s = set(out["e2e"]["scenario_id"])
    used_m = set(out["e2e"]["model_id"]) | set(failed_models)
    for t, key, used in (("scenarios", "scenario_id", used_s), ("models", "model_id", used_m)):
        r = rel.tables()[t]
        r = r[r[key].isin(used) & ~r[key].isin(set(frames[t][key]))]
        out[t] = pd.concat([frames[t], r], ignore_index=True) if len(r) else frames[t]
    return out


def assemble(data_dir: str | Path, progress: bool = False, release: Release | None = None) -> Assembly:
    """Build the tables from ``<data_dir>/{measurements,models,artifacts}`` (see the module doc)."""
    data = Path(data_dir)
    folders = scan(data / "measurements")
    irs = index_models(data / "models")
    artifacts = data / "artifacts"
    b = {t: TableBuilder(t) for t in TABLES}
    failures: list[dict[str, Any]] = []
    not_offered: list[dict[str, Any]] = []
    protocols: list[dict[str, Any]] = []
    counts = Counts()
    wanted_models: set[str] = set()
    seen_pairs: dict[tuple[str, str], Path] = {}
    seen_scenarios: dict[str, Path] = {}
    cache: dict = {}
    released = release.pairs() if release else set()

    def rel(p: Path) -> str:
        return p.relative_to(data).as_posix()

    items: Iterable[ScenarioFolder] = folders
    if progress:
        from tqdm import tqdm

        items = tqdm(folders, desc="assemble", unit="scenario")
    for folder in items:
        if folder.status == "not_offered":
            i = folder.info
            not_offered.append({"device": folder.device, "folder": folder.path.name, "framework": i.get("framework"),
                                "precision": i.get("precision"), "cores": i.get("cores"), "reason": i.get("reason")})
            continue
        if folder.status != "measured":
            raise AssembleError(f"{folder.path / 'SCENARIO.json'}: status {folder.status!r} (expected measured or "
                                "not_offered)")
        sid = _get(folder.info, folder.path / "SCENARIO.json", "scenario", "scenario_id")
        if sid in seen_scenarios:
            raise AssembleError(f"{folder.path}: scenario {sid!r} is also measured in {seen_scenarios[sid]}")
        seen_scenarios[sid] = folder.path
        recs: list[Record] = []
        for path in folder.records:
            rec = read_record(path)
            _validate_record(rec, path, folder)
            recs.append(rec)
            mid = rec.model_id
            artifact, pruned = _artifact(artifacts, rec)
            if pruned and (mid, sid) in released and rec.framework in FEATURES_FROM_ARTIFACT:
                continue  # its rows come from the release, made while the file (its op features) existed
            if mid not in irs:
                raise AssembleError(f"{path}: model {mid} has no IR file under {data / 'models'}")
            if (mid, sid) in seen_pairs:  # pragma: no cover - folders are unique per scenario id
                raise AssembleError(f"{path}: pair already read from {seen_pairs[(mid, sid)]}")
            seen_pairs[(mid, sid)] = path
            wanted_models.add(mid)
            if rec.protocol.digest != folder.info.get("protocol_digest"):
                counts.stale_protocol += 1
            r = rel(path)
            b["e2e"].add(**e2e_row(rec, path, r))
            nodes_of = ir_nodes(irs[mid], artifact, rec, cache)
            ops = op_rows(rec, r, artifact, counts, cache, nodes_of)
            for row in ops:
                b["ops"].add(**row)
            node_to_op = {json.loads(o["config"]).get("tflite_node"): o["op_index"] for o in ops}
            executed = executed_ops(irs[mid], rec, cache) if nodes_of is not None and ops else None
            for row in kernel_rows(rec, r, node_to_op, executed, ops):
                b["kernels"].add(**row)
        for path in folder.errors:
            err = _read_json(path)
            mid = str(err.get("model_id") or path.name[: -len(".error.json")])
            if mid in irs:
                wanted_models.add(mid)
            failures.append({"model_id": mid, "scenario_id": err.get("scenario_id", sid), "kind": err.get("kind"),
                             "error": err.get("error"), "processes_done": err.get("processes_done"),
                             "source_file": rel(path)})
        versions = sorted({v for v in (runtime_version(r.runtime) for r in recs) if v})
        engines = sorted({str(r.runtime["engine"]) for r in recs if r.runtime.get("engine")})
        b["scenarios"].add(**scenario_row(folder, [v.split(" (")[0] for v in versions],
                                          rel(folder.path / "SCENARIO.json"), engines))
        protocols.append(_protocol(folder, recs))
    for mid in sorted(wanted_models):
        b["models"].add(**model_row(irs[mid], rel(irs[mid])))
    keys = {"models": ["model_id"], "scenarios": ["scenario_id"], "e2e": ["scenario_id", "model_id"],
            "ops": ["scenario_id", "model_id", "op_index"], "kernels": ["scenario_id", "model_id", "kernel_index"]}
    frames = {t: b[t].frame() for t in TABLES}
    if release:
        local = set(seen_pairs) | {(f["model_id"], str(f["scenario_id"])) for f in failures}
        carried = released_failures(release, local)
        failures += carried
        frames = merge_release(frames, release, set(seen_pairs), {f["model_id"] for f in carried})
    tables = {t: frames[t].sort_values(keys[t], kind="stable").reset_index(drop=True) for t in TABLES}
    failures.sort(key=lambda f: (str(f["scenario_id"]), f["model_id"]))
    not_offered.sort(key=lambda f: (f["device"], f["folder"]))
    protocols.sort(key=lambda p: p["scenario_id"])
    return Assembly(tables, failures, not_offered, protocols, counts)


def write_failures(path: Path, failures: list[dict[str, Any]]) -> Path:
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(FAILURE_COLUMNS)
        for row in failures:
            w.writerow(["" if row.get(c) is None else row[c] for c in FAILURE_COLUMNS])
    return path


def card_sections(a: Assembly, fig_dir: Path | None = None) -> list[tuple[str, str]]:
    """The parts of DATASET.md about the suite's own measurements: the protocol as recorded,
    the time-resolution rule, the GPU scenarios (with their figure, drawn into ``fig_dir``),
    failures, grid points not offered."""
    from .dataset.card import markdown_table

    out: list[tuple[str, str]] = []
    if a.protocols:
        rows = []
        for p in a.protocols:
            stops = "; ".join(f"{s.get('policy')}: " + ", ".join(f"{k}={s[k]}" for k in STOPPING_PARAMS.get(
                s.get("policy"), sorted(set(s) - {"policy"})) if k in s) for s in p["stopping"]) or "-"
            rng = lambda v: "-" if not v else (str(v[0]) if v[0] == v[1] else f"{v[0]}-{v[1]}")  # noqa: E731
            reasons = ", ".join(f"{k} {v}" for k, v in p["stop_reasons"].items()) or "-"
            over = " / ".join("-" if p[k] is None else f"{p[k]:.3f}" for k in ("op_overhead", "kernel_overhead"))
            rows.append([f"`{p['scenario_id']}`", p["records"], p["failures"], stops, rng(p["processes"]),
                         rng(p["runs"]), reasons, ", ".join(map(str, p["warmup"])) or "-", p["op_runs"] or "-", over])
        text = (
            "Each (model, scenario) pair was measured in several fresh processes pinned to the scenario's CPUs, "
            "interleaved with the other models' processes; the headline `e2e.latency_ms` is the median of the "
            "per-process medians (`latency_stat = median_of_process_medians`), the other e2e statistics pool all "
            "timed runs. The stopping rule, processes, timed runs and why measuring stopped, per scenario, as the "
            "records state them:\n\n"
            + markdown_table(rows, ["scenario", "pairs", "failed", "stopping rule", "processes", "timed runs",
                                    "stop reasons", "warm-up / process", "op/kernel runs",
                                    "profiler overhead op / kernel"])
            + "\n\nOp and kernel times come from one extra process each (`op/kernel runs` timed runs, the profiler "
            "on; the overhead column is the median ratio of profiled to unprofiled run time measured in that "
            "process). **Op times (`ops`) are of the builtin TFLite kernels**: the op-granularity process runs "
            "with XNNPACK off so that every TFLite node is timed on its own; **e2e and kernel times (`kernels`) "
            "are with XNNPACK**, whose operators fuse and re-partition the nodes. Summed op times therefore "
            "exceed the e2e latency of the same model on the CPU; `e2e.op_run_ms` / `e2e.kernel_run_ms` are the "
            "end-to-end times of the profiled processes themselves, the reference for sums of op or kernel "
            "times. PyTorch ops are TorchScript operators as torch.profiler reports them.")
        out.append(("How the suite's measurements were made", text))
    c = a.counts
    (op_mean, op_missing), (kernel_mean, kernel_missing) = (_resolution_counts(a.tables[t]) for t in ("ops", "kernels"))
    res = (f"The profilers tick in whole microseconds: an op or kernel whose median over the profiled runs is 0 "
           f"has its mean as `latency_ms` when that is > 0, else no time (`config.latency_stat` says which). "
           f"Ops: {op_mean} from the mean, {op_missing} without time; kernels: {kernel_mean} from the mean, "
           f"{kernel_missing} without time.")
    if c.features_missing:
        res += " Ops without configuration columns (the .tflite could not be matched): " + ", ".join(
            f"{n} ({why})" for why, n in sorted(c.features_missing.items())) + "."
    if c.stale_protocol:
        res += (f" {c.stale_protocol} record(s) were made with another protocol than their scenario folder's "
                "current settings (their e2e rows state their own).")
    out.append(("Time resolution", res))
    from .dataset.card import gpu_section
    from .dataset.load import Dataset

    gpu = gpu_section(Dataset(a.tables, check=False), fig_dir)
    if gpu:
        out.append(gpu)
    if a.failures:
        kinds = Counter(str(f["kind"]) for f in a.failures)
        rows = [[f"`{f['scenario_id']}`", f"`{f['model_id']}`", f["kind"], str(f["error"])[:160].replace("|", "/")]
                for f in a.failures[:30]]
        text = (f"{len(a.failures)} pair(s) failed (" + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
                + f"); all are listed in `{FAILURES}`" + (", the first 30 here" if len(a.failures) > 30 else "")
                + ":\n\n" + markdown_table(rows, ["scenario", "model", "kind", "error"]))
    else:
        text = f"No pair failed (`{FAILURES}` has its header only)."
    out.append(("Failures", text))
    if a.not_offered:
        rows = [[f["device"], f"`{f['folder']}`", f["reason"]] for f in a.not_offered]
        out.append(("Grid points not offered", "Points of the scenario grid the device does not offer (the measure "
                    "stage recorded why and measured nothing):\n\n"
                    + markdown_table(rows, ["device", "folder", "reason"])))
    return out


def run_assemble(cfg: Any = None, *, data_dir: str | Path | None = None, out_dir: str | Path | None = None,
                 progress: bool = True, card: bool = True) -> dict[str, Any]:
    """The stage: assemble ``<data_dir>`` into ``<data_dir>/dataset`` (or ``out_dir``).

    Returns the row counts per table plus ``failures`` and ``not_offered``."""
    from .dataset.load import Dataset, save_tables

    data = Path(data_dir if data_dir is not None else cfg.data_dir)
    out = Path(out_dir) if out_dir is not None else data / OUT
    r = getattr(cfg, "release", None)
    release = Release.configured(r) if (r is not None and r.reuse) else None
    a = assemble(data, progress=progress, release=release)
    out.mkdir(parents=True, exist_ok=True)
    save_tables(a.tables, out)
    write_failures(out / FAILURES, a.failures)
    from .dataset.card import FIGURE_FILES, write_card, write_summary

    ds = Dataset(a.tables, path=out, check=False)
    if card:
        write_card(ds, out, sections=card_sections(a, out))
    # the stage's DVC metrics and plots (dvc.yaml): files in git beside the cached tables
    metrics = data / "metrics"
    write_summary(ds, metrics / "dataset.json")
    for name in FIGURE_FILES:
        (metrics / name).unlink(missing_ok=True)
        if (out / name).is_file():
            shutil.copyfile(out / name, metrics / name)
    return {**a.summary(), "out": out}
