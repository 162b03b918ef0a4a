"""The measure stage's protocol: its config schema, the grid it iterates and what makes two
records comparable.

``measure`` (the section's schema and checks), the grid points of the ``scenario`` section
(the cells of DVC's ``measure`` and ``measure-gpu`` matrices, the formats each reads), the
protocol of one point (``measure.points``), the scenario a point measures on a device (or why
the device does not offer it) and the protocol digest a record is reused under. Other stages
(export, prune, the control set) plan with these without running a sweep.
"""
from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..machine_load import LoadConfig, validate_load
from ..runners import RUNNERS, runner_for
from ..scenarios import PRECISIONS, Scenario, ScenarioGridConfig, make_scenario_id
from ..stats import make_stopper

if TYPE_CHECKING:
    from ..devices.base import Device

GRANULARITIES = ("e2e", "op", "kernel")
# failures of the device rather than of the model (a phone that disconnected) and processes
# taken under load (kind "loaded"): a rerun measures those pairs again without being asked
TRANSIENT_KINDS = ("device", "loaded")


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
    """A grid point, named as its scenario id without the device (and as DVC's matrix names its
    stage): ``tflite-cpu-1large-fp32`` on the CPU, ``tflite-gpu-fp16`` on the GPU."""
    parts = [framework, accelerator, cores if accelerator == "cpu" else None, precision]
    return "-".join(p for p in parts if p)


def parse_point(name: str) -> tuple[str, str, str | None, str]:
    """(framework, precision, cores, accelerator) of a grid point's name (see point_name)."""
    parts = name.split("-")
    if len(parts) == 4 and parts[1] == "cpu" and parts[3] in PRECISIONS:
        return parts[0], parts[3], parts[2], "cpu"
    if len(parts) == 3 and parts[1] != "cpu" and parts[2] in PRECISIONS:
        return parts[0], parts[2], None, parts[1]
    raise ValueError(f"a grid point is <framework>-cpu-<cores>-<precision> or <framework>-<accelerator>-"
                     f"<precision>, e.g. tflite-cpu-1large-fp32, tflite-gpu-fp16 (got {name!r})")


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
    # grid point (tflite-cpu-1large-fp32, tflite-gpu-fp16, ...) -> what it measures; empty: every
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
        try:
            parse_point(name)
        except ValueError as e:
            raise ValueError(f"points.{name}: {e}") from None
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
        stopper(s)
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


def stopper(s: StoppingConfig):
    """The stats rule deciding when a pair has enough samples (pooled over its processes)."""
    if s.policy == "fixed":
        return make_stopper({"policy": "fixed", "runs": s.runs})
    if s.policy == "adaptive":
        return make_stopper({"policy": "adaptive", "rel_width": s.rel_width, "level": s.level,
                             "min_runs": max(s.batch, 1), "max_runs": s.batch * s.max_processes, "batch": s.batch})
    raise ValueError(f"policy: unknown stopping policy {s.policy!r} (known: adaptive, fixed)")


def protocol_digest(cfg: MeasureConfig, scenario: Scenario) -> str:
    """What makes two records comparable: the scenario and every setting of the protocol that
    changes the numbers (not which models are selected, not retries, not timeouts)."""
    d = asdict(cfg)
    # the load thresholds decide which processes are kept, not how they measure
    # (points: a Sweep gets the effective granularities of its point, see point_config)
    # (chunk: how pairs are grouped in time, like the order; not how a process measures)
    for k in ("sources", "runner_sources", "models", "retry_failed", "timeout", "load", "points", "chunk"):
        d.pop(k)
    d["scenario"] = scenario.to_dict()
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


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
    from ..devices.topology import core_set
    from ..scenarios import ACCELERATORS, FRAMEWORKS

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
