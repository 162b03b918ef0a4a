"""The dataset's tables as data: columns (name, dtype, unit, description), keys, checks.

Five tables, one parquet file each: ``models``, ``scenarios``, ``e2e``, ``ops``, ``kernels``.
A schema is plain data (:data:`SCHEMAS`), so the docs (docs/dataset.md, DATASET.md) and the
checks are generated from the same place.

Conventions (DESIGN.md): latency is float64 milliseconds in a column named ``*_ms``; raw
timestamps are integer nanoseconds in ``*_ns``; every row carries its provenance (which
dataset, which source file / row / column, which commit of it). Text is pandas' string
dtype, counts are int64 (``Int64`` when a value may be missing), flags are ``boolean``.

:func:`check_table` validates a DataFrame against its schema and raises :class:`SchemaError`
listing every fault (table, column, first offending row); :func:`conform` brings a frame a
producer built to the schema's column order and dtypes (adding absent optional columns as
missing), so producers only fill what they know.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from foundation.atomic import atomic_path

SCHEMA_VERSION = "1.5"
TABLES = ("models", "scenarios", "e2e", "ops", "kernels")
PARQUET_META_KEY = b"latbench"  # parquet key-value metadata: {"table": ..., "schema_version": ...}

# dtype names used in schemas -> what a column may hold
DTYPES = {
    "string": "text (pandas string dtype)",
    "int64": "integer, never missing",
    "Int64": "integer, may be missing",
    "float64": "float64",
    "boolean": "true/false, may be missing",
}


class SchemaError(ValueError):
    """A table does not match its schema; the message lists every fault, one per line."""


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # a key of DTYPES
    description: str
    unit: str = ""
    required: bool = False  # never missing
    positive: bool = False  # > 0 where present (latencies)
    nonnegative: bool = False  # >= 0 where present (spreads, counts)

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"column {self.name!r}: unknown dtype {self.dtype!r}")
        if self.dtype == "int64" and not self.required:
            raise ValueError(f"column {self.name!r}: int64 columns are required (use Int64 for optional)")
        # the unit conventions are part of the schema: a latency column is *_ms in ms, a timestamp *_ns in ns
        for suffix, unit in (("_ms", "ms"), ("_ns", "ns")):
            if self.name.endswith(suffix) != (self.unit == unit):
                raise ValueError(f"column {self.name!r}: columns named *{suffix} and only those have unit {unit!r}")


@dataclass(frozen=True)
class TableSchema:
    name: str
    description: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    row: str = ""  # what one row is

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"table {self.name!r}: duplicate column names")
        for k in self.key:
            if k not in names or not self.column(k).required:
                raise ValueError(f"table {self.name!r}: key column {k!r} must be a required column")

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"table {self.name!r} has no column {name!r}")

    @property
    def latency_columns(self) -> list[str]:
        return [c.name for c in self.columns if c.unit == "ms"]

    def empty(self) -> pd.DataFrame:
        return conform(self.name, pd.DataFrame({c.name: pd.Series([], dtype="object") for c in self.columns}))


def _c(name: str, dtype: str, description: str, unit: str = "", **kw: Any) -> Column:
    return Column(name, dtype, description, unit, **kw)


def _provenance(what: str) -> tuple[Column, ...]:
    return (
        _c("dataset", "string", "where the row comes from: `latbench` (measured by this suite) or a public dataset "
           "(`usc-mobile-ml-benchmark`, `help-nasbench201`, `qai-hub-models`)", required=True),
        _c("source_file", "string", f"file the {what} was read from (path relative to the dataset root; "
           "`<folder>/<file>` when the import read several folders)"),
        _c("source_row", "Int64", "line number in `source_file` (1 = header line)", nonnegative=True),
        _c("source_column", "string", "column(s) of `source_file` the value was read from"),
        _c("source_commit", "string", "commit of the public repository the file was taken from, as its folder "
           "states it (`unknown`: the folder states none)"),
    )


def _table(name: str, description: str, columns: tuple[Column, ...], key: tuple[str, ...], row: str,
           source: str) -> TableSchema:
    """A table's schema: its own columns, then the provenance columns every row carries
    (``source`` names a row in their description: "file the <source> was read from")."""
    return TableSchema(name, description, (*columns, *_provenance(source)), key=key, row=row)


# the first columns of the tables of measured pairs (e2e, ops, kernels): the model in its scenario
_PAIR = (
    _c("model_id", "string", "-> models.model_id", required=True),
    _c("scenario_id", "string", "-> scenarios.scenario_id", required=True),
)

_MODELS = _table(
    "models",
    "One row per network: identity, origin, costs from the IR, and the IR itself.",
    (
        _c("model_id", "string", "IR hash (16 hex digits, `Graph.model_id`); public networks imported without "
           "rebuilding their IR are keyed `<source>:<name>` instead (e.g. `pytorch:mobilenetv2_w1`)", required=True),
        _c("name", "string", "readable name (pytorchcv name, `nb201-00042`, generator name)", required=True),
        _c("source", "string", "generator source of the IR: `pytorch`, `nasbench201`, `synthetic`, `zoo`; `qaihub` for "
           "a Qualcomm AI Hub network the IR does not express (no IR, keyed `qaihub:<name>`)", required=True),
        _c("family", "string", "model family or search space (`mobilenetv2`, `resnet`, `nasbench201`, ...)"),
        _c("seed", "Int64", "generation seed (generated networks only)"),
        _c("arch", "string", "compact recipe that rebuilds the IR: a pytorchcv model name, a NAS-Bench-201 cell string"),
        _c("input_shape", "string", "input tensor shape, `1x3x224x224`; `unknown` where neither the IR nor the source "
           "states it", required=True),
        _c("nodes", "Int64", "IR nodes", nonnegative=True),
        _c("flops", "Int64", "multiply-accumulates of conv and FC layers, from the IR", "MACs", nonnegative=True),
        _c("params", "Int64", "parameters, from the IR", nonnegative=True),
        _c("memory_bytes_fp32", "Int64", "bytes read and written (feature maps + parameters) at fp32, from the IR",
           "bytes", nonnegative=True),
        _c("reported_flops", "Int64", "FLOPs as stated by a public dataset (USC: the TFLite file's `FLOPS` column); "
           "definition is the source's", "FLOPs", nonnegative=True),
        _c("ir", "string", "the canonical IR JSON (`Graph.to_json`), when stored"),
        _c("meta", "string", "generator metadata, a JSON object"),
    ),
    key=("model_id",),
    row="a network",
    source="network",
)

_SCENARIOS = _table(
    "scenarios",
    "One row per scenario: where and how a model runs (device, framework, accelerator, cores, precision).",
    (
        _c("scenario_id", "string", "readable id, see *Scenario ids*", required=True),
        _c("device", "string", "short device name (`pixel4`, `s10`, `host`)", required=True),
        _c("device_model", "string", "marketing name (`Google Pixel 4`)"),
        _c("soc", "string", "system on chip / processor (`Snapdragon 855`)"),
        _c("cpu", "string", "CPU clusters: count, cluster name and clock (`1x large 2.84 GHz + 3x medium ...`)"),
        _c("gpu", "string", "GPU name (`Adreno 640`)"),
        _c("framework", "string", "`tflite`, `pytorch` (PyTorch Mobile), `litert`; Qualcomm AI Hub's runtimes as it "
           "names them (`tflite`, `qnn_dlc`, `onnx`, `qnn_context_binary`, `precompiled_qnn_onnx`, `genie`); missing "
           "when the source does not say"),
        _c("framework_version", "string", "framework / runtime library version"),
        _c("accelerator", "string", "`cpu`, `gpu`, `npu` (a neural processing unit: AI Hub's primary compute unit "
           "`NPU`), `asic`, `fpga`", required=True),
        _c("cores", "string", "CPU cores used, by cluster: `1large`, `2med`, `1large2med`, `4small` (CPU only)"),
        _c("core_count", "Int64", "number of CPU cores used", nonnegative=True),
        _c("threads", "Int64", "inference threads (= cores in USC)", nonnegative=True),
        _c("heterogeneous", "boolean", "cores from more than one cluster"),
        _c("precision", "string", "`fp32`, `fp16`, `int8`; Qualcomm AI Hub's precisions as it names them: `float`, "
           "weight/activation bits `w8a8`, `w8a16`, `w4a16`, `w4`, `w16a16`, mixed ones such as `w8a16_mixed_int16`; "
           "missing when the source does not say"),
        _c("batch", "int64", "batch size", required=True, positive=True),
        _c("description", "string", "one readable sentence", required=True),
        _c("graph_passes", "string", "rewrites the scenario's toolchain made to every network before timing it, "
           "comma-separated `generators/passes.py` names (`nb201_output_zeros_dce,fold_constants`: HELP's raspi4 and pixel3); "
           "`Dataset.graph(model_id, scenario_id)` applies them; missing: the IR ran as written"),
    ),
    key=("scenario_id",),
    row="a scenario",
    source="scenario",
)

_E2E = _table(
    "e2e",
    "One row per model x scenario: end-to-end latency statistics and provenance.",
    (
        *_PAIR,
        _c("latency_ms", "float64", "the headline end-to-end latency: the statistic named in `latency_stat`", "ms",
           required=True, positive=True),
        _c("latency_stat", "string", "which statistic `latency_ms` is: `median`, `mean`, `median_of_process_medians` "
           "(the median of the per-process medians of several measuring processes, the suite's headline), or "
           "`reported` (a single value whose statistic the source does not state)", required=True),
        _c("mean_ms", "float64", "mean over the timed runs", "ms", positive=True),
        _c("median_ms", "float64", "median over the timed runs", "ms", positive=True),
        _c("std_ms", "float64", "standard deviation over the timed runs", "ms", nonnegative=True),
        _c("min_ms", "float64", "fastest timed run", "ms", positive=True),
        _c("max_ms", "float64", "slowest timed run", "ms", positive=True),
        _c("p10_ms", "float64", "10th percentile over the timed runs", "ms", positive=True),
        _c("p90_ms", "float64", "90th percentile over the timed runs", "ms", positive=True),
        _c("cv", "float64", "coefficient of variation (std / mean) over the timed runs", nonnegative=True),
        _c("ci_low_ms", "float64", "lower end of the distribution-free (order-statistic) confidence interval of "
           "the median over the timed runs", "ms", positive=True),
        _c("ci_high_ms", "float64", "upper end of that interval", "ms", positive=True),
        _c("ci_level", "float64", "nominal confidence level of that interval (0.95)", positive=True),
        _c("repeats", "Int64", "timed runs", nonnegative=True),
        _c("warmup", "Int64", "untimed warm-up runs (per measuring process)", nonnegative=True),
        _c("processes", "Int64", "fresh measuring processes the timed runs were split over", nonnegative=True),
        _c("stopping", "string", "rule that decided how many runs to make: `fixed` (a set number) or `adaptive` "
           "(until the confidence interval of the median is narrow enough)"),
        _c("stop_reason", "string", "why measuring stopped: `fixed_runs`, `ci_width` (the interval was narrow "
           "enough), `max_processes` (the process budget ran out first)"),
        _c("between_cv", "float64", "coefficient of variation of the per-process medians (drift between "
           "processes)", nonnegative=True),
        _c("within_cv", "float64", "median over the processes of each process's own coefficient of variation",
           nonnegative=True),
        _c("op_run_ms", "float64", "median end-to-end time of the timed runs of the process that recorded the "
           "op times (profiler on; the reference of the e2e minus sum-of-ops gap)", "ms", positive=True),
        _c("kernel_run_ms", "float64", "the same for the process that recorded the kernel times", "ms",
           positive=True),
        _c("start_ns", "Int64", "monotonic clock at the first timed run (raw timestamp)", "ns"),
        _c("end_ns", "Int64", "monotonic clock after the last timed run (raw timestamp)", "ns"),
        _c("runtime_version", "string", "version of the measuring runtime (native runner, benchmark tool)"),
        _c("peak_memory_min_mb", "float64", "lower end of the range the source states for the inference's peak "
           "memory (Qualcomm AI Hub: `estimated_peak_memory_range_mb`, whole MB)", "MB", nonnegative=True),
        _c("peak_memory_max_mb", "float64", "upper end of that range", "MB", nonnegative=True),
        _c("layers", "Int64", "layers of the network as the runtime compiled it (AI Hub: `layer_counts.total`)",
           nonnegative=True),
        _c("layers_npu", "Int64", "of those, the layers the runtime placed on the NPU (AI Hub: `layer_counts.npu`; "
           "0 where the source lists the others only)", nonnegative=True),
        _c("layers_gpu", "Int64", "the layers placed on the GPU (AI Hub: `layer_counts.gpu`)", nonnegative=True),
        _c("layers_cpu", "Int64", "the layers placed on the CPU (AI Hub: `layer_counts.cpu`)", nonnegative=True),
        _c("output_check", "string", "GPU scenarios of the suite: the outputs against the CPU's on the same input "
           "(docs/gpu.md): `ok`, or `fp16_overflow` (fp16 outputs inf/NaN: the network exceeds fp16's range; "
           "the time is that of the fp16 computation); empty where not checked"),
        _c("output_rel_err", "float64", "relative L2 error of those outputs against the CPU's", nonnegative=True),
        _c("page_faults_per_run", "float64", "page faults of a timed run (the median over the processes), counted "
           "by the PyTorch worker, which runs on jemalloc with freed pages kept so that a run's time is not the "
           "kernel's page zeroing (pipelines/runners/allocator.py); empty for the other runtimes and for PyTorch "
           "rows measured on glibc's malloc, before the worker ran on jemalloc (their runs could take thousands "
           "of faults)",
           nonnegative=True),
        _c("host", "string", "hostname of the machine that ran the measuring processes"),
        _c("load_observed", "boolean", "the machine's load was read while the processes ran (the host: "
           "/proc and /sys; not on phones)"),
        _c("foreign_busy_frac", "float64", "largest share, over the kept processes, of the pinned cores' time "
           "that other processes used while one ran (/proc/stat busy time minus the process's own CPU time)",
           nonnegative=True),
        _c("steal_frac", "float64", "largest share of the pinned cores' time stolen by the hypervisor",
           nonnegative=True),
        _c("loadavg_max", "float64", "largest 1-minute load average seen at the start or end of a process",
           nonnegative=True),
        _c("probe_slowdown", "float64", "largest slow-down of the speed probe (pipelines/speed_probe.py) over the "
           "kept processes: the fixed probe's duration on a pinned core just before or after a process over "
           "its reference (the fastest median of 8 consecutive probes on that core), minus 1; empty where the "
           "probe was not run", nonnegative=True),
        _c("cpu_freq_khz", "string", "clock of the pinned cores (scaling_cur_freq, `min-max` kHz over the "
           "processes), or `unknown` where the machine exposes no cpufreq"),
        _c("remeasured", "Int64", "processes of this pair measured again because they ran under load",
           nonnegative=True),
    ),
    key=("model_id", "scenario_id"),
    row="a model measured in a scenario",
    source="measurement",
)

_OPS = _table(
    "ops",
    "One row per op (framework operator) per model x scenario: its configuration and time.",
    (
        *_PAIR,
        _c("op_index", "int64", "position of the op within the model x scenario (see docs: execution order, or "
           "the source file's order)", required=True, nonnegative=True),
        _c("op_type", "string", "framework-neutral type: `conv2d`, `dwconv2d`, `group_conv2d`, `fc`, "
           "`global_avgpool`, `avgpool`, `maxpool`, `concat`, `add`, `mul`, `relu`, `clip`, `hswish`, "
           "`sigmoid`, `batchnorm`, ...", required=True),
        _c("framework_op", "string", "the op as the framework names it (`CONV_2D`, `aten::add`)", required=True),
        _c("node", "string", "IR node name the op comes from, when known"),
        _c("in_channels", "Int64", "input channels", nonnegative=True),
        _c("in_hw", "Int64", "input height = width (square feature maps), after padding when the source says so",
           "px", nonnegative=True),
        _c("out_channels", "Int64", "output channels (filters)", nonnegative=True),
        _c("out_hw", "Int64", "output height = width", "px", nonnegative=True),
        _c("kernel", "Int64", "kernel size (square)", nonnegative=True),
        _c("stride", "Int64", "stride", nonnegative=True),
        _c("padding", "Int64", "padding", nonnegative=True),
        _c("groups", "Int64", "convolution groups", nonnegative=True),
        _c("reported_flops", "Int64", "FLOPs as the source states them (USC TFLite: 2 x MACs for convolutions; "
           "USC PyTorch: MACs)", "FLOPs", nonnegative=True),
        _c("config", "string", "the full op configuration as given by the source, a JSON object", required=True),
        _c("latency_ms", "float64", "time of the op; for GPU ops the time of the kernel that executed it, "
           "missing when the op ran inside another op's kernel (`fused`)", "ms", positive=True),
        _c("fused", "boolean", "the op has no kernel of its own: fused into another op's kernel", required=True),
        _c("kernel_index", "Int64", "-> kernels.kernel_index of the kernel that executed the op", nonnegative=True),
        _c("kernel_name", "string", "name of that kernel"),
    ),
    key=("model_id", "scenario_id", "op_index"),
    row="an op of a model in a scenario",
    source="op record",
)

_KERNELS = _table(
    "kernels",
    "One row per kernel (the unit the runtime executes after fusion and kernel selection) per model x scenario.",
    (
        *_PAIR,
        _c("kernel_index", "int64", "position of the kernel within the model x scenario", required=True,
           nonnegative=True),
        _c("kernel_name", "string", "the kernel as the runtime names it (`convolution_2d_1_linked_:_relu_2`, "
           "`vulkan.conv2d_pw_2x2`, `Convolution (NHWC, F32) IGEMM`)", required=True),
        _c("kernel_type", "string", "the kernel's kind, fused parts joined by `+`: a public GPU kernel's name "
           "without node indices (`convolution_2d+relu`), an XNNPACK operator without its variant "
           "(`convolution`), a host GPU command's kind and fused operations (`conv+bias+clamp`, `copy`)",
           required=True),
        _c("op_index", "Int64", "-> ops.op_index of the first op the kernel executes", nonnegative=True),
        _c("n_ops", "Int64", "ops of the ops table executed by this kernel", nonnegative=True),
        _c("latency_ms", "float64", "kernel time; missing when the source timed the kernel below its resolution "
           "(see `config`)", "ms", positive=True),
        _c("start_ns", "Int64", "kernel start (raw timestamp)", "ns"),
        _c("end_ns", "Int64", "kernel end (raw timestamp)", "ns"),
        _c("config", "string", "what else the source says about the kernel, a JSON object (the suite: its source "
           "`xnnpack`/`builtin`/`gpu`, XNNPACK partition, run statistics, which statistic `latency_ms` is and "
           "what timed it; GPU commands: `kind` dispatch/copy, `shader`, `groups`, `local_size`, `program`)"),
    ),
    key=("model_id", "scenario_id", "kernel_index"),
    row="a kernel executed for a model in a scenario",
    source="kernel record",
)

SCHEMAS: dict[str, TableSchema] = {s.name: s for s in (_MODELS, _SCENARIOS, _E2E, _OPS, _KERNELS)}

# columns every importer must fill (tests check them: provenance present)
PROVENANCE = ("dataset", "source_file", "source_row", "source_column", "source_commit")


def schema(name: str) -> TableSchema:
    try:
        return SCHEMAS[name]
    except KeyError:
        raise KeyError(f"unknown table {name!r} (tables: {', '.join(TABLES)})") from None


# ---------------------------------------------------------------- conform
_PANDAS_DTYPE = {"string": "str", "int64": "int64", "Int64": "Int64", "float64": "float64", "boolean": "boolean"}


def conform(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """The frame with the schema's columns in order and dtypes; absent optional columns are added
    as missing. Unknown columns are an error (the schema is the contract). Does not validate
    values: call :func:`check_table` for that."""
    s = schema(name)
    extra = [c for c in df.columns if c not in s.names]
    if extra:
        raise SchemaError(f"{name}: unknown column(s) {', '.join(map(str, extra))} (not in the schema)")
    n = len(df)
    out = {}
    for c in s.columns:
        if c.name in df.columns:
            col = df[c.name]
        else:
            if c.required:
                raise SchemaError(f"{name}: required column {c.name!r} missing")
            col = pd.Series([None] * n, index=df.index, dtype="object")
        try:
            out[c.name] = _cast(col, c)
        except (TypeError, ValueError) as e:
            raise SchemaError(f"{name}.{c.name}: cannot convert to {c.dtype}: {e}") from None
    return pd.DataFrame(out, index=df.index).reset_index(drop=True)


def _missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v))


def _cast(col: pd.Series, c: Column) -> pd.Series:
    target = _PANDAS_DTYPE[c.dtype]
    if col.dtype == object:
        if c.dtype == "string" and pd.api.types.infer_dtype(col, skipna=True) not in ("string", "empty"):
            bad = next(v for v in col if not _missing(v) and not isinstance(v, str))
            raise TypeError(f"non-text value {bad!r}")
        if c.dtype == "int64" and col.isna().any():
            raise ValueError("missing values in a required integer column")
        return pd.Series(pd.array(col.to_numpy(), dtype=target), index=col.index)
    if c.dtype == "string" and not pd.api.types.is_string_dtype(col.dtype):
        raise TypeError(f"{col.dtype} values are not text")
    return col.astype(target)


# ---------------------------------------------------------------- check
def _dtype_ok(series: pd.Series, c: Column) -> bool:
    dt = series.dtype
    if c.dtype == "string":
        if isinstance(dt, pd.StringDtype):
            return True
        return dt == object and bool(series.map(lambda v: v is None or isinstance(v, str) or v is pd.NA
                                                 or (isinstance(v, float) and np.isnan(v))).all())
    if c.dtype == "int64":
        return dt == np.int64 or (isinstance(dt, pd.Int64Dtype))
    if c.dtype == "Int64":
        return isinstance(dt, pd.Int64Dtype) or dt == np.int64
    if c.dtype == "float64":
        return dt == np.float64 or isinstance(dt, pd.Float64Dtype)
    if c.dtype == "boolean":
        return isinstance(dt, pd.BooleanDtype) or dt == np.bool_
    return False  # pragma: no cover - Column validates dtypes


def _row_ref(df: pd.DataFrame, i: Any, key: tuple[str, ...]) -> str:
    pos = df.index.get_loc(i) if i in df.index else i
    vals = ", ".join(f"{k}={df.at[i, k]!r}" for k in key if k in df.columns)
    return f"row {pos}" + (f" ({vals})" if vals else "")


def check_table(name: str, df: pd.DataFrame, max_faults: int = 20) -> pd.DataFrame:
    """Validate ``df`` against table ``name``; return it unchanged, or raise :class:`SchemaError`.

    Checks: exactly the schema's columns; dtypes; no missing values in required columns; the
    key unique; latency columns (``*_ms``) finite and > 0 (spreads >= 0); other numeric
    bounds of the schema.
    """
    s = schema(name)
    if not isinstance(df, pd.DataFrame):
        raise SchemaError(f"{name}: expected a pandas DataFrame, got {type(df).__name__}")
    faults: list[str] = []
    missing = [c for c in s.names if c not in df.columns]
    extra = [c for c in df.columns if c not in s.names]
    if missing:
        faults.append(f"{name}: missing column(s): {', '.join(missing)}")
    if extra:
        faults.append(f"{name}: unknown column(s): {', '.join(map(str, extra))}")
    for c in s.columns:
        if c.name not in df.columns:
            continue
        col = df[c.name]
        where = f"{name}.{c.name}"
        if not _dtype_ok(col, c):
            faults.append(f"{where}: dtype {col.dtype} where the schema says {c.dtype} ({DTYPES[c.dtype]})")
            continue
        na = col.isna()
        if c.required and na.any():
            i = na[na].index[0]
            faults.append(f"{where}: {int(na.sum())} missing value(s) in a required column, first at {_row_ref(df, i, s.key)}")
        if c.dtype in ("float64", "int64", "Int64") and (c.positive or c.nonnegative or c.unit == "ms"):
            vals = col.astype("float64")
            present = vals.notna()
            if c.unit == "ms":
                bad = present & ~np.isfinite(vals.fillna(0.0))
                if bad.any():
                    i = bad[bad].index[0]
                    faults.append(f"{where}: non-finite latency {float(vals[i])!r} at {_row_ref(df, i, s.key)}")
            if c.positive:
                bad = present & ~(vals > 0)
                what = "> 0"
            elif c.nonnegative:
                bad = present & ~(vals >= 0)
                what = ">= 0"
            else:
                bad = present & False
                what = ""
            if bad.any():
                i = bad[bad].index[0]
                faults.append(f"{where}: {int(bad.sum())} value(s) not {what}, first {float(vals[i])!r} at {_row_ref(df, i, s.key)}")
    if not missing:
        dup = df.duplicated(subset=list(s.key), keep="first")
        if dup.any():
            i = dup[dup].index[0]
            faults.append(f"{name}: key ({', '.join(s.key)}) not unique: {int(dup.sum())} duplicate row(s), first at {_row_ref(df, i, s.key)}")
    if faults:
        shown = faults[:max_faults]
        more = f"\n... and {len(faults) - max_faults} more" if len(faults) > max_faults else ""
        raise SchemaError("\n".join(shown) + more)
    return df


def check_tables(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Check every table present and the references between them (ids in e2e/ops/kernels exist in
    models and scenarios; ops' kernel_index exists in kernels)."""
    faults: list[str] = []
    for name, df in tables.items():
        try:
            check_table(name, df)
        except SchemaError as e:
            faults.append(str(e))
    if faults:
        raise SchemaError("\n".join(faults))
    models = set(tables["models"]["model_id"]) if "models" in tables else None
    scenarios = set(tables["scenarios"]["scenario_id"]) if "scenarios" in tables else None
    for name in ("e2e", "ops", "kernels"):
        df = tables.get(name)
        if df is None or df.empty:
            continue
        for col, known, other in (("model_id", models, "models"), ("scenario_id", scenarios, "scenarios")):
            if known is None:
                continue
            unknown = ~df[col].isin(known)
            if unknown.any():
                i = unknown[unknown].index[0]
                faults.append(f"{name}.{col}: {int(unknown.sum())} value(s) not in {other}, first {df.at[i, col]!r}")
    ops, kernels = tables.get("ops"), tables.get("kernels")
    if ops is not None and kernels is not None and not ops.empty:
        ref = ops[ops["kernel_index"].notna()]
        if len(ref):
            keys = set(zip(kernels["model_id"], kernels["scenario_id"], kernels["kernel_index"].astype("int64")))
            refs = list(zip(ref["model_id"], ref["scenario_id"], ref["kernel_index"].astype("int64")))
            bad = [r for r in refs if r not in keys]
            if bad:
                faults.append(f"ops.kernel_index: {len(bad)} reference(s) to kernels that do not exist, first {bad[0]!r}")
    if faults:
        raise SchemaError("\n".join(faults))
    return tables


# ---------------------------------------------------------------- parquet
def write_table(name: str, df: pd.DataFrame, path: str | Path) -> Path:
    """Check ``df`` against its schema and write it as parquet (zstd), with the table name and
    schema version in the file's metadata. Atomic: a killed write leaves no half file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_table(name, df)
    path = Path(path)
    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[PARQUET_META_KEY] = json.dumps({"table": name, "schema_version": SCHEMA_VERSION}, sort_keys=True).encode()
    table = table.replace_schema_metadata(meta)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return path


def read_table(name: str, path: str | Path, check: bool = True) -> pd.DataFrame:
    """Read a table written by :func:`write_table`; refuse a file of another table or schema major version."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such table file")
    meta = (pq.read_schema(path).metadata or {}).get(PARQUET_META_KEY)
    if meta is not None:
        info = json.loads(meta)
        if info.get("table") != name:
            raise SchemaError(f"{path}: holds table {info.get('table')!r}, expected {name!r}")
        major = str(info.get("schema_version", "")).split(".")[0]
        if major != SCHEMA_VERSION.split(".")[0]:
            raise SchemaError(f"{path}: schema version {info.get('schema_version')} (this code reads {SCHEMA_VERSION})")
    df = pd.read_parquet(path)
    df = conform(name, df)
    if check:
        try:
            check_table(name, df)
        except SchemaError as e:
            raise SchemaError(f"{path}:\n{e}") from None
    return df


# ---------------------------------------------------------------- docs
def markdown(names: Iterable[str] = TABLES) -> str:
    """The schemas as Markdown tables (for docs/dataset.md and DATASET.md)."""
    out: list[str] = []
    for name in names:
        s = schema(name)
        out.append(f"### `{name}`\n\n{s.description} Key: ({', '.join(f'`{k}`' for k in s.key)}).\n")
        out.append("| column | type | unit | required | description |")
        out.append("|---|---|---|---|---|")
        for c in s.columns:
            out.append(f"| `{c.name}` | {c.dtype} | {c.unit} | {'yes' if c.required else ''} | {c.description.replace('|', '/')} |")
        out.append("")
    return "\n".join(out)


@dataclass
class TableBuilder:
    """Accumulates rows (dicts) for one table; :meth:`frame` conforms them to the schema."""

    name: str
    rows: list[dict] = field(default_factory=list)

    def add(self, **row: Any) -> None:
        self.rows.append(row)

    def frame(self) -> pd.DataFrame:
        s = schema(self.name)
        unknown = {k for r in self.rows for k in r} - set(s.names)
        if unknown:
            raise SchemaError(f"{self.name}: unknown column(s) {', '.join(sorted(unknown))}")
        if not self.rows:
            return s.empty()
        present = {k for r in self.rows for k in r}
        cols = {c: pd.Series([r.get(c) for r in self.rows], dtype="object") for c in s.names if c in present}
        return conform(self.name, pd.DataFrame(cols))
