"""Importer of HELP's NAS-Bench-201 latency measurements into the dataset schema.

What it reads
-------------
From the folder ``HelpConfig.path`` (or each folder of a list: the rows are combined, and the
same architecture on the same device in two folders is a PublicDataError naming both files), one
of two layouts:

- ``latency.csv`` (the converted copy in ../shared/external/help-nasbench201): columns
  ``nb201_index``, ``arch_str``, then ``<device>_ms`` (milliseconds, batch 1 unless the device
  name says otherwise);
- HELP's own files (repository HayeonLee/HELP, ``data/nasbench201/``): ``latency/<device>.pt``
  (also accepted directly in the folder), each a ``torch.save``-d list of 15,625 latencies in ms
  in NAS-Bench-201 index order, read with ``torch.load(weights_only=True)`` after its size and
  archive are held to foundation/limits.py; ``str_arch2idx.pt`` beside them is cross-checked.

Each row is checked: the index is in 0..15624, its cell string equals ``arch_str(index)`` and a
latency is positive and at most ``limits.LATENCY_MS`` (else a problem, skipped).

What it produces
----------------
- ``models``: one row per architecture, name ``nb201-<index:05d>``, ``arch`` = the cell string,
  family ``nasbench201``, input 1x3x32x32. With ``rebuild_ir`` (default) the network is built
  by ``generators.nasbench201.build`` so ``model_id`` is the IR hash and costs come from the IR
  (all 15,625 networks: ``workers`` processes share the work); without it
  rows are keyed ``nasbench201:nb201-<index:05d>`` and the cost columns are empty. The IR is
  not stored by default (``store_ir``).
- ``scenarios``: one per device, ``help-<device>-[<framework>-]<accelerator>[-b<batch>]``.
  Devices are described by the device catalog (``pipelines/devices/catalog.yaml``): its
  ``sources.help`` section of an entry holds what HELP says (accelerator, framework, remark) and
  the names HELP uses, e.g. ``1080ti_{batch}`` for the 1080ti at each batch size
  (``1080ti_32`` -> ``help-1080ti-gpu-b32``; the scenarios' ``device`` is the catalog's name). A
  device the catalog does not have is imported all the same, accelerator ``unknown``, with a
  blank description and a problem line naming it and how to describe it in a catalog of yours.
- ``e2e``: latency_ms = the published value (latency_stat ``reported``).

Rows carry the commit their folder states (:func:`.importers.data_folders`); in a folder of the
user's, what HELP's convention supplies is a problem line of kind ``assumption`` (docs/dataset.md).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .importers import CATALOG, CsvTable, Device, Folder, ImportProblem, ImportResult, PublicDataError
from .importers import assumed, blank_device, check_config_fields, data_folders, device_from_entry, finish
from .importers import latency_fault, not_in_catalog, parse_number, select_devices
from .schema import TableBuilder
from foundation.configs import coerce
from generators.importers.common import UnsupportedModelError, check_torch_file
from pipelines.devices.catalog import Catalog, as_catalog
from pipelines.scenarios import make_scenario_id, slug

DATASET = "help-nasbench201"
PREFIX = "help"
REPOSITORY = "https://github.com/HayeonLee/HELP"
COMMIT = None  # the converted latency.csv does not record the commit it was made from
SOURCE = "nasbench201"
INPUT_SHAPE = "1x3x32x32"


@dataclass(frozen=True)
class HelpDevice:
    device: Device
    accelerator: str
    framework: str | None = None
    batch: int = 1
    graph_passes: tuple[str, ...] = ()
    batch_in_name: bool = False  # the batch comes from the name (1080ti_32); else batch 1 is HELP's convention


def help_device(name: str, catalog: Catalog | str | Path | None = None) -> HelpDevice | None:
    """What a HELP device name means (``titanxp_32`` = the Titan Xp at batch 32), from the device
    catalog's entries; None when the catalog does not know the name (or its batch is no batch
    size: ``titanxp_0``)."""
    try:
        return _describe(name, as_catalog(catalog))
    except ValueError:
        return None


def _describe(name: str, catalog: Catalog) -> HelpDevice | None:
    """As :func:`help_device`; ValueError when the name has a ``{batch}`` form with a bad batch."""
    match = catalog.resolve("help", name)
    if match is None:
        return None
    src = match.entry.source("help")
    d = device_from_entry(match.entry, note=src.note if src else "")
    return HelpDevice(d, (src.accelerator if src else None) or "unknown", src.framework if src else None, match.batch,
                      src.graph_passes if src else (), match.batch_in_name)


# ---------------------------------------------------------------- config
@dataclass
class HelpConfig:
    path: Any = "external/help-nasbench201"  # folder with latency.csv, or HELP's latency/<device>.pt; or a list of folders
    rebuild_ir: bool = True  # build each network: model ids are IR hashes
    store_ir: bool = False  # keep the IR JSON in models.ir (43 kB per network; the cell string rebuilds it)
    devices: list[str] = field(default_factory=list)  # only these devices (HELP's or the catalog's names; empty: all)
    indices: list[int] = field(default_factory=list)  # only these NAS-Bench-201 indices (empty: all)
    workers: int = 1  # processes that rebuild IRs (0: one per CPU)
    strict: bool = False  # any problem in the input is an error


def validate_config(cfg: Any) -> HelpConfig:
    """A config section (dataclass, mapping, or OmegaConf node) -> a checked HelpConfig (a new one;
    types: the schema, through ``coerce``); ValueError("<field>: ...")."""
    cfg = coerce(HelpConfig, cfg)
    check_config_fields(cfg)
    if cfg.workers < 0:
        raise ValueError(f"workers: expected an int >= 0, got {cfg.workers!r}")
    # device names are checked against the files and the device catalog by import_help
    from generators.nasbench201 import NUM_ARCHS

    bad = [i for i in cfg.indices if not 0 <= i < NUM_ARCHS]
    if bad:
        raise ValueError(f"indices: {bad[0]} is not a NAS-Bench-201 index (0..{NUM_ARCHS - 1})")
    return cfg


# ---------------------------------------------------------------- reading
@dataclass
class _Column:
    device: str  # HELP device name
    values: dict[int, float]  # index -> ms
    file: str
    column: str
    rows: dict[int, int]  # index -> line (CSV) ; empty for .pt
    commit: str | None = None  # its folder's


_Seen = dict[int, tuple[str, int, str | None]]  # index -> (file, line; -1 for .pt files, the folder's commit)


class _Devices:
    """The devices of the files: HELP name -> HelpDevice (from the catalog, or blank), checked."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.found: dict[str, HelpDevice] = {}
        self.where: dict[str, list[tuple[str, int | None, str | None]]] = {}  # name -> (file, row, column)
        self._ids: dict[tuple, str] = {}

    def add(self, name: str, file: str, row: int | None, column: str | None) -> str | None:
        """Records a device of the files; returns why it cannot be imported (else None)."""
        try:
            hd = _describe(name, self.catalog)
        except ValueError as e:
            return f"unknown device {name!r}: {e}"
        if hd is None:
            hd = HelpDevice(blank_device(name), "unknown", None, 1)
        key = (slug(hd.device.name), hd.framework, hd.accelerator, hd.batch)
        if not key[0]:
            return f"device {name!r} has no letter or digit to name scenarios with"
        other = self._ids.setdefault(key, name)
        if other != name:
            return f"device {name!r} would have the scenarios of device {other!r}"
        self.found[name] = hd
        self.where.setdefault(name, []).append((file, row, column))
        return None

    def select(self, wanted: list[str], problems: list[ImportProblem]) -> set[str]:
        """The names the config's filter selects; a problem for each selected device outside the
        catalog (see importers.select_devices for the filter's errors)."""
        present = {n: (self.catalog.lookup(hd.device.name) if hd.device.in_catalog else None)
                   for n, hd in self.found.items()}
        selected = select_devices(wanted, present, self.catalog, problems)
        for n in self.found:
            if n in selected and not self.found[n].device.in_catalog:
                for file, row, column in self.where[n]:
                    problems.append(ImportProblem(file, row, column, not_in_catalog(n, self.catalog), CATALOG))
        return selected

    def batch_assumed(self, names: list[str], selected: set[str]) -> list[str]:
        """The selected ``names`` whose batch (1) is HELP's convention, not stated by the name."""
        return [n for n in names if n in selected and not self.found[n].batch_in_name]


@dataclass
class _CsvFile:
    """latency.csv of one folder: its table and the device columns it holds."""

    table: CsvTable
    folder: Folder
    columns: list[_Column]


def _csv_header(path: Path, folder: Folder, problems: list[ImportProblem], devices: _Devices) -> _CsvFile | None:
    """latency.csv read, its device columns recorded (``devices.add``); None when unusable."""
    t = CsvTable(path, folder.name(path), problems)
    if not t.require("nb201_index", "arch_str"):
        return None
    cols: list[_Column] = []
    for c in t.header:
        if c in ("nb201_index", "arch_str"):
            continue
        if not c.endswith("_ms"):
            t.problem(1, c, "not a latency column <device>_ms (milliseconds); column skipped")
            continue
        dev = c[: -len("_ms")]
        why = devices.add(dev, t.name, 1, c)
        if why:
            t.problem(1, c, f"{why}; column skipped")
            continue
        cols.append(_Column(dev, {}, t.name, c, {}, folder.commit))
    return _CsvFile(t, folder, cols)


def _csv_rows(f: _CsvFile, cfg: HelpConfig, selected: set[str], devices: _Devices,
              problems: list[ImportProblem]) -> tuple[list[_Column], _Seen]:
    """The values of the selected devices' columns of ``f``, row by row (each row checked)."""
    from generators.nasbench201 import NUM_ARCHS, arch_str

    t = f.table
    cols = [c for c in f.columns if c.device in selected]
    if not f.folder.pinned:
        batch1 = devices.batch_assumed([c.device for c in cols], selected)
        if batch1:
            problems.append(assumed(t.name, f"HELP's convention, which the file does not state: batch 1 for "
                                    f"{', '.join(batch1)} (the name states no batch)"))
    wanted = set(cfg.indices)
    seen: _Seen = {}
    for line, row in t.rows:
        idx = parse_number(row["nb201_index"], t, line, "nb201_index", positive=False, integer=True)
        if idx is None:
            if not row["nb201_index"].strip():
                t.problem(line, "nb201_index", "empty index; row skipped")
            continue
        if not 0 <= idx < NUM_ARCHS:
            t.problem(line, "nb201_index", f"{idx} is not a NAS-Bench-201 index (0..{NUM_ARCHS - 1}); row skipped")
            continue
        if idx in seen:
            t.problem(line, "nb201_index", f"index {idx} listed again (first at line {seen[idx][1]}); row skipped")
            continue
        if row["arch_str"] != arch_str(idx):
            t.problem(line, "arch_str", f"cell string does not match index {idx} (NAS-Bench-201 has "
                      f"{arch_str(idx)!r}); row skipped")
            continue
        if wanted and idx not in wanted:
            continue
        seen[idx] = (t.name, line, f.folder.commit)
        for col in cols:
            v = parse_number(row[col.column], t, line, col.column, unit="ms")
            if v is not None:
                col.values[idx] = float(v)
                col.rows[idx] = line
    return cols, seen


@dataclass
class _PtFiles:
    """HELP's ``<device>.pt`` files of one folder (those whose device can be imported)."""

    files: list[Path]
    folder: Folder


def _pt_files(files: list[Path], folder: Folder, problems: list[ImportProblem], devices: _Devices) -> _PtFiles:
    """The .pt files of one folder, their devices recorded (``devices.add``); ``str_arch2idx.pt``
    beside them, when present, cross-checked."""
    import torch

    from generators.nasbench201 import NUM_ARCHS, arch_str

    root = folder.root
    index_file = next((p for p in (root / "str_arch2idx.pt", root.parent / "str_arch2idx.pt") if p.is_file()), None)
    if index_file is not None:
        name = folder.name(index_file) if root in index_file.parents else folder.prefix + index_file.name
        try:
            check_torch_file(index_file)
            mapping = torch.load(index_file, map_location="cpu", weights_only=True)
            bad = [(a, i) for a, i in mapping.items() if not isinstance(i, int) or not 0 <= i < NUM_ARCHS
                   or arch_str(i) != a]
            if bad:
                problems.append(ImportProblem(name, None, None, f"{len(bad)} cell string(s) map to another index than "
                                              f"NAS-Bench-201's (first {bad[0]!r}): the .pt files may use another order"))
        except UnsupportedModelError as e:  # beyond the bounds: reported, never inflated
            problems.append(ImportProblem(name, None, None, f"{_fault(e, index_file)}; not cross-checked"))
        except Exception as e:  # noqa: BLE001 - an unreadable side file is reported, the latencies still import
            problems.append(ImportProblem(name, None, None, f"unreadable ({type(e).__name__}: "
                                          f"{str(e).splitlines()[0] if str(e) else ''}); not cross-checked"))
    kept = []
    for path in files:
        fname = folder.name(path)
        why = devices.add(path.stem, fname, None, None)
        if why:
            problems.append(ImportProblem(fname, None, None, f"{why}; file skipped"))
        else:
            kept.append(path)
    return _PtFiles(kept, folder)


def _pt_values(f: _PtFiles, cfg: HelpConfig, selected: set[str], devices: _Devices,
               problems: list[ImportProblem]) -> tuple[list[_Column], _Seen]:
    """The latencies of the selected devices' .pt files of one folder (each file bounded, then
    loaded as plain data, each value checked)."""
    import math

    import torch

    from generators.nasbench201 import NUM_ARCHS

    chosen = [p for p in f.files if p.stem in selected]
    if chosen and not f.folder.pinned:
        batch1 = devices.batch_assumed([p.stem for p in chosen], selected)
        what = "values in milliseconds, in NAS-Bench-201's index order"
        if batch1:
            what += f"; batch 1 for {', '.join(batch1)} (the name states no batch)"
        files = f.folder.name(chosen[0].with_name("*.pt"))  # latency/*.pt
        problems.append(assumed(files, f"HELP's layout, which .pt files do not state: {what}", row=None))
    cols: list[_Column] = []
    wanted = set(cfg.indices)
    for path in chosen:
        dev = path.stem
        fname = f.folder.name(path)
        try:
            check_torch_file(path)
        except UnsupportedModelError as e:  # beyond the bounds: reported, never inflated
            problems.append(ImportProblem(fname, None, None, f"{_fault(e, path)}; file skipped"))
            continue
        try:
            data = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - one unreadable file is reported, the others import
            problems.append(ImportProblem(fname, None, None, f"unreadable ({type(e).__name__}: {str(e).splitlines()[0]}); "
                                          "file skipped"))
            continue
        if hasattr(data, "tolist"):
            data = data.tolist()
        if not isinstance(data, (list, tuple)):
            problems.append(ImportProblem(fname, None, None, f"expected a list of latencies, found {type(data).__name__}; "
                                          "file skipped"))
            continue
        if len(data) != NUM_ARCHS:
            problems.append(ImportProblem(fname, None, None, f"{len(data)} values where NAS-Bench-201 has {NUM_ARCHS} "
                                          "architectures (truncated?); the values present are imported by position"))
        col = _Column(dev, {}, fname, f"[index]", {}, f.folder.commit)
        for i, v in enumerate(data[:NUM_ARCHS]):
            if wanted and i not in wanted:
                continue
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
            if not ok:
                problems.append(ImportProblem(fname, None, f"[{i}]", f"not a positive latency: {v!r}; value skipped"))
                continue
            fault = latency_fault(v, "ms")
            if fault:
                problems.append(ImportProblem(fname, None, f"[{i}]", f"{fault}; value skipped"))
                continue
            col.values[i] = float(v)
        cols.append(col)
    seen = {i: (c.file, -1, c.commit) for c in cols for i in c.values}
    return cols, dict(sorted(seen.items()))


def _fault(e: Exception, path: Path) -> str:
    """A refusal of :func:`check_torch_file` without its leading file path (the problem names the file)."""
    text = str(e)
    return text[len(str(path)) + 2:] if text.startswith(f"{path}: ") else text


def find_layout(root: Path, catalog: Catalog | None = None) -> tuple[str, Any]:
    """("csv", latency.csv), ("pt", [<device>.pt ...]) or ("none", None). In ``latency/`` every
    .pt file is a device's; directly in the folder only those the catalog names."""
    if (root / "latency.csv").is_file():
        return "csv", root / "latency.csv"
    for folder in (root / "latency", root):
        pts = sorted(folder.glob("*.pt"))
        pts = [p for p in pts if p.name != "str_arch2idx.pt"
               and (folder.name == "latency" or help_device(p.stem, catalog) is not None)]
        if pts:
            return "pt", pts
    return "none", None


# ---------------------------------------------------------------- rebuilding
def _build_one(args: tuple[int, bool]) -> tuple[int, dict]:
    from generators.nasbench201 import build

    index, store = args
    g = build(index)
    s = g.summary()
    return index, dict(model_id=g.model_id, nodes=s["nodes"], flops=s["flops"], params=s["params"],
                       memory_bytes_fp32=s["memory_bytes"]["fp32"], ir=g.to_json() if store else None)


def _rebuild_all(indices: list[int], store: bool, workers: int, progress: bool) -> dict[int, dict]:
    args = [(i, store) for i in indices]
    n = workers or os.cpu_count() or 1
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(args), desc="help: rebuild IR", unit="net")
    out: dict[int, dict] = {}
    if n <= 1 or len(args) < 200:
        for a in args:
            i, r = _build_one(a)
            out[i] = r
            if bar:
                bar.update()
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=n) as ex:
            for i, r in ex.map(_build_one, args, chunksize=64):
                out[i] = r
                if bar:
                    bar.update()
    if bar:
        bar.close()
    return out


# ---------------------------------------------------------------- the importer
def import_help(cfg: Any = None, progress: bool = False, catalog: Catalog | str | Path | None = None) -> ImportResult:
    """Read HELP's NAS-Bench-201 latencies from ``cfg.path`` (a folder or a list of them); return
    the five tables. ``catalog`` and the errors: as every importer's (:mod:`.importers`)."""
    cfg = validate_config(cfg)
    catalog = as_catalog(catalog)
    devices = _Devices(catalog)
    problems: list[ImportProblem] = []
    notes: list[str] = []
    folders = data_folders(cfg.path, "help", COMMIT, problems, notes)
    opened = [_open(folder, catalog, problems, devices) for folder in folders]
    selected = devices.select(cfg.devices, problems)  # once, over the devices of every folder
    cols: list[_Column] = []
    seen: _Seen = {}
    for f in opened:
        if f is None:
            continue
        c, s = (_csv_rows if isinstance(f, _CsvFile) else _pt_values)(f, cfg, selected, devices, problems)
        cols += c
        for i, where in s.items():
            seen.setdefault(i, where)
    indices = sorted(seen)
    ids, models = _model_rows(indices, seen, cfg, progress)
    scenarios, e2e = _measurements(cols, indices, ids, devices, notes)
    tables = {"models": models.frame(), "scenarios": scenarios.frame(), "e2e": e2e.frame(),
              "ops": TableBuilder("ops").frame(), "kernels": TableBuilder("kernels").frame()}
    return finish(DATASET, tables, problems, notes, cfg.strict)


def _open(folder: Folder, catalog: Catalog, problems: list[ImportProblem], devices: _Devices) -> _CsvFile | _PtFiles | None:
    """One folder's files in the layout it holds (:func:`find_layout`), their devices recorded."""
    kind, found = find_layout(folder.root, catalog)
    if kind == "csv":
        return _csv_header(found, folder, problems, devices)
    if kind == "pt":
        return _pt_files(found, folder, problems, devices)
    raise PublicDataError(f"{folder.root}: neither latency.csv nor latency/<device>.pt found")


def _model_rows(indices: list[int], seen: _Seen, cfg: HelpConfig, progress: bool) -> tuple[dict[int, str], TableBuilder]:
    """The models table of the architectures seen, and their ids by index."""
    from generators.nasbench201 import arch_str

    built = _rebuild_all(indices, cfg.store_ir, cfg.workers, progress) if cfg.rebuild_ir else {}
    models = TableBuilder("models")
    ids: dict[int, str] = {}
    for i in indices:
        name = f"nb201-{i:05d}"
        file, line, commit = seen[i]
        arch = arch_str(i)
        row = dict(name=name, source=SOURCE, family="nasbench201", arch=arch, input_shape=INPUT_SHAPE,
                   meta=json.dumps({"arch_str": arch, "index": i}, sort_keys=True), dataset=DATASET,
                   source_file=file, source_row=line if line > 0 else None,
                   source_column="nb201_index" if line > 0 else None, source_commit=commit)
        if cfg.rebuild_ir:
            row.update(built[i])
        else:
            row["model_id"] = f"{SOURCE}:{name}"
        ids[i] = row["model_id"]
        models.add(**row)
    return ids, models


def _measurements(cols: list[_Column], indices: list[int], ids: dict[int, str], devices: _Devices,
                  notes: list[str]) -> tuple[TableBuilder, TableBuilder]:
    """The scenarios (one per device: the first column of it describes it) and e2e rows of the
    columns; PublicDataError naming both files when two columns (of two folders) hold the same
    architecture on the same device."""
    scenarios = TableBuilder("scenarios")
    e2e = TableBuilder("e2e")
    owner: dict[tuple[str, int], _Column] = {}  # (scenario_id, index) -> the column that holds it
    described: set[str] = set()
    for col in cols:
        hd = devices.found[col.device]
        sid = make_scenario_id(hd.device.name, hd.accelerator, framework=hd.framework, batch=hd.batch, prefix=PREFIX)
        if sid not in described:
            described.add(sid)
            scenarios.add(**_scenario_row(sid, hd, col))
        for i in indices:
            v = col.values.get(i)
            if v is None:
                continue
            other = owner.setdefault((sid, i), col)
            if other is not col:
                raise PublicDataError(f"help.path: nb201-{i:05d} on {sid} is in both {_at(other, i)} and {_at(col, i)}: "
                                      "two folders hold the same measurement; keep one")
            e2e.add(model_id=ids[i], scenario_id=sid, latency_ms=v, latency_stat="reported", dataset=DATASET,
                    source_file=col.file, source_row=col.rows.get(i), source_column=col.column if col.rows else f"[{i}]",
                    source_commit=col.commit)
        if col.values and all(float(v).is_integer() for v in col.values.values()):
            notes.append(f"{col.file}: {col.device}: all values are whole milliseconds (rank ties)")
    return scenarios, e2e


def _at(col: _Column, index: int) -> str:
    """Where a column holds an index: ``latency.csv line 5, column 'pixel3_ms'`` / ``latency/pixel3.pt [5]``."""
    return f"{col.file} line {col.rows[index]}, column {col.column!r}" if col.rows else f"{col.file} [{index}]"


def _scenario_row(sid: str, hd: HelpDevice, col: _Column) -> dict[str, Any]:
    """The scenario of a HELP device, with the provenance of ``col``."""
    d = hd.device
    what = d.note or {"cpu": "CPU", "gpu": "GPU", "asic": "ASIC", "fpga": "FPGA"}.get(hd.accelerator,
                                                                               "processor not stated")
    fw = {"tflite": "TFLite"}.get(hd.framework or "", hd.framework)
    head = f"{d.model} ({what})" if d.in_catalog else d.label
    desc = (head + (f", {fw}" if fw else "")
            + f", batch {hd.batch}, NAS-Bench-201 CIFAR network (32x32 input), latency as published by HELP")
    return dict(scenario_id=sid, device=d.name, device_model=d.model, soc=d.soc, cpu=d.cpu, gpu=d.gpu,
                framework=hd.framework, accelerator=hd.accelerator, precision=None, batch=hd.batch,
                description=desc, graph_passes=",".join(hd.graph_passes) or None, dataset=DATASET,
                source_file=col.file, source_row=1 if col.rows else None,
                source_column=col.column, source_commit=col.commit)
