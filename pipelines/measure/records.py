"""A measure record: what one (model, scenario) pair's finished processes become.

The record (``<model_id>.json``) holds the pooled end-to-end statistics with every process's
samples and the machine's load, the op and kernel processes' aggregated events, the runtime's
provenance and the protocol it was measured under (``runners/records.py`` has the schema
version). Files are written atomically: a reader, or a rerun after a kill, sees the old file
or the whole new one.

:class:`Record` is that file as a type, shared by the writer (``sweep.build_record``) and its
readers (``pipelines/assemble.py``): ``Record.from_json`` checks the structure (a
:class:`RecordError` is one line naming the file and the missing or bad dotted key) and
``to_json`` writes the layout back. The parts with a fixed shape are typed (:class:`E2E` with
its pooled :class:`Stats`, :class:`Protocol`, :class:`LoadSummary`, :class:`Artifact`, the op
and kernel :class:`Profiled` processes); free-form parts stay dicts (the scenario, the
runtime's provenance, per-process entries, aggregated op and kernel events).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from foundation.atomic import write_text

from ..runners.records import EVENT_KEYS, GPU_EVENT_KEYS, RECORD_SCHEMA

def write_json(path: Path, obj: Any) -> None:
    """Atomic: a reader (or a rerun after a kill) sees the old file or the whole new one."""
    write_text(path, json.dumps(obj, indent=1, sort_keys=True, default=json_default) + "\n")


def json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return None if math.isnan(o) else float(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # absent or torn: treat as not done


def median_or_none(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.median(known)) if known else None


def load_summary(loads: Sequence[dict | None], remeasured: int) -> dict[str, Any]:
    """The machine's state over all kept processes of a pair (the worst of each figure)."""
    seen = [x for x in loads if x and x.get("observed")]
    if not seen:
        why = next((x.get("reason") for x in loads if x and x.get("reason")), "no load recorded")
        return {"observed": False, "reason": why, "remeasured": remeasured}
    freqs = [x["cpu_freq_khz"] for x in seen]
    khz = [v for f in freqs if isinstance(f, dict) for end in f.values() for v in end.values()]
    la = [v for x in seen for v in (x.get("loadavg_start"), x.get("loadavg_end")) if v is not None]
    slow = [x["probe"]["slowdown"] for x in seen if x.get("probe")]
    return {"observed": True, "processes": len(seen), "remeasured": remeasured,
            "max_probe_slowdown": max(slow) if slow else None,
            "max_foreign_busy_frac": max(x["foreign_busy_frac"] for x in seen),
            "max_steal_frac": max(x["steal_frac"] for x in seen),
            "max_loadavg": max(la) if la else None,
            "cpu_freq_khz": {"min": min(khz), "max": max(khz)} if khz else "unknown"}


def meta_digest(meta: dict) -> dict:
    """The provenance fields of a runtime's meta record worth keeping in every record."""
    keep = ("tool", "tool_version", "runtime", "runtime_version", "framework", "library", "accelerators", "model_bytes",
            "precision", "precision_detected", "engine", "accelerator", "cpus", "threads", "mode", "cpu_kernel_mode",
            "profiling", "memory_sampling", "hostname", "clock", "clock_resolution_ns", "model_ops", "format",
            "model_kind", "device", "gpu", "process_start", "allocator")
    return {k: meta[k] for k in keep if k in meta}


def aggregate_events(events: Iterable[dict], runs: Sequence[dict]) -> list[dict]:
    """Per-run op or kernel events -> one entry per position in the run (order), with the
    median, mean, min and max duration over the timed runs (ms) and how many runs had it.

    GPU kernels are timed by the GPU's own timestamps (``duration_ns`` = end - begin written
    around the dispatch by the Vulkan layer). The same model runs the same dispatch sequence
    in every run; ``shader_mismatch`` counts runs whose command at this position was another
    shader (0 when the sequence is stable, present only for GPU commands)."""
    timed = {r["run"] for r in runs}
    by_order: dict[int, dict] = {}
    for ev in events:
        if ev.get("run") not in timed:
            continue
        e = by_order.setdefault(int(ev["order"]), {"order": int(ev["order"]), "name": ev["name"], "durations": []})
        for key in EVENT_KEYS + (GPU_EVENT_KEYS if ev.get("source") == "gpu" else ()):
            if key in ev and key not in e:
                e[key] = ev[key]
        if ev.get("source") == "gpu":
            e["shader_mismatch"] = e.get("shader_mismatch", 0) + (ev.get("shader") != e.get("shader"))
        e["durations"].append(ev["duration_ns"])
    out = []
    for order in sorted(by_order):
        e = by_order.pop(order)
        d = np.asarray(e.pop("durations"), dtype=np.float64) / 1e6
        out.append({**e, "runs": int(d.size), "median_ms": float(np.median(d)), "mean_ms": float(d.mean()),
                    "min_ms": float(d.min()), "max_ms": float(d.max())})
    return out


# ---------------------------------------------------------------- the record as a type
PROFILED_MODES = ("op", "kernel")  # the granularities measured by one profiled process each


class RecordError(ValueError):
    """A file without the measure record's structure; ``str(err)`` is one line naming the file
    and the missing or bad dotted key."""


def _kind(v: Any) -> str:
    """A JSON value's type, as an error message names it."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    return {str: "a string", list: "a list", dict: "an object"}.get(type(v), type(v).__name__)


class _Reader:
    """One object of a record file; ``where`` is its dotted key (empty at the top)."""

    def __init__(self, d: dict, path: Path, where: str = ""):
        self.d, self.path, self.where = d, path, where

    def _key(self, k: str) -> str:
        return f"{self.where}.{k}" if self.where else k

    def _bad(self, k: str, expected: str) -> RecordError:
        return RecordError(f"{self.path}: bad key {self._key(k)!r} (expected {expected}, got {_kind(self.d[k])})")

    def need(self, k: str) -> Any:
        if k not in self.d:
            raise RecordError(f"{self.path}: missing key {self._key(k)!r}")
        return self.d[k]

    def get(self, k: str) -> Any:
        return self.d.get(k)

    def text(self, k: str) -> str:
        if not isinstance(self.need(k), str):
            raise self._bad(k, "a string")
        return self.d[k]

    def obj(self, k: str, required: bool = False) -> "_Reader | None":
        """A typed part (None: absent or null, unless ``required``)."""
        v = self.need(k) if required else self.d.get(k)
        if v is None and not required:
            return None
        if not isinstance(v, dict):
            raise self._bad(k, "an object")
        return _Reader(v, self.path, self._key(k))

    def free(self, k: str) -> dict | None:
        """A free-form object (None: absent or null)."""
        v = self.d.get(k)
        if v is not None and not isinstance(v, dict):
            raise self._bad(k, "an object")
        return v

    def array(self, k: str) -> list:
        v = self.d.get(k)
        if v is None:
            return []
        if not isinstance(v, list):
            raise self._bad(k, "a list")
        return v


def _names(cls: type, *but: str) -> list[str]:
    return [f.name for f in fields(cls) if f.name not in but]


@dataclass(frozen=True)
class Stats:
    """A summary of latency samples in ms (``pipelines/stats.py`` ``summarize``): NaN where too
    few samples allow a figure, None where the record lacks it."""

    n: int | None = None
    median_ms: float | None = None
    mean_ms: float | None = None
    std_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    cv: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    ci_level: float | None = None
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    ci_coverage: float | None = None
    ci_rel_width: float | None = None

    @classmethod
    def _read(cls, r: _Reader) -> Stats:
        return cls(**{k: r.get(k) for k in _names(cls)})

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _names(Stats)}


@dataclass(frozen=True)
class E2E:
    """The pair's end-to-end processes (``pipelines/stats.py`` ``pooled_summary`` and the samples)."""

    latency_ms: float  # the headline: the median of the per-process medians
    pooled: Stats  # every timed run of every process, pooled
    processes: int | None = None
    n: int | None = None  # timed runs over all processes
    median_of_medians_ms: float | None = None
    process_medians_ms: list[float] = field(default_factory=list)
    between_rel_range: float | None = None
    between_cv: float | None = None
    within_cv: float | None = None
    within_ci_rel_width: float | None = None
    medians_ci_low_ms: float | None = None  # CI of the median across processes (NaN with too few)
    medians_ci_high_ms: float | None = None
    medians_ci_coverage: float | None = None
    # counted by the torch worker (its allocator: pipelines/runners/allocator.py); None elsewhere
    page_faults_per_run: float | None = None
    # per process: its statistics, start_ns/end_ns and, where recorded, its load, page faults and
    # device state (clocks, thermal status on phones); free-form
    per_process: list[dict[str, Any]] = field(default_factory=list)
    samples_ns: list[list[int]] = field(default_factory=list)  # per process, its timed runs
    start_ns: int | None = None
    end_ns: int | None = None

    @classmethod
    def _read(cls, r: _Reader) -> E2E:
        lists = ("process_medians_ms", "per_process", "samples_ns")
        return cls(latency_ms=r.need("latency_ms"), pooled=Stats._read(r.obj("pooled", required=True)),
                   **{k: r.array(k) for k in lists},
                   **{k: r.get(k) for k in _names(cls, "latency_ms", "pooled", *lists)})

    def to_json(self) -> dict[str, Any]:
        return {k: self.pooled.to_json() if k == "pooled" else getattr(self, k) for k in _names(E2E)}


@dataclass(frozen=True)
class Stopping:
    """The stopping rule a pair's e2e processes were measured under, and why they stopped."""

    policy: str | None = None  # fixed | adaptive
    params: dict[str, Any] = field(default_factory=dict)  # the whole measure.stopping section
    runs: int | None = None  # timed e2e runs over all processes
    stop_reason: str | None = None  # fixed_runs | ci_width | max_processes

    @classmethod
    def _read(cls, r: _Reader) -> Stopping:
        return cls(policy=r.get("policy"), params=r.free("params") or {}, runs=r.get("runs"),
                   stop_reason=r.get("stop_reason"))

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "params": self.params, "runs": self.runs, "stop_reason": self.stop_reason}


@dataclass(frozen=True)
class Protocol:
    """How the pair was measured."""

    digest: str | None = None  # the protocol digest (a record of another digest is measured again)
    processes: int | None = None
    warmup: int | None = None
    interleaved: bool | None = None
    order_seed: int | None = None
    chunk: int | None = None
    stopping: Stopping = field(default_factory=Stopping)
    granularities: list[str] = field(default_factory=list)  # e2e and the profiled modes measured
    # granularity asked for -> why the runner cannot record it (written only when there are some)
    granularities_not_offered: dict[str, str] = field(default_factory=dict)

    @classmethod
    def _read(cls, r: _Reader) -> Protocol:
        st = r.obj("stopping")
        return cls(**{k: r.get(k) for k in ("digest", "processes", "warmup", "interleaved", "order_seed", "chunk")},
                   stopping=Stopping._read(st) if st else Stopping(), granularities=r.array("granularities"),
                   granularities_not_offered=r.free("granularities_not_offered") or {})

    def to_json(self) -> dict[str, Any]:
        out = {"digest": self.digest, "processes": self.processes, "warmup": self.warmup,
               "interleaved": self.interleaved, "order_seed": self.order_seed, "chunk": self.chunk,
               "stopping": self.stopping.to_json(), "granularities": self.granularities}
        if self.granularities_not_offered:
            out["granularities_not_offered"] = self.granularities_not_offered
        return out


@dataclass(frozen=True)
class LoadSummary:
    """The machine's state over the pair's kept processes (:func:`load_summary`: the worst of
    each figure) and the thresholds it was held to."""

    observed: bool
    remeasured: int | None = None  # processes measured again because they ran under load
    reason: str | None = None  # not observed: why
    # observed: the processes it covers and the worst figures
    processes: int | None = None
    max_probe_slowdown: float | None = None
    max_foreign_busy_frac: float | None = None
    max_steal_frac: float | None = None
    max_loadavg: float | None = None
    cpu_freq_khz: dict[str, int] | str | None = None  # {"min", "max"} or "unknown"
    check: dict[str, Any] | None = None  # the load config section (absent in older records)

    @classmethod
    def _read(cls, r: _Reader) -> LoadSummary:
        return cls(observed=bool(r.get("observed")), check=r.free("check"),
                   **{k: r.get(k) for k in _names(cls, "observed", "check")})

    def to_json(self) -> dict[str, Any]:
        if self.observed:
            out: dict[str, Any] = {
                "observed": True, "processes": self.processes, "remeasured": self.remeasured,
                "max_probe_slowdown": self.max_probe_slowdown, "max_foreign_busy_frac": self.max_foreign_busy_frac,
                "max_steal_frac": self.max_steal_frac, "max_loadavg": self.max_loadavg,
                "cpu_freq_khz": self.cpu_freq_khz}
        else:
            out = {"observed": False, "reason": self.reason, "remeasured": self.remeasured}
        if self.check is not None:
            out["check"] = self.check
        return out


@dataclass(frozen=True)
class Artifact:
    """The measured file."""

    format: str | None = None  # the export format (generators/export/formats.py)
    path: str | None = None
    bytes: int | None = None  # its size when measured

    @classmethod
    def _read(cls, r: _Reader) -> Artifact:
        return cls(format=r.get("format"), path=r.get("path"), bytes=r.get("bytes"))

    def to_json(self) -> dict[str, Any]:
        return {"format": self.format, "path": self.path, "bytes": self.bytes}


@dataclass(frozen=True)
class Profiled:
    """The pair's op or kernel process: one process with the profiler on."""

    summary: Stats | None = None  # its timed (profiled) runs
    overhead: dict[str, Any] | None = None  # the profiler's overhead (``ratio``...); None: not measured
    ops: list[dict[str, Any]] = field(default_factory=list)  # aggregated op events (:func:`aggregate_events`)
    kernels: list[dict[str, Any]] = field(default_factory=list)  # aggregated kernel events
    trace: str | None = None  # the trace file, beside the record
    end: dict[str, Any] = field(default_factory=dict)  # the runtime's end record
    runtime: dict[str, Any] = field(default_factory=dict)  # the process's provenance (:func:`meta_digest`)
    load: dict[str, Any] | None = None  # the process's load window (written when recorded)

    @property
    def overhead_ratio(self) -> Any:
        """Profiled / unprofiled run time measured in the process (None: not measured)."""
        return (self.overhead or {}).get("ratio")

    @classmethod
    def _read(cls, r: _Reader) -> Profiled:
        s = r.obj("summary")
        return cls(summary=Stats._read(s) if s else None, overhead=r.free("overhead"), ops=r.array("ops"),
                   kernels=r.array("kernels"), trace=r.get("trace"), end=r.free("end") or {},
                   runtime=r.free("runtime") or {}, load=r.free("load"))

    def to_json(self) -> dict[str, Any]:
        out = {"summary": self.summary.to_json() if self.summary else None, "overhead": self.overhead,
               "ops": self.ops, "kernels": self.kernels, "trace": self.trace, "end": self.end,
               "runtime": self.runtime}
        if self.load is not None:
            out["load"] = self.load
        return out


@dataclass(frozen=True)
class Record:
    """The measure record of one (model, scenario) pair (``<model_id>.json``, schema
    :data:`~pipelines.runners.records.RECORD_SCHEMA`).

    ``to_json`` writes the file's layout: ``from_json(d, path).to_json() == d`` for a record the
    measure stage writes (the free-form parts are shared, not copied). Keys that older records
    lack read as None or empty (and are written as the current layout writes them)."""

    model_id: str
    scenario: dict[str, Any]  # Scenario.to_dict() (pipelines/scenarios.py); has scenario_id
    protocol: Protocol
    e2e: E2E
    source: str | None = None  # the generator the network came from
    artifact: Artifact | None = None
    runtime: dict[str, Any] = field(default_factory=dict)  # the first e2e process's provenance
    load: LoadSummary | None = None  # absent in records made before the load was read
    op: Profiled | None = None
    kernel: Profiled | None = None

    @property
    def scenario_id(self) -> str:
        return self.scenario["scenario_id"]

    @property
    def framework(self) -> str | None:
        return self.scenario.get("framework")

    def profiled(self, mode: str) -> Profiled | None:
        """The op or kernel process (None: not measured)."""
        if mode not in PROFILED_MODES:
            raise ValueError(f"mode: expected one of {', '.join(PROFILED_MODES)}, got {mode!r}")
        return getattr(self, mode)

    @classmethod
    def from_json(cls, d: Any, path: Path) -> Record:
        """The record of file ``path`` parsed into ``d``; :class:`RecordError` naming the file
        and the key when its schema is another or a part is missing or of another type."""
        if not isinstance(d, dict):
            raise RecordError(f"{path}: expected a JSON object")
        if d.get("schema") != RECORD_SCHEMA:
            raise RecordError(f"{path}: schema {d.get('schema')!r}, expected {RECORD_SCHEMA!r}")
        r = _Reader(d, path)
        model_id = r.text("model_id")
        sc = r.obj("scenario", required=True)
        sc.text("scenario_id")
        protocol = Protocol._read(r.obj("protocol", required=True))
        e2e = E2E._read(r.obj("e2e", required=True))
        art, load = r.obj("artifact"), r.obj("load")
        return cls(model_id=model_id, scenario=sc.d, protocol=protocol, e2e=e2e, source=r.get("source"),
                   artifact=Artifact._read(art) if art else None, runtime=r.free("runtime") or {},
                   load=LoadSummary._read(load) if load else None,
                   **{m: Profiled._read(p) for m in PROFILED_MODES if (p := r.obj(m)) is not None})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": RECORD_SCHEMA, "model_id": self.model_id, "source": self.source,
                               "scenario": self.scenario}
        if self.artifact is not None:
            out["artifact"] = self.artifact.to_json()
        out.update(protocol=self.protocol.to_json(), e2e=self.e2e.to_json(), runtime=self.runtime)
        if self.load is not None:
            out["load"] = self.load.to_json()
        for mode in PROFILED_MODES:
            part = getattr(self, mode)
            if part is not None:
                out[mode] = part.to_json()
        return out
