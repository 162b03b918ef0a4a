"""Importer of the USC mobile-ml-benchmark data (Li, Paolieri, Golubchik) into the dataset schema.

Reads the study's e2e CSVs (TFLite and PyTorch Mobile: one row per pytorchcv model, one column
per device, core set, precision and statistic, in microseconds) and GPU op CSVs (one row per
model and op, the op's configuration as a Python-dict literal, read with ``ast.literal_eval``,
never ``eval``), under their local names or the original repository's
(qed-usc/mobile-ml-benchmark at 40ba833). Produces the five tables: networks rebuilt from their
pytorchcv names by the PyTorch importer (``rebuild_ir``, so ids and costs come from the IR), one scenario
per column group described by the device catalog, the source's means as e2e latencies, and the
GPU files' op and kernel rows. A cell that cannot be read or is out of bounds
(``limits.LATENCY_MS``) is a problem line and is skipped; the import goes on. docs/dataset.md
(*The USC importer*) has the file table and what each table holds.

``path`` is one folder or a list of them (a user's own files in the USC layout beside the
study's): each is read, the rows are combined, and the same network in the same scenario in two
folders is a PublicDataError naming both files. Rows carry the commit their folder states
(:func:`.importers.data_folders`: the pinned commit for the pulled copy, else ``"unknown"``); in a
folder that is not the pulled copy, what the study's set-up supplies and the files do not state
(units, batch and input, threads, GPU precision and backend) is a problem line of kind
``assumption`` per file and device.
"""
from __future__ import annotations

import ast
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .importers import CATALOG, CONFIG, CsvTable, Device, Folder, ImportProblem, ImportResult, PublicDataError
from .importers import assumed, blank_device, check_config_fields, data_folders, device_from_entry, finish
from .importers import latency_fault, not_in_catalog, parse_cores, parse_number, select_devices
from .schema import TableBuilder
from foundation import limits
from foundation.configs import coerce
from pipelines.devices.catalog import Catalog, as_catalog
from pipelines.scenarios import make_scenario_id, slug

DATASET = "usc-mobile-ml-benchmark"
PREFIX = "usc"
REPOSITORY = "https://github.com/qed-usc/mobile-ml-benchmark"
COMMIT = "40ba833a9ca560a3035a76a5c3da504082dec001"
SOURCE = "pytorch"  # the generator source of the rebuilt IR (generators.importers.pytorch)
INPUT_SHAPE = "1x3x224x224"
US_PER_MS = 1000.0

# Devices: the device catalog (pipelines/devices/catalog.yaml) describes them; the values the
# code held before (the USC paper's Table 1, Pixel 4's medium and small clocks from the
# SOURCE.md of the public copy) are there with their origin.
CLUSTER_WORDS = {"large": "large", "med": "medium", "small": "small"}

FRAMEWORKS = {"tflite": "TFLite", "pytorch": "PyTorch Mobile"}
# (kind, framework) -> accepted file names, local copy first, then the original repository's
FILES: dict[tuple[str, str], tuple[str, ...]] = {
    ("e2e", "tflite"): ("cnn_real_e2e_tflite.csv", "tflite_cnn_e2e.csv", "dataset/tflite_cnn_e2e.csv"),
    ("e2e", "pytorch"): ("cnn_real_e2e_torch.csv", "torch_cnn_e2e.csv", "dataset/torch_cnn_e2e.csv"),
    ("ops", "tflite"): ("cnn_real_ops_gpu_tflite.csv", "tflite_cnn_ops_gpu.csv", "dataset/tflite_cnn_ops_gpu.csv"),
    ("ops", "pytorch"): ("cnn_real_ops_gpu_torch.csv", "torch_cnn_ops_gpu.csv", "dataset/torch_cnn_ops_gpu.csv"),
}
# TFLite GPU kernel names carry node indices (one name = one dispatch); PyTorch's do not.
KERNEL_NAMES_UNIQUE = {"tflite": True, "pytorch": False}

OP_TYPES = {
    "CONV_2D": "conv2d", "CONV_2D_GROUP": "group_conv2d", "DEPTHWISE_CONV_2D": "dwconv2d",
    "FULLY_CONNECTED": "fc", "MEAN": "global_avgpool", "AVERAGE_POOL_2D": "avgpool", "MAX_POOL_2D": "maxpool",
    "CONCATENATION": "concat", "ADD": "add", "MUL": "mul", "PAD": "pad",
    "vulkan_prepack::run_conv2d_context": "conv2d", "vulkan_prepack::run_linear_context": "fc",
    "vulkan_prepack::run_batchnorm_context": "batchnorm", "aten::adaptive_avg_pool2d": "global_avgpool",
    "aten::avg_pool2d": "avgpool", "aten::max_pool2d": "maxpool", "aten::add": "add", "aten::mul": "mul",
    "aten::relu": "relu", "aten::clamp": "clip", "aten::hardswish": "hswish", "aten::sigmoid": "sigmoid",
}


# ---------------------------------------------------------------- config
@dataclass
class UscConfig:
    # folder with the CSVs (docs/dataset.md, The USC importer), or a list of folders (text or list of text)
    path: Any = "external/usc-mobile-ml-benchmark"
    rebuild_ir: bool = True  # rebuild each network from pytorchcv: model ids are IR hashes
    store_ir: bool = True  # keep the IR JSON in models.ir (only with rebuild_ir)
    models: list[str] = field(default_factory=list)  # only these pytorchcv names (empty: all)
    devices: list[str] = field(default_factory=list)  # only these devices (the files' or the catalog's names; empty: all)
    strict: bool = False  # any problem in the input is an error


def validate_config(cfg: Any) -> UscConfig:
    """A config section (dataclass, mapping, or OmegaConf node) -> a checked UscConfig (a new one;
    types: the schema, through ``coerce``); ValueError("<field>: ...")."""
    cfg = coerce(UscConfig, cfg)
    check_config_fields(cfg)
    # device names are checked against the files and the device catalog by import_usc (a device
    # the files have is welcome even when the catalog does not describe it)
    return cfg


# ---------------------------------------------------------------- names
_FAMILY = re.compile(r"(mobilenetv\d+b?|[a-z]+?)(\d.*)?")


def usc_family(name: str) -> str:
    """The family of a pytorchcv model name: its first word without depth/width/version digits
    (``resnet18_wd2`` -> ``resnet``, ``regnetx002`` -> ``regnetx``, ``mobilenetv2b_w1`` ->
    ``mobilenetv2b``; ``mobilenetv3_large_*`` and ``efficientnet_edge_*`` keep two words)."""
    for two in ("mobilenetv3_large", "mobilenetv3_small", "efficientnet_edge"):
        if name.startswith(two):
            return two
    head = name.split("_")[0].lower()
    m = _FAMILY.fullmatch(head)
    return m.group(1) if m else head


@functools.lru_cache(maxsize=None)
def kernel_type(name: str) -> str:
    """A kernel name without node indices, fused parts joined by ``+``:
    ``convolution_2d_1_linked_:_relu_2`` -> ``convolution_2d+relu``."""
    parts = [re.sub(r"(_\d+)+$", "", p) for p in name.split("_linked_:_")]
    return "+".join(p for p in parts if p) or name


def find_files(root: Path) -> dict[tuple[str, str], Path | None]:
    out: dict[tuple[str, str], Path | None] = {}
    for key, names in FILES.items():
        out[key] = next((root / n for n in names if (root / n).is_file()), None)
    return out


# ---------------------------------------------------------------- scenarios
@dataclass
class _Scenarios:
    rows: dict[str, dict] = field(default_factory=dict)

    def get(self, device: Device, framework: str, cores: str, prec: str, file: str, column: str,
            parts: list[tuple[int, str]] | None, commit: str | None) -> str:
        gpu = cores == "gpu"
        precision = ("fp16" if prec == "float" else "int8") if gpu else ("fp32" if prec == "float" else "int8")
        sid = make_scenario_id(device.name, "gpu" if gpu else "cpu", framework=framework,
                               cores=None if gpu else cores, precision=precision, prefix=PREFIX)
        if sid in self.rows:
            return sid
        fw = FRAMEWORKS[framework]
        if gpu:
            backend = gpu_backend(device, framework)[0]
            on = f"the {device.gpu} GPU" if device.gpu else "the GPU"
            desc = f"{device.label}, {fw} {backend} on {on}, {precision}, batch 1, 224x224 input"
            count = threads = None
            hetero = None
        else:
            words = []
            for n, c in parts or []:
                cl = device.cluster(c)
                ghz = f" at {cl[2]:.2f} GHz" if cl and cl[2] else ""
                words.append(f"{n} {CLUSTER_WORDS.get(c, c)} core{'s' if n > 1 else ''}{ghz}")
            count = sum(n for n, _ in parts or [])
            threads = count
            hetero = len(parts or []) > 1
            desc = (f"{device.label}, {fw} on the CPU: {' + '.join(words)}, {threads} "
                    f"thread{'s' if threads > 1 else ''}, {precision}, batch 1, 224x224 input")
        if device.note:
            desc += f" ({device.note})"
        self.rows[sid] = dict(
            scenario_id=sid, device=device.name, device_model=device.model, soc=device.soc, cpu=device.cpu,
            gpu=device.gpu, framework=framework, framework_version=None, accelerator="gpu" if gpu else "cpu",
            cores=None if gpu else cores, core_count=count, threads=threads, heterogeneous=hetero,
            precision=precision, batch=1, description=desc, dataset=DATASET, source_file=file,
            source_row=1, source_column=column, source_commit=commit,
        )
        return sid


def gpu_backend(device: Device, framework: str) -> tuple[str, str | None]:
    """The GPU backend the USC study ran ``framework`` with on ``device`` (``GPU delegate
    (OpenCL)``, ``Vulkan backend``; Metal on iOS), and how the OS was told from the name when the
    device catalog states none (else None)."""
    guess = None
    if device.os:
        ios = device.os == "ios"
    else:
        ios = device.name.startswith("iphone")
        guess = (f"iOS: the device catalog states no OS for {device.name!r} and the name starts with 'iphone'" if ios
                 else f"Android: the device catalog states no OS for {device.name!r}")
    if framework == "tflite":
        return ("GPU delegate (Metal)" if ios else "GPU delegate (OpenCL)"), guess
    return ("Metal backend" if ios else "Vulkan backend"), guess


# ---------------------------------------------------------------- parsing
_E2E_COL = re.compile(r"([^|]+)\|([^|]+)\|([^|]+)\|([^|]+)")
_OPS_COL = re.compile(r"([^|]+)\|gpu\|(float|kernel)")


@dataclass
class _E2eFile:
    framework: str
    table: CsvTable
    folder: Folder
    groups: dict[tuple[str, str, str], dict[str, str]]  # (device, cores, prec) -> {"mean": col, "std": col}
    parts: dict[tuple[str, str], list[tuple[int, str]]]  # (device, cores) -> parsed cores
    flops_col: str | None


def _parse_e2e_header(t: CsvTable, framework: str, devices: dict[str, Device], folder: Folder) -> _E2eFile | None:
    """The column groups of an e2e file, for the devices of ``devices`` (the others were
    reported, or left out by the config's filter, by :func:`_devices`)."""
    if not t.require("model"):
        return None
    groups: dict[tuple[str, str, str], dict[str, str]] = {}
    parts: dict[tuple[str, str], list[tuple[int, str]]] = {}
    flops_col = next((c for c in t.header if c.lower() == "flops"), None)
    for col in t.header:
        if col == "model" or col.lower() in ("flops", "size"):
            continue
        m = _E2E_COL.fullmatch(col)
        if not m:
            t.problem(1, col, "not a measurement column <device>|<cores>|<float|quant>|<mean|std>; column skipped")
            continue
        dev, cores, prec, stat = m.groups()
        if dev not in devices:
            continue
        if prec not in ("float", "quant"):
            t.problem(1, col, f"precision {prec!r} is neither 'float' nor 'quant'; column skipped")
            continue
        if stat not in ("mean", "std"):
            t.problem(1, col, f"statistic {stat!r} is neither 'mean' nor 'std'; column skipped")
            continue
        if cores != "gpu" and (dev, cores) not in parts:
            try:
                parts[(dev, cores)] = parse_cores(cores, devices[dev])
            except ValueError as e:
                t.problem(1, col, f"{e}; column skipped")
                continue
        groups.setdefault((dev, cores, prec), {})[stat] = col
    for key, cols in list(groups.items()):
        if "mean" not in cols:
            t.problem(1, cols["std"], "a std column without its mean column; skipped")
            del groups[key]
    return _E2eFile(framework, t, folder, groups, parts, flops_col)


@dataclass
class _OpsFile:
    framework: str
    table: CsvTable
    folder: Folder
    devices: dict[str, dict[str, str]]  # device -> {"float": col, "kernel": col}


def _parse_ops_header(t: CsvTable, framework: str, devices: dict[str, Device], folder: Folder) -> _OpsFile | None:
    if not t.require("model", "operation", "feature"):
        return None
    devs: dict[str, dict[str, str]] = {}
    for col in t.header:
        if col in ("model", "operation", "feature"):
            continue
        m = _OPS_COL.fullmatch(col)
        if not m:
            t.problem(1, col, "not a GPU op column <device>|gpu|float or <device>|gpu|kernel; column skipped")
            continue
        dev, what = m.groups()
        if dev not in devices:
            continue
        devs.setdefault(dev, {})[what] = col
    for dev, cols in list(devs.items()):
        if "float" not in cols:
            t.problem(1, cols["kernel"], "kernel names without a latency column; skipped")
            del devs[dev]
    return _OpsFile(framework, t, folder, devs)


def _header_devices(t: CsvTable, kind: str) -> dict[str, str]:
    """Device name -> its first column, for the measurement columns of a file's header."""
    out: dict[str, str] = {}
    if kind == "e2e":
        skip = ("model",)
        pattern = _E2E_COL
    else:
        skip = ("model", "operation", "feature")
        pattern = _OPS_COL
    for col in t.header:
        if col in skip or (kind == "e2e" and col.lower() in ("flops", "size")):
            continue
        m = pattern.fullmatch(col)
        if m:
            out.setdefault(m.group(1), col)
    return out


def _devices(tables: list[tuple[str, CsvTable]], wanted: list[str], catalog: Catalog,
             problems: list[ImportProblem]) -> dict[str, Device]:
    """The devices to import: file device name -> Device (from the catalog, else blank with a
    problem naming the catalog), those the config's filter selects. A name no scenario id can
    spell (no letter or digit), or spelled as another device's, is reported and skipped."""
    found: dict[str, Device] = {}
    first: dict[str, list[tuple[CsvTable, str]]] = {}
    bad: set[str] = set()
    id_names: dict[str, str] = {}  # scenario-id spelling -> the file's device name that has it
    for kind, t in tables:
        for dev, col in _header_devices(t, kind).items():
            if dev in bad:
                continue
            if dev not in found:
                try:
                    match = catalog.resolve("usc", dev)
                except ValueError as e:
                    t.problem(1, col, f"unknown device {dev!r}: {e}; its columns are skipped")
                    bad.add(dev)
                    continue
                d = device_from_entry(match.entry) if match else blank_device(dev)
                key = slug(d.name)
                if not key or id_names.setdefault(key, dev) != dev:
                    why = ("has no letter or digit to name scenarios with" if not key else
                           f"would name scenarios as device {id_names[key]!r} does ({PREFIX}-{key}-...)")
                    t.problem(1, col, f"device {dev!r} {why}; its columns are skipped")
                    bad.add(dev)
                    continue
                found[dev] = d
            first.setdefault(dev, []).append((t, col))
    present = {dev: (catalog.lookup(d.name) if d.in_catalog else None) for dev, d in found.items()}
    selected = select_devices(wanted, present, catalog, problems)
    for dev in found:
        if dev in selected and not found[dev].in_catalog:
            for t, col in first[dev]:
                problems.append(ImportProblem(t.name, 1, col, not_in_catalog(dev, catalog), CATALOG))
    return {dev: d for dev, d in found.items() if dev in selected}


def _int_or_none(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        s = v.strip()
        if re.fullmatch(r"-?\d{1,4000}", s):  # (Python refuses to convert longer digit strings)
            return int(s)
    return None


MAX_DIM = limits.TABLE_DIM
MAX_FLOPS = limits.TABLE_FLOPS
FEATURE_COLUMNS = ("in_channels", "in_hw", "out_channels", "out_hw", "kernel", "stride", "padding", "groups",
                   "reported_flops")


def checked_features(features: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The op columns with out-of-range values (negative, or past what the int64 columns and a
    runtime can hold) left empty; returns the columns and one message per emptied cell."""
    out, bad = dict(features), []
    for c in FEATURE_COLUMNS:
        v = out.get(c)
        hi = MAX_FLOPS if c == "reported_flops" else MAX_DIM
        if v is not None and not 0 <= v <= hi:
            bad.append(f"{c} = {str(v)[:40]} out of range (0..{hi}); left empty")
            out[c] = None
    return out, bad


def op_features(framework: str, operation: str, feat: dict) -> dict[str, Any]:
    """The schema's op columns from a USC feature dict (see docs/dataset.md for the mapping);
    keys that are not text are ignored (the importer reports them)."""
    g = {k.lower(): _int_or_none(v) for k, v in feat.items() if isinstance(k, str)}
    out: dict[str, Any] = {"reported_flops": g.get("flops")}
    op_type = OP_TYPES.get(operation, operation.split("::")[-1].lower())
    if framework == "tflite":
        cin, hw, ohw = g.get("input_channel"), g.get("input_shape"), g.get("output_shape")
        if operation in ("CONV_2D", "CONV_2D_GROUP", "DEPTHWISE_CONV_2D"):
            filt = g.get("filter")
            dw = operation == "DEPTHWISE_CONV_2D"
            out.update(in_channels=cin, in_hw=hw, out_hw=ohw, kernel=g.get("kernel"), stride=g.get("stride"),
                       out_channels=(cin * filt if dw and cin and filt else filt),
                       groups=(cin if dw else g.get("group")))
        elif operation in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
            out.update(in_channels=cin, in_hw=hw, out_hw=ohw, kernel=g.get("kernel"), stride=g.get("stride"),
                       out_channels=cin)
        elif operation == "MEAN":
            out.update(in_channels=cin, in_hw=hw, out_channels=ohw, out_hw=1)
        elif operation == "FULLY_CONNECTED":
            out.update(in_channels=cin, out_channels=g.get("filter"))
        elif operation == "CONCATENATION":
            out.update(in_channels=cin, in_hw=hw, out_hw=ohw, out_channels=g.get("filter"))
        else:
            out.update(in_channels=cin, in_hw=hw, out_hw=ohw)
    else:
        cin = g.get("input_channel")
        if operation == "vulkan_prepack::run_linear_context":
            out.update(in_channels=g.get("input_shape"), out_channels=g.get("output_shape"))
        else:
            out.update(in_channels=cin, in_hw=g.get("input_shape"), out_hw=g.get("output_shape"),
                       out_channels=g.get("output_channel"), kernel=g.get("kernel_size"), stride=g.get("stride"),
                       padding=g.get("padding"), groups=g.get("groups"))
            if operation == "vulkan_prepack::run_conv2d_context":
                cout = g.get("output_channel")
                # the source drops the "groups" key on its depthwise rows (kernels vulkan.conv2d_dw*):
                # the weight's size still tells, filter_size = cout * (cin / groups) * k^2
                groups = g.get("groups") or _groups_from_filter(cin, cout, g.get("kernel_size"), g.get("filter_size"))
                out["groups"] = groups
                if groups > 1:
                    op_type = "dwconv2d" if groups == cin == cout else "group_conv2d"
            elif op_type == "avgpool" and g.get("kernel_size") is None and g.get("output_shape") is None:
                # a pool the source gives no window nor output for is pytorchcv's final pool, whose
                # window is the whole feature map (AvgPool2d(kernel_size=<final size>)): 1x1 out
                out.update(out_channels=cin, kernel=g.get("input_shape"), stride=1, padding=0, out_hw=1)
            elif op_type in ("avgpool", "maxpool"):
                out["out_channels"] = cin
            elif op_type == "global_avgpool":
                out.update(out_channels=cin, out_hw=1)
            elif out.get("out_hw") is None and op_type != "fc":  # element-wise: same shape out
                out.update(out_channels=cin, out_hw=g.get("input_shape"))
    out["op_type"] = op_type
    return out


def _groups_from_filter(cin: int | None, cout: int | None, k: int | None, filter_size: int | None) -> int:
    """A convolution's groups from its weight size (1 when the numbers do not divide evenly)."""
    if not (cin and cout and k and filter_size):
        return 1
    per_group, rest = divmod(filter_size, cout * k * k)  # input channels per group
    if rest or per_group <= 0 or cin % per_group:
        return 1
    return cin // per_group


# ---------------------------------------------------------------- models
def _rebuild(name: str) -> Any:
    """The IR of a pytorchcv model (built once per process: :func:`.load.pytorchcv_graph`)."""
    from .load import pytorchcv_graph

    return pytorchcv_graph(name)


def _known_pytorchcv() -> set[str]:
    from generators.importers.pytorch import _pytorchcv_models

    return set(_pytorchcv_models())


# ---------------------------------------------------------------- the importer
def import_usc(cfg: Any = None, progress: bool = False, catalog: Catalog | str | Path | None = None) -> ImportResult:
    """Read the USC CSVs from ``cfg.path`` (a folder or a list of them); return the five tables
    (see the module doc). ``catalog`` and the errors: as every importer's (:mod:`.importers`)."""
    cfg = validate_config(cfg)
    catalog = as_catalog(catalog)
    problems: list[ImportProblem] = []
    notes: list[str] = []
    folders = data_folders(cfg.path, "usc", COMMIT, problems, notes)
    read = _read_files(folders, problems)
    devices = _devices([(kind, t) for kind, _, t, _ in read], cfg.devices, catalog, problems)
    e2e_files: list[_E2eFile] = []
    ops_files: list[_OpsFile] = []
    for kind, fw, t, folder in read:
        parsed = (_parse_e2e_header(t, fw, devices, folder) if kind == "e2e"
                  else _parse_ops_header(t, fw, devices, folder))
        if parsed is not None:
            (e2e_files if kind == "e2e" else ops_files).append(parsed)
    for f in [*e2e_files, *ops_files]:
        if not f.folder.pinned:
            problems.extend(_assumptions(f, devices))

    # -------- which models: first appearance over the files, checked (and rebuilt) once
    first_seen: dict[str, tuple[str, int, str | None]] = {}
    for f in [*e2e_files, *ops_files]:
        for line, row in f.table.rows:
            name = row["model"]
            if not name:
                f.table.problem(line, "model", "empty model name; row skipped")
                continue
            first_seen.setdefault(name, (f.table.name, line, f.folder.commit))
    wanted = [n for n in first_seen if not cfg.models or n in cfg.models]
    for m in cfg.models:
        if m not in first_seen:
            problems.append(ImportProblem("(config)", None, "models", f"model {m!r} is in no USC file", CONFIG))
    model_rows, ok = _models(wanted, first_seen, e2e_files, ops_files, cfg, problems, progress)
    ids = {name: r["model_id"] for name, r in model_rows.items()}

    scen = _Scenarios()
    owner: dict[tuple[str, str], tuple[str, int]] = {}  # (model_id, scenario_id) -> (file, line) that holds it
    e2e = TableBuilder("e2e")
    for f in e2e_files:
        _import_e2e(f, ok, ids, scen, e2e, notes, devices, owner)
    ops = TableBuilder("ops")
    kernels = TableBuilder("kernels")
    for f in ops_files:
        _import_ops(f, ok, ids, scen, ops, kernels, notes, devices, owner)

    models = TableBuilder("models")
    for name in wanted:
        if name in ok:
            models.add(**model_rows[name])
    sc = TableBuilder("scenarios")
    for r in scen.rows.values():
        sc.add(**r)
    tables = {"models": models.frame(), "scenarios": sc.frame(), "e2e": e2e.frame(), "ops": ops.frame(),
              "kernels": kernels.frame()}
    return finish(DATASET, tables, problems, notes, cfg.strict)


def _read_files(folders: list[Folder], problems: list[ImportProblem]) -> list[tuple[str, str, CsvTable, Folder]]:
    """The USC files of every folder, read: (kind, framework, table, folder). A folder holding none
    of them is a PublicDataError; a file no folder holds is a problem line."""
    read = []
    found: set[tuple[str, str]] = set()
    for folder in folders:
        files = find_files(folder.root)
        if not any(files.values()):
            looked = ", ".join(n for names in FILES.values() for n in names[:2])
            raise PublicDataError(f"{folder.root}: none of the USC files found (looked for {looked})")
        for (kind, fw), p in files.items():
            if p is not None:
                found.add((kind, fw))
                read.append((kind, fw, CsvTable(p, folder.name(p), problems), folder))
    where = str(folders[0].root) if len(folders) == 1 else f"any of {', '.join(str(f.root) for f in folders)}"
    for key in FILES:
        if key not in found:
            problems.append(ImportProblem(FILES[key][0], None, None,
                                          f"file not found in {where} (also looked for {', '.join(FILES[key][1:])}); "
                                          f"its {key[1]} {'e2e' if key[0] == 'e2e' else 'GPU op'} data is missing"))
    return read


STUDY = "the USC study's set-up, which the file does not state"


def _assumptions(f: "_E2eFile | _OpsFile", devices: dict[str, Device]) -> list[ImportProblem]:
    """The problem lines (kind ``assumption``) of a file outside the pulled copy: what the USC
    study's set-up supplies that the file does not state; the GPU columns' precision and backend
    in a line of their own, naming each device."""
    t, fw = f.table, FRAMEWORKS[f.framework]
    version = f"{fw}'s version is not stated (framework_version left empty)"
    if isinstance(f, _OpsFile):
        if not f.devices:
            return []
        return [assumed(t.name, f"{STUDY}: op times in microseconds, 'float' = fp16, batch 1, 224x224 input; "
                        f"{_backends(f.devices, devices, f.framework)}; {version}",
                        column=next(iter(next(iter(f.devices.values())).values())))]
    if not f.groups:
        return []
    gpu: dict[str, dict[str, str]] = {}
    for (dev, cores, _), cols in f.groups.items():
        if cores == "gpu":
            gpu.setdefault(dev, cols)  # the device's first GPU column group
    what = ["latencies in microseconds", "batch 1, 224x224 input"]
    if any(cores != "gpu" for _, cores, _ in f.groups):
        what.append("CPU columns: threads = cores, 'float' = fp32, 'quant' = int8")
    out = [assumed(t.name, f"{STUDY}: {'; '.join(what)}; {version}")]
    if gpu:
        out.append(assumed(t.name, f"the USC study's set-up for the GPU columns, which the file does not state: "
                           f"'float' = fp16, 'quant' = int8; {_backends(gpu, devices, f.framework)}",
                           column=next(iter(next(iter(gpu.values())).values()))))
    return out


def _backends(columns: dict[str, Any], devices: dict[str, Device], framework: str) -> str:
    """``pixel4 on the GPU delegate (OpenCL), iphonexs on the GPU delegate (Metal)`` for the
    devices of ``columns`` (how the OS was told, where the catalog states none)."""
    parts = []
    for dev in columns:
        backend, guess = gpu_backend(devices[dev], framework)
        parts.append(f"{dev} on the {FRAMEWORKS[framework]} {backend}" + (f" ({guess})" if guess else ""))
    return ", ".join(parts)


def _claim(owner: dict[tuple[str, str], tuple[str, int]], model_id: str, sid: str, name: str, file: str,
           line: int) -> None:
    """Record that ``file`` holds network ``name`` in scenario ``sid``; PublicDataError naming both
    files when another file (of another folder) holds it already."""
    other = owner.setdefault((model_id, sid), (file, line))
    if other[0] != file:
        raise PublicDataError(f"usc.path: network {name!r} in scenario {sid} is in both {other[0]} line {other[1]} "
                              f"and {file} line {line}: two folders hold the same measurement; keep one")


def _import_e2e(f: _E2eFile, ok: set[str], ids: dict[str, str], scen: _Scenarios, e2e: TableBuilder,
                notes: list[str], devices: dict[str, Device], owner: dict[tuple[str, str], tuple[str, int]]) -> None:
    """The e2e rows of one file: the mean (and std) of each column group of each network."""
    t = f.table
    seen: dict[str, int] = {}
    empty = 0
    for line, row in t.rows:
        name = row["model"]
        if name not in ok:
            continue
        if name in seen:
            t.problem(line, "model", f"model {name!r} listed again (first at line {seen[name]}); row skipped")
            continue
        seen[name] = line
        for (dev, cores, prec), cols in f.groups.items():
            mean = parse_number(row[cols["mean"]], t, line, cols["mean"], unit="us")
            if mean is None:
                empty += row[cols["mean"]].strip() in ("", "-")
                continue
            std = parse_number(row[cols["std"]], t, line, cols["std"], positive=False) if "std" in cols else None
            if std is not None and std < 0:
                t.problem(line, cols["std"], f"negative standard deviation {std}; std left empty")
                std = None
            if std is not None and latency_fault(std, "us"):
                t.problem(line, cols["std"], f"standard deviation: {latency_fault(std, 'us')}; std left empty")
                std = None
            sid = scen.get(devices[dev], f.framework, cores, prec, t.name, f"{dev}|{cores}|{prec}",
                           f.parts.get((dev, cores)), f.folder.commit)
            _claim(owner, ids[name], sid, name, t.name, line)
            e2e.add(model_id=ids[name], scenario_id=sid, latency_ms=mean / US_PER_MS, latency_stat="mean",
                    mean_ms=mean / US_PER_MS, std_ms=None if std is None else std / US_PER_MS,
                    dataset=DATASET, source_file=t.name, source_row=line,
                    source_column=";".join(cols[s] for s in ("mean", "std") if s in cols),
                    source_commit=f.folder.commit)
    if empty:
        notes.append(f"{t.name}: {empty} empty latency cell(s) (not measured by the source)")


def _models(wanted: list[str], first_seen: dict[str, tuple[str, int, str | None]], e2e_files: list[_E2eFile],
            ops_files: list[_OpsFile], cfg: UscConfig, problems: list[ImportProblem],
            progress: bool) -> tuple[dict[str, dict], set[str]]:
    """Model rows by name, and the names that imported (the others are reported per file)."""
    flops: dict[str, int] = {}
    for f in e2e_files:
        if f.framework == "tflite" and f.flops_col:
            for line, row in f.table.rows:
                v = parse_number(row[f.flops_col], f.table, line, f.flops_col, integer=True)
                if v is not None:
                    flops.setdefault(row["model"], int(v))
    failed: dict[str, str] = {}
    rows: dict[str, dict] = {}
    known = _known_pytorchcv()
    names = wanted
    if progress and cfg.rebuild_ir:
        from tqdm import tqdm

        names = tqdm(wanted, desc="usc: rebuild IR", unit="net")
    for name in names:
        file, line, commit = first_seen[name]
        base = dict(name=name, source=SOURCE, family=usc_family(name), arch=name, input_shape=INPUT_SHAPE,
                    reported_flops=flops.get(name), dataset=DATASET, source_file=file, source_row=line,
                    source_column="model", source_commit=commit)
        if name not in known:
            failed[name] = "unknown pytorchcv model (pytorchcv.model_provider has no such name)"
            continue
        if not cfg.rebuild_ir:
            rows[name] = dict(base, model_id=f"{SOURCE}:{name}", meta=json.dumps({"pytorchcv": name}, sort_keys=True))
            continue
        try:
            g = _rebuild(name)
        except Exception as e:  # noqa: BLE001 - any failure of one network is reported (file, row), the rest imports
            failed[name] = f"the PyTorch importer cannot rebuild it: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            continue
        s = g.summary()
        shape = next(iter(g.input_nodes)).shape
        rows[name] = dict(base, model_id=g.model_id, input_shape="x".join(map(str, shape)), nodes=s["nodes"],
                          flops=s["flops"], params=s["params"], memory_bytes_fp32=s["memory_bytes"]["fp32"],
                          ir=g.to_json() if cfg.store_ir else None, meta=json.dumps(g.meta, sort_keys=True))
    for f in [*e2e_files, *ops_files]:
        reported: set[str] = set()
        for line, row in f.table.rows:
            name = row["model"]
            if name in failed and name not in reported:
                n = sum(1 for _, r in f.table.rows if r["model"] == name)
                f.table.problem(line, "model", f"model {name!r}: {failed[name]}; its {n} row(s) in this file skipped")
                reported.add(name)
    return rows, set(rows)


def _import_ops(f: _OpsFile, ok: set[str], ids: dict[str, str], scen: _Scenarios, ops: TableBuilder,
                kernels: TableBuilder, notes: list[str], devices: dict[str, Device],
                owner: dict[tuple[str, str], tuple[str, int]]) -> None:
    """The op and kernel rows of one GPU op file."""
    t = f.table
    unique_names = KERNEL_NAMES_UNIQUE[f.framework]
    op_counter: dict[str, int] = {}
    parsed: list[tuple[int, str, int, dict]] = []  # (line, model, op_index, row)
    for line, row in t.rows:
        name = row["model"]
        if name not in ok:
            continue
        try:
            feat = ast.literal_eval(row["feature"]) if row["feature"] else {}
            if not isinstance(feat, dict):
                raise ValueError(f"a {type(feat).__name__}, not a dict")
            odd = [k for k in feat if not isinstance(k, str)]
            if odd:
                raise ValueError(f"key {repr(odd[0])[:40]} is not a name")
            config = json.dumps(feat, sort_keys=True, default=repr)  # sets, bytes ...: as their literal
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, OverflowError) as e:
            t.problem(line, "feature", f"not a Python dict literal of named values ({type(e).__name__}: "
                      f"{str(e).splitlines()[0][:200] if str(e) else ''}); row skipped")
            continue
        features, bad = checked_features(op_features(f.framework, row["operation"], feat))
        for msg in bad:
            t.problem(line, "feature", msg)
        k = op_counter.get(name, 0)
        op_counter[name] = k + 1
        parsed.append((line, name, k, {"row": row, "features": features, "config": config}))
    not_measured: dict[str, int] = {}
    for dev, cols in f.devices.items():
        sid = scen.get(devices[dev], f.framework, "gpu", "float", t.name, f"{dev}|gpu|float", None, f.folder.commit)
        kernel_of: dict[tuple[str, str], int] = {}  # (model, kernel name) -> kernel_index
        kernel_lat: dict[tuple[str, int], float] = {}
        next_kernel: dict[str, int] = {}
        for line, name, op_index, item in parsed:
            row = item["row"]
            if op_index == 0:
                _claim(owner, "ops:" + ids[name], sid, name, t.name, line)
            lat = parse_number(row[cols["float"]], t, line, cols["float"], unit="us")
            kname = row[cols["kernel"]].strip() if "kernel" in cols else ""
            kname = kname or None
            if lat is None and row[cols["float"]].strip() not in ("", "-"):
                continue  # unreadable cell: reported by parse_number
            if lat is None and kname is not None:
                not_measured[dev] = not_measured.get(dev, 0) + 1
                continue
            fused = False
            kidx = None
            lat_ms = None if lat is None else lat / US_PER_MS
            if lat is None:
                fused = True  # no kernel of its own, no time: ran inside a neighbour's kernel
            elif kname is not None:
                key = (name, kname)
                if unique_names and key in kernel_of:
                    kidx = kernel_of[key]
                    fused = True
                    if abs(kernel_lat[(name, kidx)] - lat_ms) > 1e-9 * max(1.0, lat_ms):
                        t.problem(line, cols["float"], f"kernel {kname!r} shared with an earlier op has a different "
                                  f"time ({lat} us vs {kernel_lat[(name, kidx)] * US_PER_MS} us); the first is kept")
                    lat_ms = None
                else:
                    kidx = next_kernel.get(name, 0)
                    next_kernel[name] = kidx + 1
                    kernel_of[key] = kidx
                    kernel_lat[(name, kidx)] = lat_ms
                    kernels.add(model_id=ids[name], scenario_id=sid, kernel_index=kidx, kernel_name=kname,
                                kernel_type=kernel_type(kname), op_index=op_index, n_ops=1, latency_ms=lat_ms,
                                dataset=DATASET, source_file=t.name, source_row=line,
                                source_column=";".join(cols.values()), source_commit=f.folder.commit)
            ops.add(model_id=ids[name], scenario_id=sid, op_index=op_index, framework_op=row["operation"],
                    config=item["config"], latency_ms=lat_ms, fused=fused, kernel_index=kidx,
                    kernel_name=kname, dataset=DATASET, source_file=t.name, source_row=line,
                    source_column=";".join(cols.values()), source_commit=f.folder.commit, **item["features"])
    _count_kernel_ops(ops, kernels)
    for dev, n in not_measured.items():
        notes.append(f"{t.name}: {dev}: {n} op row(s) name a kernel but have no time (not measured by the source); skipped")


def _count_kernel_ops(ops: TableBuilder, kernels: TableBuilder) -> None:
    counts: dict[tuple[str, str, int], int] = {}
    for r in ops.rows:
        if r.get("kernel_index") is not None:
            key = (r["model_id"], r["scenario_id"], r["kernel_index"])
            counts[key] = counts.get(key, 0) + 1
    for r in kernels.rows:
        r["n_ops"] = counts.get((r["model_id"], r["scenario_id"], r["kernel_index"]), 0)
