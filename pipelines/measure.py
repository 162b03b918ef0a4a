"""The ``measure`` stage: every exported network in one scenario of one device.

DVC runs it as a matrix (``measure@<framework>-<precision>-<cores>``, see dvc.yaml) over the
CPU grid of the ``scenario`` config section, and as ``measure-gpu@<precision>`` over its
``gpu_precisions`` (TFLite on the device's GPU, no core set); each stage measures one scenario
into ``<data_dir>/measurements/<device>/<scenario_id>/`` (``SCENARIO.json``, one record or
error record per pair, traces, ``measure.log``).

The protocol is nnPerf's instrument with the USC paper's coverage (``measure`` config section):
fresh pinned processes, several per pair, interleaved across models so that drift of a shared
machine spreads over all of them; fixed or adaptive stopping; op and kernel records from one
extra process each, never the headline. What a (framework, accelerator) can record is its
registered runner (:data:`pipelines.runners.RUNNERS`), and records state what is not offered
and why. The stage is resumable and loss-free: records are written atomically, finished
processes are kept under ``.work/`` until their pair is complete, a record is reused only under
the same protocol digest, and a failure becomes ``<model_id>.error.json`` while the sweep goes
on. docs/measure.md has the protocol, the files and the failure kinds.
"""
from __future__ import annotations

import errno
import hashlib
import json
import math
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np
from tqdm import tqdm

from foundation.atomic import remove_orphans, write_text

from .machine_load import LoadConfig, LoadWindow, judge, validate_load
from .runners import RUNNERS, runner_for
from .runners.records import EVENT_KEYS, GPU_EVENT_KEYS, RECORD_SCHEMA, NativeRun, NativeRunError
from .scenarios import PRECISIONS, Scenario, ScenarioGridConfig, make_scenario_id
from .speed_probe import SpeedProbe, probe_for
from .stats import make_stopper, pooled_summary, summarize

if TYPE_CHECKING:
    from .devices.base import Device

GRANULARITIES = ("e2e", "op", "kernel")
# failures of the device rather than of the model (a phone that disconnected): a rerun
# measures those pairs again without being asked (the sweep resumes)
# and processes taken under load (kind "loaded"): a quieter rerun should measure them
TRANSIENT_KINDS = ("device", "loaded")
SPEED_POLL_S = 2.0  # between speed probes while waiting for a slow episode to pass


def grid_points(scenario_cfg: Any) -> list[tuple[str, str, str | None, str]]:
    """(framework, precision, cores, accelerator) of every point of a scenario grid, the cells
    of DVC's measure matrices (cores None on the GPU, whose precisions are ``gpu_precisions``)."""
    out = []
    for accelerator in scenario_cfg.accelerators:
        precisions = scenario_cfg.gpu_precisions if accelerator == "gpu" else scenario_cfg.precisions
        core_sets = scenario_cfg.cores if accelerator == "cpu" else [None]
        out += [(fw, p, c, accelerator) for fw in scenario_cfg.frameworks for p in precisions for c in core_sets]
    return out


def reading_points(scenario_cfg: Any, measure_cfg: Any = None) -> list[tuple[tuple[str, str, str | None, str], str,
                                                                              list[str], Any]]:
    """Every point of a scenario grid that reads an artifact: (its ``grid_points`` tuple, the
    format its runner reads at its precision, the generator sources it measures (empty: every
    source), its protocol). With ``measure_cfg`` a point ``measure.points`` leaves out reads
    nothing, and the sources and protocol are the point's (``points``, ``runner_sources``);
    without it every point reads, for every source, protocol None."""
    out = []
    for framework, precision, cores, accelerator in grid_points(scenario_cfg):
        runner = runner_for(framework, accelerator)
        fmt = runner.formats.get(precision) if runner else None
        if fmt is None:
            continue
        m, sources = None, []
        if measure_cfg is not None:
            m = point_config(measure_cfg, point_name(framework, precision, cores, accelerator))
            if m is None:
                continue  # measure.points leaves this point out
            sources = m.runner_sources.get(f"{framework}-{accelerator}", m.sources)
        out.append(((framework, precision, cores, accelerator), fmt, list(sources), m))
    return out


def grid_formats(scenario_cfg: Any, measure_cfg: Any = None) -> dict[str, frozenset[str] | None]:
    """The artifact formats the measure stages of a scenario grid read, each with the generator
    sources whose networks they read it for (None: every source). This is what
    ``export.formats: []`` exports: a grid of fp32 points exports no int8 files, and with
    ``measure.points`` / ``runner_sources`` (``measure_cfg``) a format only for the sources a
    point measures (the release's TorchScript files for its synthetic networks only)."""
    out: dict[str, frozenset[str] | None] = {}
    for _, fmt, sources, _ in reading_points(scenario_cfg, measure_cfg):
        if fmt in out and out[fmt] is None:
            continue
        out[fmt] = None if not sources else (out.get(fmt) or frozenset()) | frozenset(sources)
    return dict(sorted(out.items()))


# ------------------------------------------------------------------ config
@dataclass
class StoppingConfig:
    policy: str = "adaptive"  # adaptive | fixed
    runs: int = 50  # fixed: timed runs in all, split evenly over the processes
    rel_width: float = 0.02  # adaptive: stop when the median's CI is narrower than this x median
    level: float = 0.95  # adaptive: confidence level of that interval
    batch: int = 10  # adaptive: timed runs per process
    max_processes: int = 10  # adaptive: give up narrowing after this many processes


@dataclass
class PointConfig:
    """What one grid point measures (``measure.points.<point>``)."""

    granularities: list[str] = field(default_factory=list)  # empty: measure.granularities
    sources: list[str] = field(default_factory=list)  # empty: measure.sources / runner_sources


def point_name(framework: str, precision: str, cores: str | None, accelerator: str = "cpu") -> str:
    """A grid point as DVC's matrix names its stage: tflite-fp32-1large (CPU), tflite-gpu-fp16."""
    return f"{framework}-{accelerator}-{precision}" if accelerator != "cpu" else f"{framework}-{precision}-{cores}"


@dataclass
class MeasureConfig:
    sources: list[str] = field(default_factory=list)  # generator sources to measure; empty: all exported
    # per runner ("<framework>-<accelerator>"): the sources it measures instead of `sources`
    # (the main job keeps the slow ones, PyTorch and the software GPU, to small networks)
    runner_sources: dict[str, list[str]] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)  # only these model ids (empty: all)
    granularities: list[str] = field(default_factory=lambda: list(GRANULARITIES))
    processes: int = 3  # e2e processes per (model, scenario) (adaptive: at least this many)
    warmup: int = 5  # untimed runs at the start of every process
    stopping: StoppingConfig = field(default_factory=StoppingConfig)
    op_runs: int = 10  # timed runs of the op- and kernel-mode processes
    overhead_pairs: int = 10  # profiled/unprofiled run pairs in those processes (0: none)
    timeout: float = 600.0  # seconds per measuring process
    order_seed: int = 0  # seed of the interleaving order
    # pairs interleaved together: the shuffled pairs are measured in blocks of `chunk`, each block
    # finished before the next starts, so a sweep stopped part-way (a session's budget) leaves
    # whole pairs behind, which land in the release, instead of 2 of 3 processes of every pair,
    # which live only in this machine's work folder (0: one block, every pair interleaved)
    chunk: int = 0
    pytorch_engine: str = "x86"  # quantized engine for PyTorch int8: x86 (host) or qnnpack (ARM)
    retry_failed: bool = False  # measure again the pairs whose failure is on record
    load: LoadConfig = field(default_factory=LoadConfig)  # when a process counts as taken under load
    # the committed release (datasets/<name>-v<N>/): its (model, scenario) pairs are not measured
    # again unless reuse_release is false (pipelines/release.py); empty or absent: none
    release: str = "datasets/host-v1"
    reuse_release: bool = True
    # released rows measured under an older protocol count as not released: measured again, and
    # the fresh rows replace them at assemble (the release sweep). Older: no speed-probe verdict
    # (their processes may have run in the VM's slow episodes unseen), or a runner's own columns missing
    # (PyTorch rows from glibc's malloc, no page-fault count); pipelines/release.py, docs/dataset.md
    remeasure_outdated: bool = False
    # generator names of the control set, measured again at the start of every release sweep
    # session (python -m pipelines.control): the release's between-run drift
    control: list[str] = field(default_factory=list)
    # grid point (tflite-fp32-1large, tflite-gpu-fp16, ...) -> what it measures; empty: every
    # point of the grid measures the above. Not empty: a point not listed measures nothing and
    # records why (a release protocol that is not a full cross product of the grid)
    points: dict[str, PointConfig] = field(default_factory=dict)


def validate_config(cfg: MeasureConfig) -> MeasureConfig:
    unknown = [g for g in cfg.granularities if g not in GRANULARITIES]
    if unknown:
        raise ValueError(f"granularities: unknown granularity {unknown[0]!r} (known: {', '.join(GRANULARITIES)})")
    if "e2e" not in cfg.granularities:
        raise ValueError("granularities: must include e2e (every record has end-to-end statistics)")
    for name in ("processes", "op_runs"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"{name}: must be >= 1, got {getattr(cfg, name)}")
    for name in ("warmup", "overhead_pairs"):
        if getattr(cfg, name) < 0:
            raise ValueError(f"{name}: must be >= 0, got {getattr(cfg, name)}")
    if cfg.timeout <= 0:
        raise ValueError(f"timeout: must be > 0 seconds, got {cfg.timeout}")
    if cfg.chunk < 0:
        raise ValueError(f"chunk: must be >= 0 (0: every pair in one block), got {cfg.chunk}")
    if cfg.pytorch_engine not in ("x86", "qnnpack"):
        raise ValueError(f"pytorch_engine: unknown engine {cfg.pytorch_engine!r} (known: x86, qnnpack)")
    for name, point in cfg.points.items():
        bad = [g for g in point.granularities if g not in GRANULARITIES]
        if bad:
            raise ValueError(f"points.{name}.granularities: unknown granularity {bad[0]!r} "
                             f"(known: {', '.join(GRANULARITIES)})")
        if point.granularities and "e2e" not in point.granularities:
            raise ValueError(f"points.{name}.granularities: must include e2e")
        parts = name.split("-")
        if len(parts) != 3 or not (parts[1] in PRECISIONS or parts[1] == "gpu"):
            raise ValueError(f"points.{name}: a grid point is <framework>-<precision>-<cores> or "
                             "<framework>-gpu-<precision>, e.g. tflite-fp32-1large")
    try:
        validate_load(cfg.load)
    except ValueError as e:
        raise ValueError(str(e)) from None
    for key in cfg.runner_sources:
        framework, _, accelerator = key.partition("-")
        if runner_for(framework, accelerator) is None:
            known = ", ".join(f"{f}-{a}" for f, a in RUNNERS)
            raise ValueError(f"runner_sources.{key}: no such runner (known: {known})")
    s = cfg.stopping
    try:
        _stopper(s)
    except ValueError as e:
        raise ValueError(f"stopping.{e}") from None
    if s.policy == "fixed" and s.runs < cfg.processes:
        raise ValueError(f"stopping.runs: {s.runs} runs cannot be split over {cfg.processes} processes")
    if s.policy == "adaptive" and s.max_processes < cfg.processes:
        raise ValueError(f"stopping.max_processes: {s.max_processes} is below processes {cfg.processes}")
    return cfg


def validate_grid(cfg: ScenarioGridConfig) -> ScenarioGridConfig:
    """The ``scenario`` section: a grid whose axes DVC's matrix can iterate (explicit lists)."""
    cfg.validate()
    if isinstance(cfg.cores, str):
        raise ValueError("cores: the measure stage needs explicit core-set labels such as [1large, 2large] "
                         "(`latbench scenarios --cores all` lists this device's)")
    if cfg.gpu_precisions is None or isinstance(cfg.gpu_precisions, str):
        raise ValueError("gpu_precisions: the measure-gpu stage needs an explicit list such as [fp16, fp32]")
    return cfg


def _stopper(s: StoppingConfig):
    """The stats rule deciding when a pair has enough samples (pooled over its processes)."""
    if s.policy == "fixed":
        return make_stopper({"policy": "fixed", "runs": s.runs})
    if s.policy == "adaptive":
        return make_stopper({"policy": "adaptive", "rel_width": s.rel_width, "level": s.level,
                             "min_runs": max(s.batch, 1), "max_runs": s.batch * s.max_processes, "batch": s.batch})
    raise ValueError(f"policy: unknown stopping policy {s.policy!r} (known: adaptive, fixed)")


# ------------------------------------------------------------------ helpers
def _write_json(path: Path, obj: Any) -> None:
    """Atomic: a reader (or a rerun after a kill) sees the old file or the whole new one."""
    write_text(path, json.dumps(obj, indent=1, sort_keys=True, default=_json_default) + "\n")


def tidy_work(out: Path) -> None:
    """Removes ``out/.work`` once no pair has unfinished processes in it (an empty folder)."""
    try:
        (out / ".work").rmdir()  # only ever removes an empty folder
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
            raise


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return None if math.isnan(o) else float(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # absent or torn: treat as not done


def protocol_digest(cfg: MeasureConfig, scenario: Scenario) -> str:
    """What makes two records comparable: the scenario and every setting of the protocol that
    changes the numbers (not which models are selected, not retries, not timeouts)."""
    d = asdict(cfg)
    # the load thresholds decide which processes are kept, not how they measure
    # (points: a Sweep gets the effective granularities of its point, see point_config)
    # (chunk: how pairs are grouped in time, like the order; not how a process measures)
    for k in ("sources", "runner_sources", "models", "retry_failed", "timeout", "load", "release",
              "reuse_release", "remeasure_outdated", "points", "control", "chunk"):
        d.pop(k)
    d["scenario"] = scenario.to_dict()
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def artifact_path(artifacts_dir: Path, model_id: str, fmt: str) -> Path:
    from generators.export.formats import FORMATS

    return artifacts_dir / model_id / FORMATS.get(fmt).filename


# ------------------------------------------------------------------ the scenario of a stage
@dataclass
class StageScenario:
    scenario: Scenario | None
    reason: str | None = None  # why the grid point is not offered on this device


def stage_scenario(device: Device, framework: str, precision: str, cores: str | None, threads: int | None = None,
                   accelerator: str = "cpu") -> StageScenario:
    """The scenario one matrix stage measures, or why the device does not offer it.

    A CPU scenario needs a core set (``cores``); a GPU scenario has none (``cores`` and
    ``threads`` are ignored: the runtime's host threads are not pinned, as in the USC study's
    GPU scenarios) and needs ``device.gpu`` (``gpu_unavailable``, when the device has it, says
    why there is none)."""
    from .devices.topology import core_set
    from .scenarios import ACCELERATORS, FRAMEWORKS

    for name, value, known in (("framework", framework, FRAMEWORKS), ("precision", precision, PRECISIONS),
                               ("accelerator", accelerator, ACCELERATORS)):
        if value not in known:
            raise ValueError(f"{name}: unknown {name} {value!r} (known: {', '.join(known)})")
    if framework not in device.frameworks:
        return StageScenario(None, f"device {device.name} does not run {framework}")
    runner = runner_for(framework, accelerator)
    if runner is None:
        return StageScenario(None, f"the suite has no {framework} runner for the {accelerator} (pipelines.runners)")
    if precision not in runner.formats:
        why = runner.missing_precisions.get(precision, "see docs/exporters.md")
        return StageScenario(None, f"{framework} {precision} is not offered on the {accelerator}: {why}")
    if accelerator == "gpu":
        if not device.gpu:
            why = getattr(device, "gpu_unavailable", None) or "device.gpu is null"
            return StageScenario(None, f"device {device.name} has no GPU: {why}")
        return StageScenario(Scenario(device.name, framework, accelerator, precision))
    if not cores:
        raise ValueError("cores: a CPU scenario needs a core set such as 1large (`latbench scenarios` lists them)")
    try:
        cs = core_set(device.clusters(), cores)
    except ValueError as e:
        return StageScenario(None, f"core set {cores}: {e}")
    t = cs.n_cores if threads is None else threads
    return StageScenario(Scenario(device.name, framework, accelerator, precision, cores=cs.label, cpus=cs.cpus,
                                  threads=t))


# ------------------------------------------------------------------ one pair's state
@dataclass
class Pair:
    """One (model, scenario) pair in a sweep."""

    model_id: str
    source: str
    artifact: Path
    work: Path  # .work/<model_id>/
    processes: list[dict] = field(default_factory=list)  # finished e2e processes (samples, meta)
    profiled: dict[str, dict] = field(default_factory=dict)  # mode -> finished op/kernel process
    done: bool = False
    remeasured: int = 0  # processes of this pair measured again because they ran under load

    def samples(self) -> list[list[int]]:
        return [p["samples_ns"] for p in self.processes]

    def pooled(self) -> list[int]:
        return [s for p in self.processes for s in p["samples_ns"]]


class MeasureError(RuntimeError):
    """A pair failed before any process ran (say its artifact is missing)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


# ------------------------------------------------------------------ the sweep
class Sweep:
    """Measures a list of models in one scenario on one device (see the module doc)."""

    def __init__(self, device: Device, scenario: Scenario, cfg: MeasureConfig, out_dir: Path, artifacts_dir: Path,
                 progress: bool = True, log: Callable[[str], None] | None = None):
        self.device, self.scenario, self.cfg = device, scenario, cfg
        self.out, self.artifacts = Path(out_dir), Path(artifacts_dir)
        self.digest = protocol_digest(cfg, scenario)
        self.rule = _stopper(cfg.stopping)
        runner = RUNNERS[(scenario.framework, scenario.accelerator)]
        self.format = runner.formats[scenario.precision]
        self.modes = [g for g in cfg.granularities if g != "e2e" and g in runner.granularities]
        # granularities the config asks for that this runner cannot record, and why
        self.not_offered = {g: runner.missing_granularities.get(g, "not recorded by this runner")
                            for g in cfg.granularities if g not in runner.granularities}
        self.progress = progress
        # remeasured: processes run again because they were taken under load; refused: pairs
        # failed because they stayed loaded (kind "loaded")
        self.counts = {"ok": 0, "failed": 0, "skipped": 0, "remeasured": 0, "refused": 0, "released": 0,
                       "speed_waits": 0, "speed_wait_s": 0.0}
        # pairs the committed release holds are not measured again (pipelines/release.py)
        from .release import reused_pairs

        self.released = reused_pairs(cfg)
        self._log_file = self.out / "measure.log"
        self._log_extra = log
        self.runs_made = 0  # timed e2e runs made by this sweep (benchmarks read it)
        self._reference: dict[int, float] | None = None  # the release's probe reference, read once
        self.on_process: Callable[[dict], None] | None = None  # called with each finished e2e process
        # sweeps sharing one scenario folder at once (the farm's phones) leave .work to their driver
        self.tidy_work = True

    # -- bookkeeping
    def log(self, msg: str) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        with self._log_file.open("a") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {msg}\n")
        if self._log_extra:
            self._log_extra(msg)

    def record_path(self, model_id: str) -> Path:
        return self.out / f"{model_id}.json"

    def error_path(self, model_id: str) -> Path:
        return self.out / f"{model_id}.error.json"

    def _is_done(self, model_id: str) -> bool:
        rec = _read_json(self.record_path(model_id))
        if rec is not None and rec.get("protocol", {}).get("digest") == self.digest:
            return True
        err = _read_json(self.error_path(model_id))
        return (err is not None and not self.cfg.retry_failed and err.get("protocol_digest") == self.digest
                and err.get("kind") not in TRANSIENT_KINDS)

    def _load_work(self, pair: Pair) -> None:
        """Finished processes of an interrupted earlier sweep (same protocol only)."""
        if not pair.work.is_dir():
            return
        for p in sorted(pair.work.glob("p*.json"), key=lambda q: int(q.stem[1:]) if q.stem[1:].isdigit() else 0):
            d = _read_json(p)
            if d and d.get("digest") == self.digest:
                pair.processes.append(d)
        for mode in self.modes:
            d = _read_json(pair.work / f"{mode}.json")
            if d and d.get("digest") == self.digest:
                pair.profiled[mode] = d

    # -- the plan
    def plan(self, models: Sequence[tuple[str, str]]) -> list[Pair]:
        """Pairs still to measure (``models``: (source, model_id)); done ones are counted as skipped."""
        pairs = []
        for source, mid in models:
            if self._is_done(mid):
                self.counts["skipped"] += 1
                continue
            if (mid, self.scenario.scenario_id) in self.released:  # landed from another machine
                self.counts["released"] += 1
                self.counts["skipped"] += 1
                continue
            pair = Pair(mid, source, artifact_path(self.artifacts, mid, self.format), self.out / ".work" / mid)
            self._load_work(pair)
            pairs.append(pair)
        return pairs

    def _e2e_runs(self, pair: Pair) -> int:
        s = self.cfg.stopping
        if s.policy == "fixed":  # split the runs as evenly as possible, earlier processes take the rest
            k = len(pair.processes)
            return s.runs // self.cfg.processes + (1 if k < s.runs % self.cfg.processes else 0)
        return s.batch

    def _enough(self, pair: Pair) -> str | None:
        """Why the pair needs no more e2e processes (None: it needs another)."""
        n = len(pair.processes)
        if self.cfg.stopping.policy == "fixed":
            return "fixed_runs" if n >= self.cfg.processes else None
        if n < self.cfg.processes:
            return None
        if n >= self.cfg.stopping.max_processes:
            return "max_processes"
        return "ci_width" if self.rule.stop_reason(pair.pooled()) == "ci_width" else None

    def _remaining(self, pair: Pair) -> int:
        """Processes the pair still needs as planned (adaptive pairs may need more)."""
        return max(self.cfg.processes - len(pair.processes), 0) + sum(m not in pair.profiled for m in self.modes)

    # -- running one process
    def _run(self, pair: Pair, mode: str, runs: int, tag: str) -> NativeRun:
        if not pair.artifact.is_file():
            from .prune import dropped_sidecar

            side = dropped_sidecar(pair.artifact.parent, self.format)
            why = (f"pruned once its pairs were released, see {side.name}; `latbench prune --restore` and export "
                   "write it again") if side.is_file() else (f"export {self.format} failed or was not configured; "
                                                             "see the export manifest")
            raise MeasureError(f"{pair.artifact}: artifact missing ({why})", "artifact_missing")
        pair.work.mkdir(parents=True, exist_ok=True)
        records = pair.work / f"{tag}.records.jsonl"
        trace = (self.out / f"{pair.model_id}.{mode}.trace.json") if mode != "e2e" else None
        kwargs = {"engine": self.cfg.pytorch_engine} if self.scenario.framework == "pytorch" else {}
        try:
            return self.device.run(self.scenario.framework, pair.artifact, scenario=self.scenario, mode=mode,
                                   warmup=self.cfg.warmup, runs=runs,
                                   overhead_pairs=self.cfg.overhead_pairs if mode != "e2e" else 0,
                                   records_path=records, trace_path=trace, timeout=self.cfg.timeout, **kwargs)
        finally:
            records.unlink(missing_ok=True)  # the record keeps what matters; traces stay

    def _speed_probe(self) -> SpeedProbe | None:
        """The speed probe of the scenario's CPUs (None: ``load.probe: false``); calibrated first
        when its verdict counts (``load.check`` with a ``load.max_slowdown``)."""
        lc = self.cfg.load
        judged = lc.check and lc.max_slowdown is not None
        if not lc.probe:
            return None
        return probe_for(self.scenario.cpus or None, calibrated=judged, reference=self._probe_reference())

    def _probe_reference(self) -> dict[int, float]:
        """The speed probe's reference from the release's earlier sessions, when this machine's
        processor is the one its rows of this device were measured on (pipelines/release.py)."""
        if self._reference is None:
            from .release import probe_reference, release_processors, resolve

            self._reference = {}
            if self.cfg.release:  # the control set too (it measures released pairs again)
                processor = str(self.device.describe().get("cpu_model"))
                if release_processors(resolve(self.cfg.release), self.device.name) == {processor}:
                    self._reference = probe_reference(self.cfg.release, self.device.name)
                if self._reference:
                    self.log(f"speed probe: starting from the release's reference "
                             + ", ".join(f"CPU {c} {s * 1e3:.3f} ms" for c, s in sorted(self._reference.items())))
        return self._reference

    def _wait_for_speed(self, probe: SpeedProbe) -> None:
        """Before a process: while the speed probe says the cores run slow (a slow episode of
        the machine, pipelines/speed_probe.py), wait and probe again, at most
        ``load.speed_wait_s``; a process started in an episode would only be refused. After the
        longest wait the process runs anyway, and the window's verdict decides."""
        lc = self.cfg.load
        slow = probe.slowdown(probe.sample())
        if slow <= lc.max_slowdown or lc.speed_wait_s <= 0:
            return
        t0 = time.monotonic()
        while slow > lc.max_slowdown and time.monotonic() - t0 < lc.speed_wait_s:
            time.sleep(SPEED_POLL_S)
            slow = probe.slowdown(probe.sample())
        waited = time.monotonic() - t0
        self.counts["speed_waits"] += 1
        self.counts["speed_wait_s"] = round(self.counts["speed_wait_s"] + waited, 1)
        self.log(f"waited {waited:.0f} s for CPUs {probe.cpus} to run at speed "
                 + ("(they do)" if slow <= lc.max_slowdown else f"(still {slow:.0%} slow: measuring anyway)"))

    def _observed_run(self, pair: Pair, mode: str, runs: int, tag: str) -> tuple[NativeRun, dict]:
        """One measuring process with what the machine did meanwhile (machine_load.py); a
        process taken under load is run again (``load.retries``) and, still loaded, fails
        the pair (kind ``loaded``): its numbers are never kept."""
        if getattr(self.device, "kind", None) != "host":
            run = self._run(pair, mode, runs, tag)
            return run, {"observed": False, "reason": f"load is read on the host only (device kind "
                                                      f"{getattr(self.device, 'kind', '?')})"}
        lc = self.cfg.load
        probe = self._speed_probe()
        for attempt in range(lc.retries + 1):
            if attempt:
                self.counts["remeasured"] += 1
                pair.remeasured += 1
                time.sleep(lc.wait_s)
            if lc.check and lc.max_slowdown is not None and probe is not None:
                self._wait_for_speed(probe)
            with LoadWindow(self.scenario.cpus or None, probe=probe) as w:
                run = self._run(pair, mode, runs, tag)
                w.count_own(run.outside_cpu_s)
            load = {"observed": True, **w.result, "attempt": attempt}
            why = judge(load, lc)
            if why is None:
                return run, load
            self.log(f"loaded {pair.model_id} {tag} (attempt {attempt + 1} of {lc.retries + 1}): {why}")
        raise MeasureError(f"{pair.artifact}: the {mode} process was taken under load {lc.retries + 1} times, "
                           f"last: {why}", "loaded")

    def _e2e_process(self, pair: Pair) -> None:
        k = len(pair.processes)
        run, load = self._observed_run(pair, "e2e", self._e2e_runs(pair), f"p{k}")
        check_affinity(run, self.scenario)
        check_threads(run, self.scenario)
        samples = [int(r["duration_ns"]) for r in run.runs]
        self.runs_made += len(samples)
        proc = {"digest": self.digest, "process": k, "samples_ns": samples,
                "start_ns": min(r["start_ns"] for r in run.runs), "end_ns": max(r["end_ns"] for r in run.runs),
                "meta": _meta_digest(run.meta), "affinity_ok": run.end.get("affinity_ok"),
                "unix_ns": run.meta.get("start_unix_ns"), "load": load,
                "page_faults_per_run": run.end.get("page_faults_per_run")}
        _write_json(pair.work / f"p{k}.json", proc)
        pair.processes.append(proc)
        if self.on_process:
            self.on_process(proc)

    def _profiled_process(self, pair: Pair, mode: str) -> None:
        run, load = self._observed_run(pair, mode, self.cfg.op_runs, mode)
        check_affinity(run, self.scenario)
        check_threads(run, self.scenario)
        d = {"digest": self.digest, "mode": mode, "meta": _meta_digest(run.meta),
             "samples_ns": [int(r["duration_ns"]) for r in run.runs], "overhead": run.overhead,
             "ops": aggregate_events(run.ops, run.runs) if run.ops else [],
             "kernels": aggregate_events(run.kernels, run.runs) if mode == "kernel" else [],
             "end": {k: v for k, v in run.end.items() if k != "thread_affinity"},
             "trace": f"{pair.model_id}.{mode}.trace.json", "load": load}
        _write_json(pair.work / f"{mode}.json", d)
        pair.profiled[mode] = d

    # -- the sweep
    def run(self, models: Sequence[tuple[str, str]]) -> dict[str, int]:
        remove_orphans(self.out)  # half-written records of a killed sweep
        pairs = self.plan(models)
        order = random.Random(self.cfg.order_seed).sample(pairs, len(pairs))
        self.log(f"start: {len(pairs)} pairs to measure, {self.counts['skipped']} already done "
                 f"({self.counts['released']} of them in the release {self.cfg.release}) "
                 f"(protocol {self.digest}, {self.cfg.stopping.policy} stopping)")
        bar = tqdm(total=sum(self._remaining(p) for p in order), desc=f"measure {self.scenario.scenario_id}", unit="proc",
                   disable=not self.progress, dynamic_ncols=True)
        size = self.cfg.chunk or len(order) or 1
        for start in range(0, len(order), size):
            self._interleave(order[start:start + size], bar)
        bar.close()
        if self.tidy_work:
            tidy_work(self.out)
        self.log(f"end: {self.counts['ok']} measured, {self.counts['failed']} failed "
                 f"({self.counts['refused']} refused as taken under load), {self.counts['skipped']} already done, "
                 f"{self.counts['remeasured']} processes measured again under load, "
                 f"{self.counts['speed_wait_s']:.0f} s waited for the CPUs to run at speed")
        return dict(self.counts)

    def _interleave(self, pairs: Sequence[Pair], bar: tqdm) -> None:
        """Measure ``pairs`` to the end, interleaved: round k runs process k of every pair not yet done."""
        active = list(pairs)
        while active:
            still = []
            for pair in active:  # a round: one more process of every pair not yet done, interleaved
                try:
                    if self._enough(pair) is None:
                        self._e2e_process(pair)
                        bar.update(1)
                        if self._enough(pair) is None:
                            if len(pair.processes) >= self.cfg.processes:
                                bar.total += 1  # adaptive: one more process than planned
                            still.append(pair)
                            continue
                    for mode in self.modes:  # op/kernel processes once the e2e part is complete
                        if mode not in pair.profiled:
                            self._profiled_process(pair, mode)
                            bar.update(1)
                    self._finish(pair)
                except (NativeRunError, MeasureError) as e:
                    bar.update(self._remaining(pair))  # its planned processes will not run
                    self._fail(pair, e)
            active = still

    def _finish(self, pair: Pair) -> None:
        rec = self.build_record(pair)
        _write_json(self.record_path(pair.model_id), rec)
        self.error_path(pair.model_id).unlink(missing_ok=True)
        shutil.rmtree(pair.work, ignore_errors=True)
        pair.done = True
        self.counts["ok"] += 1

    def _fail(self, pair: Pair, e: Exception) -> None:
        kind = getattr(e, "kind", "runtime")
        msg = " ".join(str(e).split())
        _write_json(self.error_path(pair.model_id), {
            "model_id": pair.model_id, "scenario_id": self.scenario.scenario_id, "kind": kind, "error": msg,
            "artifact": str(pair.artifact), "protocol_digest": self.digest, "unix_time": time.time(),
            "processes_done": len(pair.processes)})
        shutil.rmtree(pair.work, ignore_errors=True)
        self.counts["failed"] += 1
        self.counts["refused"] += kind == "loaded"
        self.log(f"failed {pair.model_id}: {kind}: {msg}")
        tqdm.write(f"measure: {pair.model_id}: {kind}: {msg}")

    # -- the record
    def build_record(self, pair: Pair) -> dict[str, Any]:
        pooled = pooled_summary(pair.samples(), self.cfg.stopping.level)
        stop = self._enough(pair)
        rec: dict[str, Any] = {
            "schema": RECORD_SCHEMA,
            "model_id": pair.model_id,
            "source": pair.source,
            "scenario": self.scenario.to_dict(),
            "artifact": {"format": self.format, "path": str(pair.artifact), "bytes": pair.artifact.stat().st_size},
            "protocol": {
                "digest": self.digest, "processes": len(pair.processes), "warmup": self.cfg.warmup,
                "interleaved": True, "order_seed": self.cfg.order_seed, "chunk": self.cfg.chunk,
                "stopping": {"policy": self.cfg.stopping.policy, "params": asdict(self.cfg.stopping),
                             "runs": pooled["n"], "stop_reason": stop},
                "granularities": ["e2e", *self.modes],
                **({"granularities_not_offered": self.not_offered} if self.not_offered else {}),
            },
            "e2e": {
                # the headline: median of the per-process medians (robust to between-process drift)
                "latency_ms": pooled["median_of_medians_ms"],
                **{k: v for k, v in pooled.items() if k != "per_process"},
                # counted by the torch worker (its allocator: pipelines/runners/allocator.py); None elsewhere
                "page_faults_per_run": _median_or_none([p.get("page_faults_per_run") for p in pair.processes]),
                # per process: its statistics and, on phones, the device state it ran in
                # (clocks, thermal status) which may change between processes
                "per_process": [{**s, "start_ns": p["start_ns"], "end_ns": p["end_ns"],
                                 **({"load": p["load"]} if "load" in p else {}),
                                 **({"page_faults_per_run": p["page_faults_per_run"]}
                                    if p.get("page_faults_per_run") is not None else {}),
                                 **({"device": p["meta"]["device"]} if "device" in p["meta"] else {})}
                                for s, p in zip(pooled["per_process"], pair.processes)],
                "samples_ns": pair.samples(),
                "start_ns": min(p["start_ns"] for p in pair.processes),
                "end_ns": max(p["end_ns"] for p in pair.processes),
            },
            "runtime": pair.processes[0]["meta"],
            "load": {**load_summary([p.get("load") for p in pair.processes]
                                    + [d.get("load") for d in pair.profiled.values()], pair.remeasured),
                     "check": asdict(self.cfg.load)},  # the thresholds it was held to (check off: none)
        }
        for mode, d in pair.profiled.items():
            rec[mode] = {"summary": summarize(d["samples_ns"]), "overhead": d["overhead"], "ops": d["ops"],
                         "kernels": d["kernels"], "trace": d["trace"], "end": d["end"], "runtime": d["meta"],
                         **({"load": d["load"]} if "load" in d else {})}
        return rec


def _median_or_none(values: Sequence[float | None]) -> float | None:
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


def _meta_digest(meta: dict) -> dict:
    """The provenance fields of a runtime's meta record worth keeping in every record."""
    keep = ("tool", "tool_version", "runtime", "runtime_version", "framework", "library", "accelerators", "model_bytes",
            "precision", "precision_detected", "engine", "accelerator", "cpus", "threads", "mode", "cpu_kernel_mode",
            "profiling", "memory_sampling", "hostname", "clock", "clock_resolution_ns", "model_ops", "format",
            "model_kind", "device", "gpu", "process_start", "allocator")
    return {k: meta[k] for k in keep if k in meta}


def check_affinity(run: NativeRun, scenario: Scenario) -> None:
    """Every thread of the measuring process ran on the scenario's CPU set (else the numbers
    belong to another scenario: fail the pair rather than record them)."""
    end = run.end
    if scenario.cpus and end.get("affinity_ok") is False:
        bad = [t for t in end.get("thread_affinity", []) if sorted(t.get("cpus", [])) != list(scenario.cpus)]
        raise MeasureError(f"{run.meta.get('model')}: threads ran outside CPUs {list(scenario.cpus)}: "
                           + ", ".join(f"{t.get('name')}/{t.get('tid')} on {t.get('cpus')}" for t in bad[:3]), "cpus")


def check_threads(run: NativeRun, scenario: Scenario) -> None:
    """The process computed with the scenario's thread count: the runtime reports the threads
    it could compute on (``compute_threads_observed``: main + its pool threads, read from the
    OS at the end). Fewer than ``scenario.threads`` means the backend ignored the setting (as
    LiteRT's builtin kernels did before they got it under "cpu_delegate"): the numbers belong
    to a narrower scenario, so the pair fails rather than keeping them. More is allowed: the
    builtin kernels keep two pools (Eigen's and ruy's), every thread inside the CPU set."""
    if not scenario.cpus or not scenario.threads:
        return  # a GPU scenario: the host threads are not the compute
    end = run.end
    seen = end.get("compute_threads_observed")
    if seen is None:  # a runtime that does not count them: main + every non-writer thread
        seen = sum(t.get("role") != "writer" for t in end.get("thread_affinity", [])) or None
    if seen is None or seen < scenario.threads:
        raise MeasureError(f"{run.meta.get('model')}: {run.meta.get('mode')} process computed on {seen} thread(s), "
                           f"the scenario asks for {scenario.threads} (threads {end.get('threads_observed')}: "
                           + ", ".join(f"{t.get('role')}/{t.get('tid')}" for t in end.get("thread_affinity", [])[:6])
                           + ")", "threads")


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


# ------------------------------------------------------------------ the stage entry point
def list_models(cfg: Any, models_dir: Path, runner: str | None = None) -> list[tuple[str, str]]:
    """(source, model_id) of the generated networks the measure config selects for ``runner``
    ("<framework>-<accelerator>"), sorted."""
    m: MeasureConfig = cfg.measure
    sources = m.runner_sources.get(runner, m.sources) if runner else m.sources
    out = []
    for p in sorted(models_dir.glob("*/*.json")):
        if sources and p.parent.name not in sources:
            continue
        if m.models and p.stem not in m.models:
            continue
        out.append((p.parent.name, p.stem))
    return out


def point_config(m: MeasureConfig, point: str) -> MeasureConfig | None:
    """The protocol of one grid point: ``m`` with the point's granularities and sources
    (``measure.points``); None when the points leave it out."""
    if not m.points:
        return m
    p = m.points.get(point)
    if p is None:
        return None
    import copy

    out = copy.deepcopy(m)
    out.points = {}
    if p.granularities:
        out.granularities = list(p.granularities)
    if p.sources:
        out.sources, out.runner_sources = list(p.sources), {}
    return out


def scenario_dir(data_dir: str | Path, device_name: str, scenario_id: str) -> Path:
    return Path(data_dir) / "measurements" / device_name / scenario_id


def grid_dir_name(device_name: str, framework: str, precision: str, cores: str | None,
                  accelerator: str = "cpu") -> str:
    """The folder a matrix stage writes (dvc.yaml spells it with ${...}): the scenario id with
    threads = cores (no core set on the GPU), which the stage also uses when the grid point is
    not offered."""
    return make_scenario_id(device_name, accelerator, framework=framework,
                            cores=cores if accelerator == "cpu" else None, precision=precision)


def run_measure(cfg: Any, framework: str, precision: str, cores: str | None, *, threads: int | None = None,
                accelerator: str = "cpu", device: Device | None = None, models_dir: str | Path | None = None,
                artifacts_dir: str | Path | None = None, out_root: str | Path | None = None,
                progress: bool = True) -> dict[str, Any]:
    """Measure the selected networks in one scenario of the configured device.

    Returns ``{"scenario_id", "status" (measured | not_offered), "out", counts...}``. A grid
    point the device does not offer writes ``SCENARIO.json`` with the reason (DVC needs the
    stage's output) and measures nothing; so does an accelerator the grid leaves out
    (``scenario.accelerators``: how ``dvc exp run -S 'scenario.accelerators=[cpu]'`` turns the
    ``measure-gpu`` cells off). ``cores`` is needed on the CPU only.
    """
    from .devices import make_device

    device = device or make_device(cfg.device)
    models_dir = Path(models_dir or Path(cfg.data_dir) / "models")
    artifacts_dir = Path(artifacts_dir or Path(cfg.data_dir) / "artifacts")
    out_root = Path(out_root or Path(cfg.data_dir) / "measurements" / device.name)
    grid_accelerators = list(getattr(getattr(cfg, "scenario", None), "accelerators", None) or [accelerator])
    point = point_name(framework, precision, cores, accelerator)
    m = point_config(cfg.measure, point)
    if accelerator not in grid_accelerators:
        st = StageScenario(None, f"scenario.accelerators ({', '.join(grid_accelerators)}) leaves out {accelerator}")
    elif m is None:
        st = StageScenario(None, f"measure.points ({', '.join(cfg.measure.points)}) leaves out {point}")
    else:
        st = stage_scenario(device, framework, precision, cores, threads, accelerator)
    if st.scenario is None:
        out = out_root / grid_dir_name(device.name, framework, precision, cores, accelerator)
        out.mkdir(parents=True, exist_ok=True)
        _write_json(out / "SCENARIO.json", {"status": "not_offered", "reason": st.reason, "device": device.name,
                                            "framework": framework, "precision": precision,
                                            "cores": cores if accelerator == "cpu" else None,
                                            "accelerator": accelerator})
        return {"scenario_id": out.name, "status": "not_offered", "reason": st.reason, "out": out,
                "ok": 0, "failed": 0, "skipped": 0}
    scenario = st.scenario
    out = out_root / scenario.scenario_id
    import copy

    cfg = copy.copy(cfg)
    cfg.measure = m  # the point's protocol (measure.points)
    models = list_models(cfg, models_dir, f"{framework}-{accelerator}")
    with device.lock(out_root / ".lock"):
        sweep = Sweep(device, scenario, m, out, artifacts_dir, progress=progress)
        _write_json(out / "SCENARIO.json", {"status": "measured", "scenario": scenario.to_dict(),
                                            "device": device.describe(), "protocol_digest": sweep.digest,
                                            "measure": asdict(m), "models": len(models),
                                            "granularities": ["e2e", *sweep.modes],
                                            "granularities_not_offered": sweep.not_offered})
        counts = sweep.run(models)
    return {"scenario_id": scenario.scenario_id, "status": "measured", "out": out, **counts,
            "runs_made": sweep.runs_made}
