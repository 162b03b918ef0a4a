"""Importer of Qualcomm AI Hub's published measurements (quic/ai-hub-models) into the dataset schema.

Reads one ``perf.yaml`` per model folder under ``QaihubConfig.path``: ``<model>/perf.yaml`` (this
machine's copy) or the repository's ``qai_hub_models/models/<model>/perf.yaml`` (what the pull
brings), each with the bounded YAML loader (foundation/safeload.py). A file holds, per precision
and component, per device and runtime, one profile job: its status, inference time, estimated
peak-memory range, primary compute unit, layer counts per compute unit and tool versions.

It produces:

- ``scenarios``: one per device x runtime x precision x primary compute unit, named
  ``qaihub-<device>-<runtime>-<unit>-<precision>`` (``qaihub-galaxys24-tflite-npu-float``); the
  device catalog (``sources.qaihub``) describes the device, a device outside it imports with a
  blank description and a problem line;
- ``e2e``: the job's inference time as ``latency_ms`` (``latency_stat = reported``: one value per
  job, its statistic unstated), the peak-memory range (``peak_memory_*_mb``), the layer placement
  (``layers``, ``layers_npu``, ``layers_gpu``, ``layers_cpu``) and the tool versions;
- ``models``: one per model folder and component. The classification networks the IR expresses
  (:mod:`.qaihub_models`) are rebuilt as IR (``rebuild_ir``) and checked twice: their parameters
  against pytorchcv's own count (or the zoo family's) and against the count the source states;
  the other networks are keyed ``qaihub:<name>`` with the reason in ``meta``.

Nothing is dropped in silence: a job that did not pass, an entry without an inference time (the
LLMs' ``llm_metrics``), a value that is no number or lies beyond foundation/limits.py, a file that
is not YAML of this layout are problem lines naming the file, line and key path, and the rest
imports. docs/dataset.md (*Qualcomm AI Hub*) has the details.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .importers import ImportProblem, ImportResult, PublicDataError, blank_device, check_config_fields, data_folder
from .importers import device_from_entry, finish, not_in_catalog, select_devices
from .qaihub_models import PARAMS_TOLERANCE, RECIPES, Recipe, no_ir_reason, use_case
from .schema import TableBuilder
from foundation import limits
from foundation.configs import coerce
from foundation.safeload import LoadError, load_yaml
from pipelines.devices.catalog import Catalog, as_catalog
from pipelines.scenarios import make_scenario_id, slug

DATASET = "qai-hub-models"
PREFIX = "qaihub"
REPOSITORY = "https://github.com/quic/ai-hub-models"
COMMIT = "52c080d245d2d20c634459208ff2548ce10b3c9f"
SOURCE = "qaihub"  # models.source of a network without IR
LAYOUTS = ("", "qai_hub_models/models/")  # <prefix><model>/perf.yaml: the copy's layout, the repository's
PASSED = "Passed"
UNITS = {"NPU": "npu", "GPU": "gpu", "CPU": "cpu"}  # primary_compute_unit -> accelerator
RUNTIMES = {"tflite": "TensorFlow Lite", "qnn_dlc": "QNN (a DLC file)", "onnx": "ONNX Runtime",
            "qnn_context_binary": "QNN (a context binary)", "precompiled_qnn_onnx": "ONNX Runtime on a precompiled QNN "
            "context", "genie": "Genie"}  # words for the descriptions; another runtime keeps the source's name
LAYER_UNITS = ("npu", "gpu", "cpu")


# ---------------------------------------------------------------- config
@dataclass
class QaihubConfig:
    path: str = "external/qai-hub-models"  # folder with <model>/perf.yaml (or the repository's qai_hub_models/models/)
    rebuild_ir: bool = True  # build the IR of the networks the mapping expresses: their model ids are IR hashes
    store_ir: bool = True  # keep the IR JSON in models.ir (always for a network its arch cannot rebuild)
    models: list[str] = field(default_factory=list)  # only these model folders (empty: all)
    devices: list[str] = field(default_factory=list)  # only these devices (AI Hub's or the catalog's names; empty: all)
    strict: bool = False  # any problem in the input is an error


def validate_config(cfg: Any) -> QaihubConfig:
    """A config section (dataclass, mapping, or OmegaConf node) -> a checked QaihubConfig (a new
    one; types: the schema, through ``coerce``); ValueError("<field>: ...")."""
    cfg = coerce(QaihubConfig, cfg)
    check_config_fields(cfg)
    return cfg


# ---------------------------------------------------------------- files
def find_files(root: Path) -> dict[str, Path]:
    """Model folder -> its perf.yaml, in either layout (the copy's first); PublicDataError past
    ``limits.PUBLIC_FILES`` folders."""
    out: dict[str, Path] = {}
    for prefix in LAYOUTS:
        base = root / prefix
        if not base.is_dir():
            continue
        for i, d in enumerate(sorted(base.iterdir())):
            if i >= limits.PUBLIC_FILES:
                raise PublicDataError(f"{base}: more than {limits.PUBLIC_FILES} entries (limits.PUBLIC_FILES)")
            if (d / "perf.yaml").is_file():
                out.setdefault(d.name, d / "perf.yaml")
    return dict(sorted(out.items()))


@dataclass
class _File:
    folder: str
    name: str  # relative to the root, as problems and provenance name it
    doc: dict
    lines: dict[tuple, int]

    def line(self, *path: Any) -> int | None:
        return self.lines.get(tuple(str(p) for p in path))


def _where(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def _read(folder: str, path: Path, root: Path, problems: list[ImportProblem]) -> _File | None:
    name = path.relative_to(root).as_posix()
    lines: dict[tuple, int] = {}
    try:
        doc = load_yaml(path, where=name, lines=lines)
    except LoadError as e:
        msg = str(e).removeprefix(f"{name}: ")
        problems.append(ImportProblem(name, None, None, f"{msg}; file skipped"))
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("precisions"), dict):
        problems.append(ImportProblem(name, None, "precisions", "not an AI Hub perf.yaml: no `precisions` mapping at "
                                      "the top level; file skipped"))
        return None
    return _File(folder, name, doc, lines)


@dataclass
class _Job:
    """One device x runtime entry of a file, located."""

    file: _File
    precision: str
    component: str
    device: str
    runtime: str
    entry: Any

    @property
    def path(self) -> tuple:
        return ("precisions", self.precision, "components", self.component, "performance_metrics", self.device,
                self.runtime)

    @property
    def line(self) -> int | None:
        return self.file.line(*self.path)

    def problem(self, problems: list[ImportProblem], message: str, *sub: str) -> None:
        problems.append(ImportProblem(self.file.name, self.file.line(*self.path, *sub) or self.line,
                                      _where(self.path + sub), message))


def _jobs(f: _File, problems: list[ImportProblem], notes: list[str]) -> list[_Job]:
    """The file's entries; a level that is not a mapping is a problem (and what is under it is skipped)."""
    out: list[_Job] = []

    def mapping(value: Any, path: tuple, what: str) -> dict | None:
        if isinstance(value, dict):
            return value
        problems.append(ImportProblem(f.name, f.line(*path), _where(path), f"expected a mapping of {what}, got "
                                      f"{type(value).__name__}; skipped"))
        return None

    for prec, pv in f.doc["precisions"].items():
        pv = mapping(pv, ("precisions", prec), "components")
        comps = mapping(pv.get("components"), ("precisions", prec, "components"), "components") if pv else None
        for comp, cv in (comps or {}).items():
            at = ("precisions", prec, "components", comp)
            cv = mapping(cv, at, "assets and measurements")
            if cv is None:
                continue
            if cv.get("performance_metrics") is None:
                notes.append(f"{f.name}: {_where(at)}: no performance_metrics (no measurement)")
                continue
            metrics = mapping(cv["performance_metrics"], at + ("performance_metrics",), "devices")
            for dev, dv in (metrics or {}).items():
                dv = mapping(dv, at + ("performance_metrics", dev), "runtimes")
                for rt, entry in (dv or {}).items():
                    out.append(_Job(f, str(prec), str(comp), str(dev), str(rt), entry))
    return out


# ---------------------------------------------------------------- values
def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _latency(job: _Job, problems: list[ImportProblem]) -> float | None:
    """The job's inference time in ms, or None with a problem line (the row is not imported)."""
    e = job.entry
    if not isinstance(e, dict):
        job.problem(problems, f"expected a mapping (the job's results), got {type(e).__name__}; not imported")
        return None
    t = e.get("inference_time_milliseconds")
    if t is None:
        if "llm_metrics" in e:
            why = ("an LLM's entry: its llm_metrics (time to first token, tokens per second) are not one inference's "
                   "time, which the e2e table holds")
        else:
            why = "the entry states no time"
        job.problem(problems, f"no inference_time_milliseconds ({why}); not imported")
        return None
    status = e.get("job_status")
    if status != PASSED:
        said = "no job_status" if status is None else f"job status {str(status)[:40]!r}"
        job.problem(problems, f"job {str(e.get('job_id'))[:40]!r}: {said}, not {PASSED!r}: not a measurement; "
                    "not imported", "job_status")
        return None
    ms = _number(t)
    if ms is None or ms <= 0:
        job.problem(problems, f"inference_time_milliseconds {str(t)[:40]!r} is not a time > 0; not imported",
                    "inference_time_milliseconds")
        return None
    if ms > limits.LATENCY_MS:
        job.problem(problems, f"inference_time_milliseconds {ms:g} is above {limits.LATENCY_MS:g} ms (limits.LATENCY_MS: "
                    "one inference takes less than an hour); not imported", "inference_time_milliseconds")
        return None
    return ms


def _memory(job: _Job, problems: list[ImportProblem]) -> tuple[float | None, float | None]:
    m = job.entry.get("estimated_peak_memory_range_mb")
    key = "estimated_peak_memory_range_mb"
    if m is None:
        job.problem(problems, "no estimated_peak_memory_range_mb; memory left empty")
        return None, None
    lo, hi = (_number(m.get("min")), _number(m.get("max"))) if isinstance(m, dict) else (None, None)
    if lo is None or hi is None:
        job.problem(problems, f"{key} is not a range {{min, max}} of numbers ({str(m)[:60]}); memory left empty", key)
        return None, None
    if not 0 <= lo <= hi <= limits.MEMORY_MB:
        job.problem(problems, f"{key} {lo:g}-{hi:g} MB is not a range within 0-{limits.MEMORY_MB:g} MB "
                    "(limits.MEMORY_MB); memory left empty", key)
        return None, None
    return lo, hi


def _layers(job: _Job, problems: list[ImportProblem]) -> dict[str, int | None]:
    """``layers`` and ``layers_<unit>`` (a unit the source leaves out ran no layer), or all empty
    with a problem."""
    empty: dict[str, int | None] = {"layers": None, **{f"layers_{u}": None for u in LAYER_UNITS}}
    c = job.entry.get("layer_counts")
    if c is None:
        job.problem(problems, "no layer_counts; layer placement left empty")
        return empty
    if not isinstance(c, dict):
        job.problem(problems, f"layer_counts is not a mapping ({str(c)[:60]}); layer placement left empty", "layer_counts")
        return empty
    unknown = [k for k in c if k not in ("total", *LAYER_UNITS)]
    if unknown:
        job.problem(problems, f"layer_counts names compute unit {unknown[0]!r} (known: {', '.join(LAYER_UNITS)}); "
                    "layer placement left empty", "layer_counts")
        return empty
    counts: dict[str, int] = {}
    for k in ("total", *LAYER_UNITS):
        v = c.get(k, None if k == "total" else 0)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= limits.LAYERS:
            job.problem(problems, f"layer_counts.{k} {str(v)[:40]!r} is not a count within 0-{limits.LAYERS} "
                        "(limits.LAYERS); layer placement left empty", "layer_counts")
            return empty
        counts[k] = v
    if sum(counts[u] for u in LAYER_UNITS) != counts["total"]:
        job.problem(problems, f"layer_counts per unit add up to {sum(counts[u] for u in LAYER_UNITS)}, not to the "
                    f"total {counts['total']}; layer placement left empty", "layer_counts")
        return empty
    return {"layers": counts["total"], **{f"layers_{u}": counts[u] for u in LAYER_UNITS}}


def _versions(job: _Job, problems: list[ImportProblem]) -> str | None:
    v = job.entry.get("tool_versions")
    if v is None:
        return None
    if not isinstance(v, dict) or not all(isinstance(x, (str, int, float)) for x in v.values()):
        job.problem(problems, "tool_versions is not a mapping of tool -> version; left empty", "tool_versions")
        return None
    return ", ".join(f"{k} {x}" for k, x in v.items())[:200] or None


_PRECISION = re.compile(r"w(\d+)(?:a(\d+))?(?:_mixed_(\w+))?")


def precision_words(p: str) -> str:
    """``w8a16`` -> ``8-bit weights, 16-bit activations``; ``float`` -> ``floating point``."""
    if p == "float":
        return "floating point"
    m = _PRECISION.fullmatch(p)
    if not m:
        return p
    w, a, mixed = m.groups()
    words = f"{w}-bit weights" + (f", {a}-bit activations" if a else "")
    return words + (f", some layers in {mixed}" if mixed else "")


# ---------------------------------------------------------------- networks
@dataclass
class _Network:
    folder: str
    component: str
    name: str  # the model's name when it has no IR: <folder> or <folder>:<component>
    file: str  # the first file naming it
    row: dict | None = None


@functools.lru_cache(maxsize=None)
def build_ir(folder: str) -> tuple[Any, dict]:
    """The IR of a mapped network and what its checks compared (``{"module": n, "stated_by": ...}``);
    ValueError with a one-line reason when the recipe cannot be built or a count differs."""
    r = RECIPES[folder]
    counts: dict[str, Any] = {}
    g, module_params = _build(r, counts)
    s = g.summary()
    if module_params is not None and s["params"] != module_params:
        raise ValueError(f"the IR has {s['params']:,} parameters, the torch module {module_params:,}")
    stated = counts.get("stated")
    if stated is not None and abs(s["params"] - stated) > counts.get("stated_rtol", 0.0) * stated:
        raise ValueError(f"the IR has {s['params']:,} parameters, {counts['stated_by']} states {stated:,}")
    off = s["params"] / r.params - 1
    if abs(off) > PARAMS_TOLERANCE:
        raise ValueError(f"the IR has {s['params']:,} parameters, {r.params_by or 'the source'} states "
                         f"{r.params / 1e6:g}M ({off:+.1%}; at most {PARAMS_TOLERANCE:.0%} apart): not the measured network")
    counts["params_vs_source"] = round(off, 4)
    return g, counts


def _build(r: Recipe, counts: dict) -> tuple[Any, int | None]:
    """(graph, the torch module's parameter count or None); ``counts`` gets the count pytorchcv
    or the zoo states for the network (``stated``, ``stated_by``)."""
    if r.kind == "zoo":
        from generators.zoo import FAMILIES, configured, reference

        if r.kwargs:  # a published sibling of the family's reference: the source's count is the check
            return configured(r.name, dict(r.kwargs), r.label), None
        # the family's well-known count, within the source check's tolerance: a family whose IR
        # leaves out what it cannot express (EfficientFormer's layer scales) says so in its module
        counts.update(stated=FAMILIES.get(r.name).params, stated_by=f"the zoo's {r.name} family",
                      stated_rtol=PARAMS_TOLERANCE)
        return reference(r.name), None
    import torch

    from generators.importers.pytorch import build_pytorchcv, import_module, import_pytorchcv, pytorchcv_weight_count

    kwargs = dict(r.kwargs)
    if r.kind == "pytorchcv":
        if not kwargs:  # pytorchcv's own count is of the model as it builds it
            counts.update(stated=pytorchcv_weight_count(r.name), stated_by=f"pytorchcv ({r.name})")
        if not (kwargs or r.global_pool) and r.input_shape == (1, 3, 224, 224):
            g = import_pytorchcv(r.name, 224)  # the same graph (and id) as every import of this name
            return g, sum(p.numel() for p in build_pytorchcv(r.name).parameters())
        module = build_pytorchcv(r.name, **kwargs)
    elif r.kind == "pytorchcv_builder":
        import importlib

        mod, fn = r.name.split(":")
        builder = getattr(importlib.import_module(f"pytorchcv.models.{mod}"), fn)
        with torch.device("meta"):
            module = builder(**kwargs).eval()
    else:
        raise ValueError(f"unknown recipe kind {r.kind!r}")
    if r.global_pool:
        features = getattr(module, "features", None)
        if features is None or not hasattr(features, "final_pool"):
            raise ValueError(f"{r.name}: no features.final_pool to make global")
        features.final_pool = torch.nn.AdaptiveAvgPool2d(1)
    meta = {"pytorchcv": r.name, "kwargs": {k: list(v) if isinstance(v, tuple) else v for k, v in r.kwargs},
            "global_pool": r.global_pool}
    g = import_module(module, r.input_shape, name=r.label or r.name, source="pytorch", meta=meta)
    return g, sum(p.numel() for p in module.parameters())


def _family(r: Recipe, g: Any) -> str:
    from .usc import usc_family

    if r.kind == "zoo":
        return r.name
    return usc_family(r.name if r.kind == "pytorchcv" else (r.label or r.name))


# ---------------------------------------------------------------- the importer
def import_qaihub(cfg: Any = None, progress: bool = False, catalog: Catalog | str | Path | None = None) -> ImportResult:
    """Read the perf.yaml files under ``cfg.path``; return the five tables (see the module doc).
    ``catalog`` and the errors: as every importer's (:mod:`.importers`)."""
    cfg = validate_config(cfg)
    catalog = as_catalog(catalog)
    root = data_folder(cfg.path, "qaihub")
    problems: list[ImportProblem] = []
    notes: list[str] = []
    paths = find_files(root)
    if not paths:
        raise PublicDataError(f"{root}: no <model>/perf.yaml (nor qai_hub_models/models/<model>/perf.yaml) found")
    for m in cfg.models:
        if m not in paths:
            problems.append(ImportProblem("(config)", None, "models", f"model {m!r} has no perf.yaml in {root}"))
    wanted = {m: p for m, p in paths.items() if not cfg.models or m in cfg.models}
    files = [f for m, p in wanted.items() if (f := _read(m, p, root, problems)) is not None]
    notes.extend(_pins_note(root, wanted))
    jobs = [j for f in files for j in _jobs(f, problems, notes)]
    devices = _devices(jobs, cfg.devices, catalog, problems)
    jobs = [j for j in jobs if j.device in devices]

    # -------- networks: one per folder and component
    comps: dict[str, list[str]] = {}
    for j in jobs:
        comps.setdefault(j.file.folder, [])
        if j.component not in comps[j.file.folder]:
            comps[j.file.folder].append(j.component)
    nets: dict[tuple[str, str], _Network] = {}
    for j in jobs:
        key = (j.file.folder, j.component)
        if key not in nets:
            one = len(comps[j.file.folder]) == 1
            nets[key] = _Network(j.file.folder, j.component, j.file.folder if one else f"{j.file.folder}:{j.component}",
                                 j.file.name)
    _model_rows(nets, comps, cfg, problems, notes, progress)

    # -------- scenarios and e2e
    scenarios: dict[str, dict] = {}
    spelled: dict[str, tuple] = {}
    e2e = TableBuilder("e2e")
    seen: dict[tuple[str, str], tuple[str, int | None]] = {}
    for j in jobs:
        ms = _latency(j, problems)
        if ms is None:
            continue
        pcu = j.entry.get("primary_compute_unit")
        unit = UNITS.get(pcu) if isinstance(pcu, str) else None
        if unit is None:
            j.problem(problems, f"primary_compute_unit {str(j.entry.get('primary_compute_unit'))[:40]!r} is none of "
                      f"{', '.join(UNITS)}; not imported", "primary_compute_unit")
            continue
        if not slug(j.runtime) or not slug(j.precision):
            j.problem(problems, "a runtime or precision name without a letter or digit cannot name a scenario; not imported")
            continue
        d = devices[j.device]
        sid = make_scenario_id(d.name, unit, framework=j.runtime, precision=j.precision, prefix=PREFIX)
        what = (j.device, j.runtime, j.precision, unit)
        if spelled.setdefault(sid, what) != what:
            j.problem(problems, f"scenario id {sid} would also name {spelled[sid]}; not imported")
            continue
        if sid not in scenarios:
            scenarios[sid] = _scenario_row(sid, d, j, unit)
        net = nets[(j.file.folder, j.component)]
        mid = net.row["model_id"]
        if (mid, sid) in seen:
            first = seen[(mid, sid)]
            j.problem(problems, f"the same network in the same scenario as {first[0]} line {first[1]}; not imported")
            continue
        seen[(mid, sid)] = (j.file.name, j.line)
        lo, hi = _memory(j, problems)
        e2e.add(model_id=mid, scenario_id=sid, latency_ms=ms, latency_stat="reported",
                runtime_version=_versions(j, problems), peak_memory_min_mb=lo, peak_memory_max_mb=hi,
                **_layers(j, problems), dataset=DATASET, source_file=j.file.name, source_row=j.line,
                source_column=_where(j.path), source_commit=COMMIT)

    models = TableBuilder("models")
    for n in nets.values():
        models.add(**n.row)
    sc = TableBuilder("scenarios")
    for r in scenarios.values():
        sc.add(**r)
    tables = {"models": models.frame(), "scenarios": sc.frame(), "e2e": e2e.frame(),
              "ops": TableBuilder("ops").frame(), "kernels": TableBuilder("kernels").frame()}
    return finish(DATASET, tables, problems, notes, cfg.strict)


def _devices(jobs: list[_Job], wanted: list[str], catalog: Catalog, problems: list[ImportProblem]) -> dict[str, Any]:
    """AI Hub device name -> Device (the catalog's, else blank with a problem), those the filter
    selects. A name no scenario id can spell, or spelled as another device's, is a problem and
    its entries are skipped."""
    found: dict[str, Any] = {}
    first: dict[str, _Job] = {}
    spelled: dict[str, str] = {}
    for j in jobs:
        if j.device in first:
            continue
        first[j.device] = j
        match = catalog.resolve("qaihub", j.device)
        d = device_from_entry(match.entry) if match else blank_device(j.device)
        key = slug(d.name)
        if not key or spelled.setdefault(key, j.device) != j.device:
            why = ("has no letter or digit to name scenarios with" if not key else
                   f"would name scenarios as device {spelled[key]!r} does ({PREFIX}-{key}-...)")
            problems.append(ImportProblem(j.file.name, j.file.line(*j.path[:-1]), _where(j.path[:-1]),
                                          f"device {j.device!r} {why}; its entries are skipped"))
            continue
        found[j.device] = d
    present = {n: (catalog.lookup(d.name) if d.in_catalog else None) for n, d in found.items()}
    selected = select_devices(wanted, present, catalog, problems)
    for n, d in found.items():
        if n in selected and not d.in_catalog:
            j = first[n]
            problems.append(ImportProblem(j.file.name, j.file.line(*j.path[:-1]), _where(j.path[:-1]),
                                          not_in_catalog(n, catalog)))
    return {n: d for n, d in found.items() if n in selected}


def _scenario_row(sid: str, d: Any, j: _Job, unit: str) -> dict:
    runtime = RUNTIMES.get(j.runtime, j.runtime)
    desc = (f"{d.label}, a Qualcomm AI Hub profile job with {runtime}, {precision_words(j.precision)} "
            f"(the source's {j.precision}), primary compute unit {unit.upper()} (where the runtime placed most "
            "layers), batch 1")
    if d.note:
        desc += f" ({d.note})"
    return dict(scenario_id=sid, device=d.name, device_model=d.model, soc=d.soc, cpu=d.cpu, gpu=d.gpu,
                framework=j.runtime, framework_version=None, accelerator=unit, cores=None, core_count=None,
                threads=None, heterogeneous=None, precision=j.precision, batch=1, description=desc, dataset=DATASET,
                source_file=j.file.name, source_row=j.line, source_column=_where(j.path), source_commit=COMMIT)


def _model_rows(nets: dict[tuple[str, str], _Network], comps: dict[str, list[str]], cfg: QaihubConfig,
                problems: list[ImportProblem], notes: list[str], progress: bool) -> None:
    """Fill each network's models row: with its IR where the mapping has a recipe and the IR
    passes its checks, else keyed ``qaihub:<name>`` with the reason."""
    items = list(nets.values())
    if progress and cfg.rebuild_ir:
        from tqdm import tqdm

        items = tqdm(items, desc="qaihub: rebuild IR", unit="net")
    with_ir = 0
    for n in items:
        base = dict(dataset=DATASET, source_file=n.file, source_row=None, source_column="precisions.*.components",
                    source_commit=COMMIT)
        meta: dict[str, Any] = {"qaihub_model": n.folder, "component": n.component, "use_case": use_case(n.folder)}
        r = RECIPES.get(n.folder) if len(comps[n.folder]) == 1 else None
        reason = None if r else no_ir_reason(n.folder)
        if r is not None and not cfg.rebuild_ir:
            source, label = ("zoo", r.label or r.name) if r.kind == "zoo" else ("pytorch", r.label or r.name)
            meta["recipe"] = _recipe_meta(r)
            n.row = dict(base, model_id=f"{source}:{label}", name=label, source=source, family=_family(r, None),
                         arch=r.name if r.kind == "pytorchcv" and not (r.kwargs or r.global_pool) else None,
                         input_shape="x".join(map(str, r.input_shape)), meta=json.dumps(meta, sort_keys=True))
            continue
        if r is not None:
            try:
                g, checks = build_ir(n.folder)
            except Exception as e:  # noqa: BLE001 - one network's failure is reported (file), the rest imports
                reason = f"its IR ({r.kind} {r.name}) is not used: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                problems.append(ImportProblem(n.file, None, None, f"model {n.folder}: {reason}; imported without IR "
                                              f"(model_id {SOURCE}:{n.name})"))
            else:
                with_ir += 1
                s = g.summary()
                arch = r.name if r.kind == "pytorchcv" and not (r.kwargs or r.global_pool) else None
                meta.update(recipe=_recipe_meta(r), checks=checks, **g.meta)
                n.row = dict(base, model_id=g.model_id, name=g.name, source=g.source, family=_family(r, g), arch=arch,
                             input_shape="x".join(map(str, next(iter(g.input_nodes)).shape)), nodes=s["nodes"],
                             flops=s["flops"], params=s["params"], memory_bytes_fp32=s["memory_bytes"]["fp32"],
                             ir=g.to_json() if (cfg.store_ir or arch is None) else None,
                             meta=json.dumps(meta, sort_keys=True, default=str))
                continue
        meta["no_ir"] = reason
        n.row = dict(base, model_id=f"{SOURCE}:{n.name}", name=n.name, source=SOURCE, input_shape="unknown",
                     meta=json.dumps(meta, sort_keys=True))
    if cfg.rebuild_ir:
        notes.append(f"{len(nets)} network(s) from {len(comps)} model folder(s): {with_ir} rebuilt as IR, "
                     f"{len(nets) - with_ir} without IR (models.meta says why)")


def _recipe_meta(r: Recipe) -> dict:
    return {"kind": r.kind, "name": r.name, "params_stated": r.params, "note": r.note,
            "input_shape": list(r.input_shape), "global_pool": r.global_pool,
            **({"params_stated_by": r.params_by} if r.params_by else {})}


def _pins_note(root: Path, files: dict[str, Path]) -> list[str]:
    """Which pinned files these are (pipelines/dataset/pull.py): this machine's copy, the upstream
    ones, or neither."""
    from .pull import SOURCES

    src = SOURCES["qaihub"]
    copy, upstream = dict(src.copy_md5), dict(src.md5)
    n_copy = n_up = 0
    for p in files.values():
        rel = p.relative_to(root).as_posix()
        with p.open("rb") as fh:
            md5 = hashlib.file_digest(fh, "md5").hexdigest()
        n_copy += copy.get(rel) == md5
        n_up += upstream.get(rel) == md5
    other = len(files) - n_copy - n_up
    return [f"perf.yaml files read: {len(files)}; {n_copy} are the pinned copy's (re-serialised, some devices left "
            f"out: its SOURCE.md), {n_up} the repository's at {COMMIT[:7]}, {other} neither"]
