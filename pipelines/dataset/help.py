"""Importer of HELP's NAS-Bench-201 latency measurements into the dataset schema.

What it reads
-------------
From the folder ``HelpConfig.path``, one of two layouts:

- ``latency.csv`` (the converted copy in ../shared/external/help-nasbench201): columns
  ``nb201_index``, ``arch_str``, then ``<device>_ms`` (milliseconds, batch 1 unless the device
  name says otherwise);
- HELP's own files (repository HayeonLee/HELP, ``data/nasbench201/``): ``latency/<device>.pt``
  (also accepted directly in the folder), each a ``torch.save``-d list of 15,625 latencies in ms
  in NAS-Bench-201 index order, read with ``torch.load(weights_only=True)`` (plain data, no
  pickled code); ``str_arch2idx.pt`` beside them, when present, is cross-checked.

Each row is checked: the index is in 0..15624 and its cell string equals
``generators.nasbench201.arch_str(index)`` (NAS-Bench-201's own shuffled order).

What it produces
----------------
- ``models``: one row per architecture, name ``nb201-<index:05d>``, ``arch`` = the cell string,
  family ``nasbench201``, input 1x3x32x32. With ``rebuild_ir`` (default) the network is built
  by ``generators.nasbench201.build`` so ``model_id`` is the IR hash and costs come from the IR
  (15,625 networks: about 100 s on one core, ``workers`` processes share the work); without it
  rows are keyed ``nasbench201:nb201-<index:05d>`` and the cost columns are empty. The IR is
  not stored by default (``store_ir``): the cell string rebuilds it exactly.
- ``scenarios``: one per device, ``help-<device>-[<framework>-]<accelerator>[-b<batch>]``.
- ``e2e``: latency_ms = the published value (latency_stat ``reported``: the source gives one
  number per architecture and device, not its statistic).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .importers import (
    CsvTable,
    Device,
    ImportProblem,
    ImportResult,
    PublicDataError,
    finish,
    make_scenario_id,
    parse_number,
)
from .schema import TableBuilder
from generators.configs import coerce

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


def _dev(name: str, model: str, accelerator: str, framework: str | None = None, note: str = "",
         batch: int = 1, short: str | None = None) -> tuple[str, HelpDevice]:
    return name, HelpDevice(Device(short or name, model, note=note), accelerator, framework, batch)


# Devices of HELP's NAS-Bench-201 folder. Described as ../shared/external/help-nasbench201/SOURCE.md
# does; devices it does not describe get only their name, and "unknown" where the accelerator is
# not evident from the name.
DEVICES: dict[str, HelpDevice] = dict(
    [
        _dev("pixel2", "Google Pixel 2", "cpu", note="phone CPU, values in whole milliseconds"),
        _dev("pixel3", "Google Pixel 3", "cpu", "tflite", note="phone CPU"),
        _dev("raspi4", "Raspberry Pi 4", "cpu"),
        _dev("eyeriss", "Eyeriss", "asic", note="ASIC, simulated"),
        _dev("fpga", "FPGA", "fpga"),
        _dev("gold_6226", "Intel Xeon Gold 6226", "cpu"),
        _dev("gold_6240", "Intel Xeon Gold 6240", "cpu"),
        _dev("silver_4114", "Intel Xeon Silver 4114", "cpu"),
        _dev("silver_4210r", "Intel Xeon Silver 4210R", "cpu"),
        _dev("samsung_a50", "Samsung Galaxy A50", "unknown", note="phone, processor not stated"),
        _dev("samsung_s7", "Samsung Galaxy S7", "unknown", note="phone, processor not stated"),
        _dev("essential_ph_1", "Essential PH-1", "unknown", note="phone, processor not stated"),
    ]
)
_GPUS = {"1080ti": "NVIDIA GeForce GTX 1080 Ti", "2080ti": "NVIDIA GeForce RTX 2080 Ti",
         "titan_rtx": "NVIDIA Titan RTX", "titanxp": "NVIDIA Titan Xp", "titanx": "NVIDIA Titan X"}
_GPU_NAME = re.compile(r"(1080ti|2080ti|titan_rtx|titanxp|titanx)_(\d+)")
MAX_BATCH = 65_536  # HELP's GPU devices run batch 1..256; anything past this is not a device name


def help_device(name: str) -> HelpDevice | None:
    """The description of a HELP device name (``titanxp_32`` = Titan Xp at batch 32), or None."""
    if name in DEVICES:
        return DEVICES[name]
    m = _GPU_NAME.fullmatch(name)
    if m and len(m.group(2)) <= 6 and 1 <= int(m.group(2)) <= MAX_BATCH:  # a batch past int64 is no device
        gpu, batch = m.group(1), int(m.group(2))
        return HelpDevice(Device(gpu, _GPUS[gpu], gpu=_GPUS[gpu]), "gpu", None, batch)
    return None


# ---------------------------------------------------------------- config
@dataclass
class HelpConfig:
    path: str = "external/help-nasbench201"  # folder with latency.csv, or HELP's latency/<device>.pt
    rebuild_ir: bool = True  # build each network (about 6 ms each): model ids are IR hashes
    store_ir: bool = False  # keep the IR JSON in models.ir (43 kB per network; the cell string rebuilds it)
    devices: list[str] = field(default_factory=list)  # only these devices (empty: all in the files)
    indices: list[int] = field(default_factory=list)  # only these NAS-Bench-201 indices (empty: all)
    workers: int = 1  # processes that rebuild IRs (0: one per CPU)
    strict: bool = False  # any problem in the input is an error


def validate_config(cfg: Any) -> HelpConfig:
    """A config section (dataclass, mapping, or OmegaConf node) -> HelpConfig; ValueError("<field>: ...")."""
    cfg = coerce(HelpConfig, cfg)
    if not isinstance(cfg.path, (str, Path)) or not str(cfg.path):
        raise ValueError(f"path: expected a folder path, got {cfg.path!r}")
    for name in ("rebuild_ir", "store_ir", "strict"):
        if not isinstance(getattr(cfg, name), bool):
            raise ValueError(f"{name}: expected true or false, got {getattr(cfg, name)!r}")
    if isinstance(cfg.workers, bool) or not isinstance(cfg.workers, int) or cfg.workers < 0:
        raise ValueError(f"workers: expected an int >= 0, got {cfg.workers!r}")
    if isinstance(cfg.devices, (str, bytes)) or not all(isinstance(d, str) for d in cfg.devices):
        raise ValueError(f"devices: expected a list of device names, got {cfg.devices!r}")
    for d in cfg.devices:
        if help_device(d) is None:
            raise ValueError(f"devices: unknown device {d!r} (known: {', '.join(DEVICES)}, <gpu>_<batch>)")
    if isinstance(cfg.indices, (str, bytes)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in cfg.indices):
        raise ValueError(f"indices: expected a list of ints, got {cfg.indices!r}")
    from generators.nasbench201 import NUM_ARCHS

    bad = [i for i in cfg.indices if not 0 <= i < NUM_ARCHS]
    if bad:
        raise ValueError(f"indices: {bad[0]} is not a NAS-Bench-201 index (0..{NUM_ARCHS - 1})")
    return HelpConfig(path=str(cfg.path), rebuild_ir=cfg.rebuild_ir, store_ir=cfg.store_ir,
                      devices=list(cfg.devices), indices=[int(i) for i in cfg.indices], workers=cfg.workers,
                      strict=cfg.strict)


# ---------------------------------------------------------------- reading
@dataclass
class _Column:
    device: str  # HELP device name
    values: dict[int, float]  # index -> ms
    file: str
    column: str
    rows: dict[int, int]  # index -> line (CSV) ; empty for .pt


_Seen = dict[int, tuple[str, int]]  # index -> (file, line; -1 for .pt files)


def _read_csv(path: Path, root: Path, cfg: HelpConfig, problems: list[ImportProblem]) -> tuple[list[_Column], _Seen]:
    from generators.nasbench201 import NUM_ARCHS, arch_str

    t = CsvTable(path, path.relative_to(root).as_posix(), problems)
    if not t.require("nb201_index", "arch_str"):
        return [], {}
    cols: list[_Column] = []
    for c in t.header:
        if c in ("nb201_index", "arch_str"):
            continue
        if not c.endswith("_ms"):
            t.problem(1, c, "not a latency column <device>_ms (milliseconds); column skipped")
            continue
        dev = c[: -len("_ms")]
        if help_device(dev) is None:
            t.problem(1, c, f"unknown device {dev!r} (known: {', '.join(DEVICES)}, <gpu>_<batch>); column skipped")
            continue
        if cfg.devices and dev not in cfg.devices:
            continue
        cols.append(_Column(dev, {}, t.name, c, {}))
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
        seen[idx] = (t.name, line)
        for col in cols:
            v = parse_number(row[col.column], t, line, col.column)
            if v is not None:
                col.values[idx] = float(v)
                col.rows[idx] = line
    return cols, seen


def _read_pt(files: list[Path], root: Path, cfg: HelpConfig, problems: list[ImportProblem]) -> tuple[list[_Column], _Seen]:
    import math

    import torch

    from generators.nasbench201 import NUM_ARCHS, arch_str

    cols: list[_Column] = []
    wanted = set(cfg.indices)
    index_file = next((p for p in (root / "str_arch2idx.pt", root.parent / "str_arch2idx.pt") if p.is_file()), None)
    if index_file is not None:
        name = index_file.relative_to(root).as_posix() if root in index_file.parents else index_file.name
        try:
            mapping = torch.load(index_file, map_location="cpu", weights_only=True)
            bad = [(a, i) for a, i in mapping.items() if not isinstance(i, int) or not 0 <= i < NUM_ARCHS
                   or arch_str(i) != a]
            if bad:
                problems.append(ImportProblem(name, None, None, f"{len(bad)} cell string(s) map to another index than "
                                              f"NAS-Bench-201's (first {bad[0]!r}): the .pt files may use another order"))
        except Exception as e:  # noqa: BLE001 - an unreadable side file is reported, the latencies still import
            problems.append(ImportProblem(name, None, None, f"unreadable ({type(e).__name__}: {e}); not cross-checked"))
    for path in files:
        dev = path.stem
        fname = path.relative_to(root).as_posix()
        if help_device(dev) is None:
            problems.append(ImportProblem(fname, None, None, f"unknown device {dev!r} (known: {', '.join(DEVICES)}, "
                                          "<gpu>_<batch>); file skipped"))
            continue
        if cfg.devices and dev not in cfg.devices:
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
        col = _Column(dev, {}, fname, f"[index]", {})
        for i, v in enumerate(data[:NUM_ARCHS]):
            if wanted and i not in wanted:
                continue
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
            if not ok:
                problems.append(ImportProblem(fname, None, f"[{i}]", f"not a positive latency: {v!r}; value skipped"))
                continue
            col.values[i] = float(v)
        cols.append(col)
    seen = {i: (c.file, -1) for c in cols for i in c.values}
    return cols, dict(sorted(seen.items()))


def find_layout(root: Path) -> tuple[str, Any]:
    if (root / "latency.csv").is_file():
        return "csv", root / "latency.csv"
    for folder in (root / "latency", root):
        pts = sorted(folder.glob("*.pt"))
        pts = [p for p in pts if p.name != "str_arch2idx.pt" and (help_device(p.stem) is not None or folder.name == "latency")]
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
def import_help(cfg: Any = None, progress: bool = False) -> ImportResult:
    """Read HELP's NAS-Bench-201 latencies from ``cfg.path``; return the five tables."""
    from generators.nasbench201 import arch_str

    cfg = validate_config(cfg)
    root = Path(cfg.path)
    if not root.is_dir():
        raise PublicDataError(f"{root}: folder not found (help.path); pull the files with `dvc import` "
                              "(see docs/dataset.md)")
    problems: list[ImportProblem] = []
    notes: list[str] = []
    kind, found = find_layout(root)
    if kind == "csv":
        cols, seen = _read_csv(found, root, cfg, problems)
    elif kind == "pt":
        cols, seen = _read_pt(found, root, cfg, problems)
    else:
        raise PublicDataError(f"{root}: neither latency.csv nor latency/<device>.pt found")
    for d in cfg.devices:
        if not any(c.device == d for c in cols):
            problems.append(ImportProblem("(config)", None, "devices", f"device {d!r} is not in the files"))

    indices = sorted(seen)
    built = _rebuild_all(indices, cfg.store_ir, cfg.workers, progress) if cfg.rebuild_ir else {}
    models = TableBuilder("models")
    ids: dict[int, str] = {}
    for i in indices:
        name = f"nb201-{i:05d}"
        file, line = seen[i]
        arch = arch_str(i)
        row = dict(name=name, source=SOURCE, family="nasbench201", arch=arch, input_shape=INPUT_SHAPE,
                   meta=json.dumps({"arch_str": arch, "index": i}, sort_keys=True), dataset=DATASET,
                   source_file=file, source_row=line if line > 0 else None,
                   source_column="nb201_index" if line > 0 else None, source_commit=COMMIT)
        if cfg.rebuild_ir:
            row.update(built[i])
        else:
            row["model_id"] = f"{SOURCE}:{name}"
        ids[i] = row["model_id"]
        models.add(**row)

    scenarios = TableBuilder("scenarios")
    e2e = TableBuilder("e2e")
    for col in cols:
        hd = help_device(col.device)
        sid = make_scenario_id(hd.device.name, hd.accelerator, framework=hd.framework, batch=hd.batch, prefix=PREFIX)
        d = hd.device
        what = d.note or {"cpu": "CPU", "gpu": "GPU", "asic": "ASIC", "fpga": "FPGA"}.get(hd.accelerator,
                                                                                   "processor not stated")
        fw = {"tflite": "TFLite"}.get(hd.framework or "", hd.framework)
        desc = (f"{d.model} ({what})" + (f", {fw}" if fw else "")
                + f", batch {hd.batch}, NAS-Bench-201 CIFAR network (32x32 input), latency as published by HELP")
        scenarios.add(scenario_id=sid, device=d.name, device_model=d.model, soc=None, cpu=None, gpu=d.gpu,
                      framework=hd.framework, accelerator=hd.accelerator, precision=None, batch=hd.batch,
                      description=desc, dataset=DATASET, source_file=col.file, source_row=1 if col.rows else None,
                      source_column=col.column, source_commit=COMMIT)
        for i in indices:
            v = col.values.get(i)
            if v is None:
                continue
            e2e.add(model_id=ids[i], scenario_id=sid, latency_ms=v, latency_stat="reported", dataset=DATASET,
                    source_file=col.file, source_row=col.rows.get(i), source_column=col.column if col.rows else f"[{i}]",
                    source_commit=COMMIT)
        if col.values and all(float(v).is_integer() for v in col.values.values()):
            notes.append(f"{col.file}: {col.device}: all values are whole milliseconds (rank ties)")
    tables = {"models": models.frame(), "scenarios": scenarios.frame(), "e2e": e2e.frame(),
              "ops": TableBuilder("ops").frame(), "kernels": TableBuilder("kernels").frame()}
    return finish(DATASET, tables, problems, notes, cfg.strict)
