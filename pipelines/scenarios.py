"""Scenarios: where and how a model runs, and the grid of them a sweep measures.

A scenario is device x framework x accelerator x cores x threads x precision.

``scenario_id`` follows :func:`make_scenario_id` (the convention of the imported USC/HELP data,
which their importers build with it too, without their dataset prefix):
``<device>-<framework>-<accelerator>-<cores>-<precision>[-t<threads>]``, e.g.
``host-tflite-cpu-2large-fp32``, ``pixel4-pytorch-cpu-1large2med-int8``; ``-t<threads>`` only
when the thread count differs from the number of cores (``host-tflite-cpu-1large-fp32-t2``).
GPU scenarios have no core set: ``pixel4-tflite-gpu-fp16``.

Grid (``ScenarioGridConfig``, from Hydra): frameworks x accelerators x precisions x core sets x
threads. ``cores`` is ``"all"`` (``topology.core_combinations``) or a list of labels; ``threads``
is ``"cores"`` (threads = cores, as the USC paper) or a list of counts. GPU scenarios have no
core set and take their precisions from ``gpu_precisions`` (the GPU's compute precision, fp16
first as in the USC study; None: the same list as ``precisions``): the ``measure-gpu`` DVC stage
iterates it as ``measure`` iterates precisions x cores. ``expand_grid`` keeps the possible
combinations and drops, with a reason (``explain_grid`` returns them):

- a precision the framework's runners do not offer (PyTorch fp16), then ``gpu`` when the device
  has no GPU (with the device's reason when it gives one), then a precision the runner does not
  offer on its accelerator (``gpu`` with int8): the reasons are the runners' own
  (``missing_precisions`` in the runner registry, pipelines/runners/);
- a (framework, accelerator) the suite has no runner for, when the caller passes the runner
  table (``latbench scenarios`` passes ``pipelines.runners.RUNNERS``: no PyTorch on the GPU);
- a core label whose clusters exist in general but not on this device (``1med`` on a one-cluster
  VM, ``3large`` on two CPUs), so one grid serves several devices;
- a core set larger than ``max_cores``.

Unknown values are configuration errors: one-line ``ValueError`` naming the field, e.g.
``precisions: unknown precision 'fp64' (known: fp32, fp16, int8)``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pipelines.devices.topology import Cluster, CoreSet, core_combinations, core_set, cpu_mask, parse_label
from pipelines.runners import accelerators, frameworks, missing_precision

FRAMEWORKS = frameworks()  # the runner registry's (pipelines/runners)
ACCELERATORS = accelerators()
PRECISIONS = ("fp32", "fp16", "int8")
CLUSTER_TAG_WORDS = ("large", "small")  # plus med, medb, medc, ... (topology.cluster_names)


def _known_tag(tag: str) -> bool:
    return tag in CLUSTER_TAG_WORDS or tag == "med" or (tag.startswith("med") and len(tag) == 4 and tag[3].isalpha())


# ---------------------------------------------------------------- scenario ids
_SLUG = re.compile(r"[^a-z0-9]+")


def slug(text: str) -> str:
    """Lower case, only letters and digits (``gold_6226`` -> ``gold6226``)."""
    return _SLUG.sub("", str(text).lower())


def make_scenario_id(device: str, accelerator: str, *, framework: str | None = None, cores: str | None = None,
                     precision: str | None = None, batch: int = 1, prefix: str | None = None) -> str:
    """``[<prefix>-]<device>[-<framework>]-<accelerator>[-<cores>][-<precision>][-b<batch>]``.

    Parts are lower-case letters and digits; unknown parts are left out; ``-b<batch>`` only
    when the batch is not 1; ``prefix`` names the public dataset (``usc``, ``help``) so that
    imported scenarios never collide with the suite's own measurements, which have none.
    E.g. ``usc-pixel4-tflite-cpu-1large-fp32``, ``usc-s10-pytorch-gpu-fp16``,
    ``help-pixel3-tflite-cpu``, ``help-titanxp-gpu-b32``, ``pixel4-litert-cpu-2med-int8``.
    """
    parts = [prefix, device, framework, accelerator, cores, precision]
    out = [slug(p) for p in parts if p]
    if any(not p for p in out):
        raise ValueError(f"scenario id parts must contain letters or digits: {parts}")
    if batch != 1:
        out.append(f"b{int(batch)}")
    return "-".join(out)


# ---------------------------------------------------------------- scenario
@dataclass(frozen=True)
class Scenario:
    device: str
    framework: str
    accelerator: str
    precision: str
    cores: str | None = None  # core-set label (1large2med); None on GPU
    cpus: tuple[int, ...] = ()
    threads: int = 1

    def __post_init__(self):
        _check("framework", self.framework, FRAMEWORKS, "framework")
        _check("accelerator", self.accelerator, ACCELERATORS, "accelerator")
        _check("precision", self.precision, PRECISIONS, "precision")
        object.__setattr__(self, "cpus", tuple(sorted(int(c) for c in self.cpus)))
        if int(self.threads) < 1:
            raise ValueError(f"threads: must be >= 1, got {self.threads}")
        object.__setattr__(self, "threads", int(self.threads))

    @property
    def core_count(self) -> int:
        return len(self.cpus)

    @property
    def mask(self) -> str | None:
        return cpu_mask(self.cpus) if self.cpus else None

    @property
    def scenario_id(self) -> str:
        sid = make_scenario_id(self.device, self.accelerator, framework=self.framework,
                               cores=self.cores, precision=self.precision)
        if self.cpus and self.threads != len(self.cpus):
            sid += f"-t{self.threads}"
        return sid

    def to_dict(self) -> dict[str, Any]:
        """The record's scenario part (column names as the dataset's scenarios table)."""
        return {
            "scenario_id": self.scenario_id, "device": self.device, "framework": self.framework,
            "accelerator": self.accelerator, "cores": self.cores, "cpus": list(self.cpus),
            "mask": self.mask, "core_count": self.core_count or None, "threads": self.threads,
            "heterogeneous": (len(parse_label(self.cores)) > 1) if self.cores else None,
            "precision": self.precision, "batch": 1,
        }


def _check(field_name: str, value: Any, known: Sequence[str], what: str) -> None:
    if value not in known:
        raise ValueError(f"{field_name}: unknown {what} {value!r} (known: {', '.join(known)})")


# ---------------------------------------------------------------- grid config
@dataclass
class ScenarioGridConfig:
    frameworks: list[str] = field(default_factory=lambda: ["tflite"])
    accelerators: list[str] = field(default_factory=lambda: ["cpu"])
    precisions: list[str] = field(default_factory=lambda: ["fp32"])
    cores: Any = "all"  # "all" or a list of core-set labels (1large, 2med, 1large2med)
    threads: Any = "cores"  # "cores" (threads = cores) or a list of thread counts
    max_cores: int | None = None  # drop core sets with more cores
    gpu_precisions: Any = None  # precisions of the GPU scenarios; None: the same as `precisions`

    def validate(self) -> "ScenarioGridConfig":
        """Check every field (types against the schema, in place: foundation.configs.check_fields;
        then the values); a wrong one is a one-line ValueError naming the field."""
        from foundation.configs import check_fields

        check_fields(self)
        for name, known, what in (("frameworks", FRAMEWORKS, "framework"),
                                  ("accelerators", ACCELERATORS, "accelerator"),
                                  ("precisions", PRECISIONS, "precision"),
                                  ("gpu_precisions", PRECISIONS, "precision")):
            if name == "gpu_precisions" and self.gpu_precisions is None:
                continue
            values = _as_list(name, getattr(self, name))  # gpu_precisions: any type (Any)
            if not values:
                raise ValueError(f"{name}: must not be empty")
            for v in values:
                _check(name, v, known, what)
        labels = _word_or_list("cores", self.cores, "all", "a list of labels such as [1large, 2med]")
        if labels is not None:
            for label in labels:
                try:
                    counts = parse_label(str(label))
                except ValueError as e:
                    raise ValueError(f"cores: {e}") from None
                for _, tag in counts:
                    if not _known_tag(tag):
                        raise ValueError(f"cores: unknown cluster {tag!r} in {label!r} (known: large, med, small)")
        counts = _word_or_list("threads", self.threads, "cores", "a list of counts")
        if counts is not None:
            for t in counts:
                # `threads` is the word or a list (Any: OmegaConf has no union with a list), so the
                # schema cannot type its items
                if isinstance(t, bool) or not isinstance(t, int) or t < 1:
                    raise ValueError(f"threads: expected positive integers, got {t!r}")
        if self.max_cores is not None and self.max_cores < 1:
            raise ValueError(f"max_cores: expected a positive integer or null, got {self.max_cores!r}")
        return self

    @classmethod
    def from_config(cls, cfg: Any) -> "ScenarioGridConfig":
        """From a mapping or an OmegaConf node (Hydra), checked (foundation.configs.coerce) and
        validated."""
        from foundation.configs import coerce

        return coerce(cls, cfg).validate()


def _word_or_list(name: str, value: Any, word: str, a_list: str) -> list | None:
    """A grid field that is either the one ``word`` (None) or a non-empty list (the list)."""
    if isinstance(value, str):
        if value != word:
            raise ValueError(f"{name}: expected '{word}' or {a_list}, got {value!r}")
        return None
    values = _as_list(name, value)
    if not values:
        raise ValueError(f"{name}: must not be empty (use '{word}')")
    return values


def _as_list(name: str, value: Any) -> list:
    if isinstance(value, str):
        return [value]
    try:
        return list(value)
    except TypeError:
        raise ValueError(f"{name}: expected a list, got {value!r}") from None


# ---------------------------------------------------------------- expansion
@dataclass(frozen=True)
class Dropped:
    """A grid combination not offered, and why."""

    what: str  # the would-be scenario id (or its parts)
    reason: str


def _core_sets(clusters: Sequence[Cluster], grid: ScenarioGridConfig, dropped: list[Dropped]) -> list[CoreSet]:
    if grid.cores == "all":
        sets = core_combinations(clusters)
    else:
        sets = []
        for label in grid.cores:
            try:
                sets.append(core_set(clusters, str(label)))
            except ValueError as e:
                dropped.append(Dropped(str(label), str(e)))
    out = []
    for cs in sets:
        if grid.max_cores is not None and cs.n_cores > grid.max_cores:
            dropped.append(Dropped(cs.label, f"{cs.n_cores} cores > max_cores {grid.max_cores}"))
        elif cs.label not in {c.label for c in out}:
            out.append(cs)
    return out


def explain_grid(device_clusters: Sequence[Cluster], grid: ScenarioGridConfig | Any, *, device: str = "host",
                 gpu: str | bool | None = None, no_gpu_reason: str | None = None,
                 runners: Mapping[tuple[str, str], Any] | None = None) -> tuple[list[Scenario], list[Dropped]]:
    """``(scenarios, dropped)`` of a grid on a device (``gpu``: its GPU name, None if it has none;
    ``no_gpu_reason``: why not, when known; ``runners``: the (framework, accelerator) pairs that
    can be measured, None: all)."""
    grid = grid.validate() if isinstance(grid, ScenarioGridConfig) else ScenarioGridConfig.from_config(grid)
    dropped: list[Dropped] = []
    sets = _core_sets(device_clusters, grid, dropped) if "cpu" in grid.accelerators else []
    out: list[Scenario] = []
    seen: set[str] = set()

    def add(s: Scenario) -> None:
        if s.scenario_id not in seen:
            seen.add(s.scenario_id)
            out.append(s)

    for fw in grid.frameworks:
        for acc in grid.accelerators:
            if runners is not None and (fw, acc) not in runners:
                dropped.append(Dropped(f"{device}-{fw}-{acc}", f"the suite has no {fw} runner for the {acc}"))
                continue
            precisions = grid.precisions if acc == "cpu" or grid.gpu_precisions is None else grid.gpu_precisions
            for prec in precisions:
                what = f"{device}-{fw}-{acc}-{prec}"
                why = missing_precision(prec, framework=fw)  # no runner of the framework runs it
                if why:
                    dropped.append(Dropped(what, f"{fw} {prec} is not offered: {why}"))
                    continue
                if acc == "gpu" and not gpu:
                    dropped.append(Dropped(what, f"device {device} has no GPU"
                                           + (f": {no_gpu_reason}" if no_gpu_reason else "")))
                    continue
                # the runner's own reason; a pair without a runner (runners=None) takes its accelerator's
                why = missing_precision(prec, framework=fw, accelerator=acc) or missing_precision(prec, accelerator=acc)
                if why:
                    dropped.append(Dropped(what, f"{fw} {prec} is not offered on the {acc}: {why}"))
                    continue
                if acc == "gpu":
                    add(Scenario(device, fw, acc, prec))
                    continue
                for cs in sets:
                    threads = [cs.n_cores] if grid.threads == "cores" else list(grid.threads)
                    for t in threads:
                        add(Scenario(device, fw, acc, prec, cores=cs.label, cpus=cs.cpus, threads=t))
    return out, dropped


def expand_grid(device_clusters: Sequence[Cluster], grid: ScenarioGridConfig | Any, *, device: str = "host",
                gpu: str | bool | None = None, no_gpu_reason: str | None = None,
                runners: Mapping[tuple[str, str], Any] | None = None) -> list[Scenario]:
    """The scenarios of a grid on a device, impossible combinations dropped (see the module doc)."""
    return explain_grid(device_clusters, grid, device=device, gpu=gpu, no_gpu_reason=no_gpu_reason,
                        runners=runners)[0]
