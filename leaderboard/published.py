"""Published reference results the board shows beside its entries, and what reproducing them takes.

:data:`PUBLISHED` is a registry of published rows (:class:`PublishedRow`): a method's figures
as a paper or its authors' repository give them, with the source (paper, table, row), the
tracks the row stands beside, the metric, one value per scenario of the track (``None`` where
the source has no figure: the row's note says so; nothing is estimated or filled in) and one
line stating how the published protocol differs from the track's. The board marks every such
row as published. The sources (HELP Table 3, NASFLAT's result file, the USC study's Tables
C.5/C.7, nn-Meter's Table 8) are pinned in the rows themselves; docs/leaderboard.md lists them.

HELP's FLOPs row is also reproduced here (:func:`help_flops_spearman`). HELP does not define its
FLOPs, so two readings of "FLOPs" of the IR are compared on the ``help-nb201-*`` tracks' frozen
test split: ``macs`` (multiply-accumulates of the convolutions and the FC layer, the IR's
``flops``, over every edge of the cell as NAS-Bench-201 computes it) and ``executed`` (those
MACs plus one operation per output element of every other computing node, the way profilers'
FLOP counters count element-wise work). Figures and the reasoning are in docs/leaderboard.md;
tests/test_help_flops.py checks them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from foundation.registry import Registry

# HELP Table 3, FLOPs row (device -> Spearman), for the meta-test devices in the public data
HELP_TABLE3_FLOPS = {"gold_6226": 0.826, "pixel2": 0.765, "raspi4": 0.846, "eyeriss": 0.437}
HELP_TOLERANCE = 0.03

NO_COMPUTE = frozenset({"input", "flatten", "reshape"})  # data layout only: no arithmetic

FLOPS_DEFINITIONS: Registry[Callable[[Any], int]] = Registry("FLOPs definition")


@FLOPS_DEFINITIONS.register("macs")
def macs(graph: Any) -> int:
    """Multiply-accumulates of conv and FC layers (the IR's ``Graph.flops``)."""
    return int(graph.flops)


@FLOPS_DEFINITIONS.register("executed")
def executed_ops(graph: Any) -> int:
    """MACs of conv/FC plus one operation per output element of every other computing node."""
    total = 0
    for c in graph.costs():
        if c.macs:
            total += c.macs
        elif c.op not in NO_COMPUTE:
            total += c.output_elements
    return int(total)


def help_flops_spearman(dataset: Any, split: Any, definition: str = "executed",
                        graphs: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Spearman of FLOPs (``definition``) against latency on the split's test networks of every
    HELP scenario in ``dataset`` (device -> rho). ``split`` is a help-nb201 track's Split."""
    from generators.nasbench201 import build

    from .metrics import spearman

    count = FLOPS_DEFINITIONS.get(definition)
    cache: dict[str, float] = {}  # arch -> FLOPs: the devices share the test architectures

    def flops_of(arch: str) -> float:
        if arch not in cache:
            cache[arch] = float(count(graphs[arch] if graphs and arch in graphs else build(arch)))
        return cache[arch]

    out = {}
    for sid in sorted(set(dataset.e2e["scenario_id"])):
        names = split.test_names(sid)
        if not names:
            continue
        device = dataset.scenario(sid).device
        e = dataset.e2e_for(sid).merge(dataset.models[["model_id", "name", "arch"]], on="model_id")
        e = e[e["name"].isin(set(names))]
        flops = np.array([flops_of(a) for a in e["arch"]], dtype="float64")
        out[device] = spearman(e["latency_ms"].to_numpy(), flops)
    return out


# ---------------------------------------------------------------- published rows
@dataclass(frozen=True)
class PublishedRow:
    """One published method's figures beside a track (values per scenario id of the track)."""

    name: str  # registry key
    method: str  # name on the board
    source: str  # paper / repository, table, row
    tracks: tuple[str, ...]  # the tracks it stands beside
    metric: str  # a registered metric (leaderboard.metrics)
    values: dict[str, float | None]  # scenario_id -> published figure (None: not in the source)
    protocol: str  # one line: how the published protocol differs from the track's
    n_train: int | None = None  # training samples from the target scenario (None: none / not stated)
    spread: dict[str, float] = field(default_factory=dict)  # scenario_id -> published std over trials
    note: str = ""

    def mean(self) -> float | None:
        """Mean over the scenarios the source gives (None when it gives none)."""
        v = [x for x in self.values.values() if x is not None]
        return float(np.mean(v)) if v else None


PUBLISHED: Registry[PublishedRow] = Registry("published row")


def register_row(row: PublishedRow) -> PublishedRow:
    from .metrics import METRICS

    METRICS.get(row.metric)  # a figure in a metric the board does not know is a typo: fail on import
    PUBLISHED.register(row.name)(row)
    return row


def published_for(track: str) -> list[PublishedRow]:
    """The published rows shown beside ``track``, in registry order."""
    return [PUBLISHED.get(n) for n in PUBLISHED.names() if track in PUBLISHED.get(n).tracks]


# HELP's devices -> the public data's scenario ids
HELP_SCENARIOS = {"gold_6226": "help-gold6226-cpu", "pixel2": "help-pixel2-cpu", "raspi4": "help-raspi4-cpu",
                  "eyeriss": "help-eyeriss-asic"}
HELP_TRACKS = ("help-nb201-n10", "help-nb201-n100", "help-nb201-n900")
_HELP_SRC = "HELP (Lee et al., NeurIPS'21), Table 3 (authors' README, HayeonLee/HELP@45f70eb), row "


def _by_device(d: Mapping[str, float | None]) -> dict[str, float | None]:
    return {HELP_SCENARIOS[k]: v for k, v in d.items()}


register_row(PublishedRow(
    "help-flops", "FLOPs (HELP Table 3)", _HELP_SRC + "FLOPS", HELP_TRACKS, "spearman", _by_device(HELP_TABLE3_FLOPS),
    "no training; HELP does not say how it counts FLOPs (our flops/flops_mac entries rank by two readings)"))
register_row(PublishedRow(
    "help-layerwise", "Layer-wise predictor (HELP Table 3)", _HELP_SRC + "Layer-wise Predictor", HELP_TRACKS, "spearman",
    _by_device({"gold_6226": 0.866, "pixel2": None, "raspi4": None, "eyeriss": None}),
    "sum of per-layer latencies profiled on the device; no network of the target is trained on",
    note="Table 3 gives '-' for Pixel2, Raspi4 and ASIC: no figure"))
register_row(PublishedRow(
    "help-brpnas-900", "BRP-NAS (HELP Table 3)", _HELP_SRC + "BRP-NAS", HELP_TRACKS, "spearman",
    _by_device({"gold_6226": 0.796, "pixel2": 0.666, "raspi4": 0.847, "eyeriss": 0.811}),
    "GCN trained on 900 target-device samples (the N=900 track's budget), HELP's test set", n_train=900))
register_row(PublishedRow(
    "help-brpnas-3200", "BRP-NAS +extra samples (HELP Table 3)", _HELP_SRC + "BRP-NAS (+extra samples)", HELP_TRACKS,
    "spearman", _by_device({"gold_6226": 0.805, "pixel2": 0.693, "raspi4": 0.853, "eyeriss": 0.830}),
    "GCN trained on 3200 target-device samples, more than any track allows", n_train=3200))
HELP_10 = _by_device({"gold_6226": 0.989, "pixel2": 0.802, "raspi4": 0.890, "eyeriss": 0.940})  # Table 3, HELP (Ours)
register_row(PublishedRow(
    "help-help-10", "HELP (HELP Table 3)", _HELP_SRC + "HELP (Ours)", ("help-nb201-n10",), "spearman", HELP_10,
    "meta-learned on 9 source devices' full latency tables, then 10 target samples; the track allows "
    "the 10 target samples only", n_train=10, note="Table 3 has no 20-sample column"))
# help-transfer-n10 is HELP's own setting (sources' full tables + 10 target samples, HELP's test set):
# what differs is which sources, stated on the row
register_row(PublishedRow(
    "help-help-10-transfer", "HELP (HELP Table 3)", _HELP_SRC + "HELP (Ours)", ("help-transfer-n10",), "spearman",
    HELP_10,
    "meta-trained on 9 source devices (1080 Ti at batch 1/32/256, Xeon Silver 4114 and 4210R, Galaxy A50, "
    "Pixel 3, Essential Phone, Galaxy S7) and validated on 4 more, then 10 target samples; the track's "
    "sources are 3: 1080 Ti (batch 1) and Pixel 3 of those 9, and Titan Xp; no desktop CPU among them",
    n_train=10, note="Table 3 has no 20-sample column"))

_NASFLAT_SRC = ("NASFLAT (Akhauri & Abdelfattah, MLSys'24), abdelfattah-lab/nasflat_latency@488ecd6 "
                "correlation_results/all_results/study_6_5_f_900/nb201_samp_eff.csv, uid 295310485, "
                "transfer_sample_size ")
_NASFLAT_PROTOCOL = ("pre-trained on 900 samples of each of HELP's 9 source devices, transferred with N "
                     "CATE-chosen target samples, mean of 5 trials; test architectures as its code draws them")
# on the transfer tracks (its setting): the sources, the choice of the N samples and the test set differ
_NASFLAT_TRANSFER = ("pre-trained on 900 samples of each of HELP's 9 source devices (the track: 3 sources, "
                     "all 15,625 architectures each); its {n} target samples picked by k-means on CATE "
                     "embeddings (the track draws them at random from indices 0-899); scored in its main_trf.py "
                     "on every architecture of the space, untrimmed, its samples included (the track: HELP's "
                     "800); mean of 5 trials (the track: 3 seeds)")
NASFLAT_10 = _by_device({"gold_6226": 0.9804, "pixel2": 0.9513, "raspi4": 0.8685, "eyeriss": 0.9567})
NASFLAT_10_SD = _by_device({"gold_6226": 0.0056, "pixel2": 0.0070, "raspi4": 0.0167, "eyeriss": 0.0388})
register_row(PublishedRow(
    "nasflat-10", "NASFLAT (N=10)", _NASFLAT_SRC + "10", ("help-nb201-n10",), "spearman", NASFLAT_10,
    _NASFLAT_PROTOCOL + "; the track allows the 10 target samples only", n_train=10, spread=NASFLAT_10_SD))
register_row(PublishedRow(
    "nasflat-10-transfer", "NASFLAT (N=10)", _NASFLAT_SRC + "10", ("help-transfer-n10",), "spearman", NASFLAT_10,
    _NASFLAT_TRANSFER.format(n=10), n_train=10, spread=NASFLAT_10_SD))
# N=20 stands beside the N=20 transfer track only (it stood beside help-nb201-n10 while no N=20 track existed)
register_row(PublishedRow(
    "nasflat-20", "NASFLAT (N=20)", _NASFLAT_SRC + "20", ("help-transfer-n20",), "spearman",
    _by_device({"gold_6226": 0.9786, "pixel2": 0.9247, "raspi4": 0.8837, "eyeriss": 0.9878}),
    _NASFLAT_TRANSFER.format(n=20), n_train=20,
    spread=_by_device({"gold_6226": 0.0068, "pixel2": 0.0391, "raspi4": 0.0189, "eyeriss": 0.0051})))

# USC study, Tables C.5 (TFLite) and C.7 (PyTorch Mobile): MAPE %, columns in the tables' order
# (Snapdragon 855 CPU, GPU; Exynos 9820 CPU, GPU; Snapdragon 710 CPU, GPU; Helio P35 CPU, GPU;
# A12 Bionic CPU, GPU; A10 Fusion CPU, GPU); "-" where the table has a dash.
_USC_COLUMNS = ("pixel4", "s10", None, "a03s", "iphonexs", None)  # Snapdragon 710, A10 Fusion: not in the data
_FRAMEWORK_NAMES = {"tflite": "TFLite", "pytorch": "PyTorch Mobile"}
_USC_TABLES = {
    ("tflite", "C.5"): """
Lasso 30 9.77 12.04 5.83 12.68 6.40 4.78 5.51 6.79 4.20 6.51 7.00 6.73
Lasso 100 8.23 14.41 4.85 11.77 7.08 5.21 4.87 6.51 4.36 6.38 7.46 6.87
Lasso 900 7.29 12.10 5.24 12.28 5.27 4.59 4.65 6.06 3.66 6.07 6.24 6.67
RF 30 14.79 14.77 20.15 13.23 14.37 7.99 18.86 6.81 11.95 8.23 11.44 8.08
RF 100 11.67 9.94 10.85 11.24 9.10 5.72 10.26 7.19 9.18 7.00 9.48 5.95
RF 900 7.43 7.24 8.01 11.39 5.02 5.60 5.71 6.01 5.61 6.74 5.12 4.80
GBDT 30 12.20 12.13 16.57 12.50 11.92 9.03 16.11 6.92 11.46 11.03 8.90 9.14
GBDT 100 12.32 7.83 10.28 12.32 7.38 5.24 10.19 6.44 8.72 8.08 8.53 4.95
GBDT 900 6.38 6.68 7.86 11.87 4.79 4.15 4.80 5.86 5.45 6.23 4.70 5.28
MLP 30 14.87 7.79 13.18 9.94 11.35 8.52 13.01 7.03 11.39 12.43 12.12 8.98
MLP 100 18.31 9.05 16.61 10.51 12.35 10.37 12.25 7.91 15.09 10.41 11.22 8.23
MLP 900 14.48 7.59 14.23 11.06 16.59 11.06 10.22 7.08 10.71 8.72 8.55 6.24
""",
    ("pytorch", "C.7"): """
Lasso 30 11.76 7.43 10.82 10.97 20.37 - 8.45 7.36 7.69 12.63 9.38 -
Lasso 100 11.68 6.13 9.09 8.72 19.17 - 7.59 7.71 7.22 12.19 9.33 -
Lasso 900 11.27 5.70 8.34 8.71 19.49 - 7.07 6.73 6.77 11.63 9.40 -
RF 30 16.12 21.68 15.45 29.49 23.20 - 12.51 23.28 11.50 14.98 13.81 -
RF 100 14.38 10.65 13.94 11.66 19.84 - 12.04 11.88 10.55 13.57 9.00 -
RF 900 8.25 6.87 6.57 7.21 11.09 - 6.46 5.23 4.94 10.65 7.15 -
GBDT 30 11.64 29.62 12.08 26.29 20.55 - 10.75 20.91 7.23 25.40 7.39 -
GBDT 100 8.44 13.02 8.24 12.56 11.35 - 9.15 8.60 6.16 13.26 5.56 -
GBDT 900 5.86 10.29 5.03 9.04 5.60 - 4.73 5.54 4.65 10.38 5.55 -
MLP 30 9.31 19.74 12.13 16.19 22.72 - 11.03 22.51 7.59 19.92 7.93 -
MLP 100 8.86 25.38 5.43 19.39 10.75 - 5.66 22.49 7.45 13.57 7.21 -
MLP 900 6.04 12.12 5.86 7.51 9.71 - 6.25 10.01 4.57 11.13 6.04 -
""",
}


def _usc_rows() -> None:
    for (framework, table), text in _USC_TABLES.items():
        for line in text.strip().splitlines():
            method, n, *cells = line.split()
            if len(cells) != 2 * len(_USC_COLUMNS):
                raise ValueError(f"published.py: USC Table {table} row {method} {n}: {len(cells)} cells, expected 12")
            values: dict[str, float | None] = {}
            for i, phone in enumerate(_USC_COLUMNS):
                if phone is None:
                    continue
                cpu, gpu = cells[2 * i], cells[2 * i + 1]
                values[f"usc-{phone}-{framework}-cpu-1large-fp32"] = None if cpu == "-" else float(cpu)
                values[f"usc-{phone}-{framework}-gpu-fp16"] = None if gpu == "-" else float(gpu)
            register_row(PublishedRow(
                f"usc-{table.lower()}-{method.lower()}-{n}", f"USC {method}, {_FRAMEWORK_NAMES[framework]} (N={n} synthetic)",
                f"Li, Paolieri, Golubchik (USC study), Table {table}, row {method}, training size {n}",
                ("usc-real-kfold",), "mape", values,
                f"op-wise {method} trained on {n} synthetic networks, tested on all 102 real CNNs; the track "
                "trains on 4/5 of the real CNNs (5-fold), end-to-end", n_train=int(n),
                note="one large core at fp32 and the GPU only; '-' in the table: no figure"))


_usc_rows()

register_row(PublishedRow(
    "nnmeter-sec722", "nn-Meter (its 26k models)", "Zhang et al., nn-Meter (MobiSys'21), Sec. 7.2.2 and Table 8",
    ("host-random", "host-random-kernels", "host-unseen-family", "host-unseen-family-kernels", "host-shift-zoo",
     "host-shift-zoo-kernels", "host-shift-real-kernels"), "acc10",
    {"mobile CPU (Pixel4, TFLite)": 0.990, "mobile GPU (Adreno 640, TFLite)": 0.991, "Intel VPU (OpenVINO)": 0.834},
    "kernel predictors fitted on adaptively sampled kernels, never on the 26,000 test models; its devices, "
    "not the host", note="keys are nn-Meter's devices, not scenarios of the track: shown as published, not per scenario"))


__all__ = ["HELP_TABLE3_FLOPS", "HELP_TOLERANCE", "FLOPS_DEFINITIONS", "macs", "executed_ops", "help_flops_spearman",
           "PUBLISHED", "PublishedRow", "register_row", "published_for", "HELP_SCENARIOS"]
