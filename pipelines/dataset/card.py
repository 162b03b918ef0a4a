"""The dataset card: DATASET.md (counts, sources and how they were measured, figures, notes,
schema) and its figures as PNG files next to it, drawn with matplotlib's Agg backend.

Figures (each skipped with a one-line reason in the card when its data is absent):

- ``latency_distribution.png``: end-to-end latency per source dataset, by generator source
  of the networks when a dataset has several (the suite's own), else by accelerator;
- ``op_breakdown.png``: share of summed op time per op type, per scenario with op records
  (USC GPU ops, the suite's CPU ops; the paper's Fig. 10 style);
- ``multicore_speedup.png``: end-to-end speed-up of each CPU core combination over one core of
  the fastest cluster it uses, fp32 (the paper's Fig. 2 style);
- ``int8_speedup.png``: fp32 / int8 latency per core combination (> 1: int8 faster; Fig. 4 style);
- ``op_gap.png``: end-to-end latency minus the sum of recorded op times, per scenario with op
  records (Fig. 9 style). Where the e2e row has the end-to-end time of the profiled process
  that recorded the ops (``op_run_ms``, the suite's own records) that is the reference, and the
  suite's kernel records get a box of their own against ``kernel_run_ms``: the suite times ops
  with the builtin kernels but e2e with XNNPACK, so the plain e2e latency is no reference.

The multicore and int8 figures compare scenarios with threads = cores only (other thread
counts are other scenarios).

The section *Frameworks on the same device* (:func:`frameworks_section`) compares the runtimes a
device ran at one CPU point (scenarios differing in the framework alone, comparisons.py
``framework_pairs``): per-network latency ratios by generator source and by the op type that
carries most of a network's MACs in its IR, and where each runtime is the fastest with a computed
account of why; it says in one line why it is empty. The section *Transformer networks*
(:func:`transformers_section`) splits the op and kernel time of transformer networks into
attention, MLP, norm and the rest by the IR node each op comes from (``generators/roles.py``),
with the e2e minus sum-of-ops gap, and draws ``transformer_roles.png``.

``write_card(..., sections=[(title, markdown)])`` adds sections a producer knows beyond the
tables (the assemble stage: the measuring protocol as recorded, failures, grid points not
offered) after the sources.

Output is deterministic: the same tables give byte-identical files.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from foundation.atomic import write_text

from ..runners import legacy_frameworks
from .comparisons import (Pairs, core_order, dominant_op, framework_rank, framework_ratio_frame,
                          framework_scenario_points, framework_wins, gap_frame, int8_pairs, multicore_pairs,
                          outside_shares, ratio_frame)
from .load import Dataset, load_dataset
from .schema import SCHEMA_VERSION, TABLES, markdown

CARD = "DATASET.md"

SOURCES_INFO: dict[str, dict[str, str]] = {
    "latbench": {
        "title": "Measured by this suite",
        "how": "Networks generated as IR by `generators/`, exported to framework artifacts (TFLite fp32/int8, "
               "TorchScript) and run on each scenario's device by the suite's instrumented runtimes (`native/` "
               "for LiteRT with XNNPACK, `pipelines/runners/torch.py` for TorchScript): fresh processes pinned to "
               "the scenario's CPU set before the thread pool exists, end-to-end runs timed with the monotonic "
               "clock after warm-up runs, op- and kernel-level events from the library's profiler in separate "
               "processes. Statistics over the timed runs in ms; raw timestamps in ns.",
    },
    "usc-mobile-ml-benchmark": {
        "title": "USC mobile-ml-benchmark (Li, Paolieri, Golubchik)",
        "url": "https://github.com/qed-usc/mobile-ml-benchmark",
        "licence": "MIT",
        "how": "102 real-world CNNs (pytorchcv implementations, 224x224 input, batch 1) measured on phones with "
               "TFLite (benchmark tool; fp32 on CPU, fp16 on GPU, int8 post-training quantization) and PyTorch "
               "Mobile (XNNPACK fp32, QNNPACK int8, Vulkan/Metal fp16 on GPU), on CPU core combinations "
               "(threads = cores, pinned by affinity on Android, by QoS class on iOS) and GPUs. End-to-end: mean "
               "and standard deviation as published (microseconds in the source, ms here). GPU ops: time of the "
               "kernel that executed each op (OpenCL/Metal/Vulkan timestamps) and that kernel's name.",
    },
    "help-nasbench201": {
        "title": "HELP's NAS-Bench-201 latencies (Lee et al., NeurIPS'21)",
        "url": "https://github.com/HayeonLee/HELP",
        "licence": "MIT",
        "how": "All 15,625 NAS-Bench-201 cells in the CIFAR skeleton (32x32 input), one latency per architecture "
               "and device as published by HELP (collected from HW-NAS-Bench and BRP-NAS/Eagle and the HELP "
               "authors); the statistic behind each value is not stated (latency_stat = reported).",
    },
}


# ---------------------------------------------------------------- figures
def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> None:
    fig.savefig(path, dpi=110, metadata={"Software": None}, bbox_inches="tight")
    _plt().close(fig)


def plot_latency_distribution(ds: Dataset, out: Path) -> tuple[str | None, str]:
    e = ds.e2e_with_features()
    if e.empty:
        return None, "no end-to-end records"
    plt = _plt()
    groups = sorted(e["dataset"].unique())
    fig, axes = plt.subplots(1, len(groups), figsize=(5.2 * len(groups), 3.6), squeeze=False)
    lo, hi = np.log10(e["latency_ms"].min()), np.log10(e["latency_ms"].max())
    bins = np.logspace(np.floor(lo * 4) / 4, np.ceil(hi * 4) / 4, 40)
    for ax, name in zip(axes[0], groups):
        g = e[e["dataset"] == name]
        # the suite's own data spans generator sources (synthetic, zoo, ...); public data one each
        by = "source" if g["source"].nunique() > 1 else "accelerator"
        for key in sorted(g[by].dropna().unique()):
            vals = g.loc[g[by] == key, "latency_ms"]
            ax.hist(vals, bins=bins, alpha=0.6, label=f"{key} ({len(vals)})")
        ax.set_xscale("log")
        ax.set_xlabel("end-to-end latency (ms)")
        ax.set_ylabel("model x scenario records")
        ax.set_title(name, fontsize=10)
        ax.legend(fontsize=8)
    fname = "latency_distribution.png"
    _save(fig, out / fname)
    return fname, ("End-to-end latency per source dataset, by generator source where a dataset has several, "
                   "else by accelerator (log scale).")


def mean_shares(rows: pd.DataFrame, category: pd.Series) -> pd.DataFrame:
    """Scenario x category: the mean over models of the category's share of the model's summed
    ``latency_ms`` (a model without the category counts 0)."""
    per = rows.groupby([rows["scenario_id"], rows["model_id"], category])["latency_ms"].sum()
    share = (per / per.groupby(level=[0, 1]).transform("sum")).unstack(fill_value=0.0)
    return share.groupby(level=0).mean()


def plot_share_bars(data: pd.DataFrame, path: Path, xlabel: str, cmap: str = "tab10", row_height: float = 0.42) -> None:
    """Stacked horizontal bars of shares (rows: scenarios, columns: categories) into ``path``."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, row_height * len(data) + 1.4))
    left = np.zeros(len(data))
    colors = plt.get_cmap(cmap)
    for k, col in enumerate(data.columns):
        ax.barh(range(len(data)), data[col].to_numpy(), left=left, color=colors(k % colors.N), label=col)
        left += data[col].to_numpy()
    ax.set_yticks(range(len(data)), data.index, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(xlabel)
    ax.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.4 / max(len(data), 1)))
    _save(fig, path)


def plot_op_breakdown(ds: Dataset, out: Path) -> tuple[str | None, str]:
    o = ds.ops
    o = o[o["latency_ms"].notna()]
    if o.empty:
        return None, "no op records with times in this dataset"
    mean_share = mean_shares(o, o["op_type"])  # scenario x op_type
    top = mean_share.mean().sort_values(ascending=False).index[:8].tolist()
    other = [c for c in mean_share.columns if c not in top]
    data = mean_share[top].copy()
    if other:
        data["other"] = mean_share[other].sum(axis=1)
    fname = "op_breakdown.png"
    plot_share_bars(data.sort_index(), out / fname, "mean share of summed op time per model")
    return fname, "Latency breakdown by op type (mean over models of each op type's share), per scenario with op records."


def _boxgrid(df: pd.DataFrame, ylabel: str, fname: str, out: Path, ref: float = 1.0) -> None:
    plt = _plt()
    groups = sorted(df["group"].unique())
    ncol = 2
    nrow = (len(groups) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(11, 2.9 * nrow), squeeze=False)
    for ax in axes.flat[len(groups):]:
        ax.axis("off")
    for ax, grp in zip(axes.flat, groups):
        g = df[df["group"] == grp]
        labels = sorted(g["label"].unique(), key=core_order)
        ax.boxplot([g.loc[g["label"] == lab, "ratio"].to_numpy() for lab in labels], showfliers=False)
        ax.set_xticks(range(1, len(labels) + 1), labels, rotation=35, fontsize=7)
        ax.axhline(ref, color="grey", lw=0.8, ls="--")
        ax.set_title(grp, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=8)
    fig.tight_layout()
    _save(fig, out / fname)


def _ratio_figure(ds: Dataset, out: Path, pairs: Pairs, none: str,
                  ylabel: str, fname: str, caption: str) -> tuple[str | None, str]:
    """The box grid of the ratios of ``pairs`` (see _ratio_frame) as ``out/fname``: (fname, caption),
    or (None, ``none``: why there is no figure) when no pair has a ratio."""
    df = ratio_frame(ds, pairs)
    if df.empty:
        return None, none
    _boxgrid(df, ylabel, fname, out)
    return fname, caption


def plot_multicore_speedup(ds: Dataset, out: Path) -> tuple[str | None, str]:
    return _ratio_figure(ds, out, multicore_pairs,
                         "no CPU scenarios with several core combinations of one device and framework",
                         "speed-up over 1 core", "multicore_speedup.png",
                         "End-to-end speed-up of each core combination over one core of the fastest "
                         "cluster it uses, fp32 (boxes: quartiles over models; outliers not drawn).")


def plot_int8_speedup(ds: Dataset, out: Path) -> tuple[str | None, str]:
    return _ratio_figure(ds, out, int8_pairs, "no CPU scenarios measured at both fp32 and int8",
                         "fp32 / int8 latency", "int8_speedup.png",
                         "int8 speed-up (fp32 latency / int8 latency) per core combination; below the "
                         "dashed line int8 is slower (boxes: quartiles over models).")


def plot_op_gap(ds: Dataset, out: Path) -> tuple[str | None, str]:
    gap = gap_frame(ds).rename(columns={"label": "scenario_id", "scenario_id": "scenario"})
    if gap.empty:
        return None, "no model x scenario has both op records and an end-to-end latency"
    order = sorted(gap["scenario_id"].unique())
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(order) + 1.2))
    import matplotlib

    horizontal = {"orientation": "horizontal"} if tuple(map(int, matplotlib.__version__.split(".")[:2])) >= (3, 10) \
        else {"vert": False}
    ax.boxplot([gap.loc[gap["scenario_id"] == s, "gap_ms"].to_numpy() for s in order], showfliers=False, **horizontal)
    ax.set_yticks(range(1, len(order) + 1), order, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("end-to-end latency - sum of recorded op times (ms)")
    _save(fig, out / "op_gap.png")
    return "op_gap.png", ("End-to-end latency minus the sum of recorded op times, per scenario with op records "
                          "(ops the source did not record, e.g. element-wise ops in the USC TFLite files, count "
                          "in the gap). For the suite's own records the reference is the end-to-end time of the "
                          "profiled process that recorded the ops (builtin kernels), and `<scenario> kernels` "
                          "boxes compare the XNNPACK kernel times with their own profiled process.")


FIGURES: list[Callable[[Dataset, Path], tuple[str | None, str]]] = [
    plot_latency_distribution, plot_op_breakdown, plot_multicore_speedup, plot_int8_speedup, plot_op_gap,
]
FIGURE_FILES = tuple(f"{f.__name__.removeprefix('plot_')}.png" for f in FIGURES)  # what each one writes


# ---------------------------------------------------------------- the suite's GPU scenarios
def gpu_kernel_breakdown(ds: Dataset) -> pd.DataFrame:
    """Per GPU scenario x kernel kind (``kernel_type`` before its first ``+``): the mean over
    models of the kind's share of the summed kernel time (a model without the kind counts 0)."""
    k, sc = ds.kernels, ds.scenarios
    gpu_ids = set(sc.loc[sc["accelerator"] == "gpu", "scenario_id"])
    k = k[k["scenario_id"].isin(gpu_ids) & k["latency_ms"].notna()]
    if k.empty:
        return pd.DataFrame()
    return mean_shares(k, k["kernel_type"].str.split("+").str[0].rename("kind")).sort_index()


def plot_gpu_kernel_kinds(ds: Dataset, out: Path) -> str | None:
    """gpu_kernel_kinds.png: the breakdown above as stacked bars, one per GPU scenario."""
    data = gpu_kernel_breakdown(ds)
    path = out / "gpu_kernel_kinds.png"
    if data.empty:
        path.unlink(missing_ok=True)  # a stale figure of an earlier assembly
        return None
    data = data[data.mean().sort_values(ascending=False).index]
    plot_share_bars(data, path, "mean share of summed GPU kernel time per model", cmap="tab20", row_height=0.5)
    return path.name


def gpu_section(ds: Dataset, out: Path | None) -> tuple[str, str] | None:
    """The card's section on the suite's own GPU scenarios: their kernels per run and the kind
    breakdown (its figure drawn into ``out``); None without such scenarios."""
    sc = ds.scenarios
    gpu = sc[sc["accelerator"] == "gpu"]
    if gpu.empty:
        return None
    k = ds.kernels
    rows = []
    for s in gpu.itertuples():
        ks = k[k["scenario_id"] == s.scenario_id]
        n_models = int((ds.e2e["scenario_id"] == s.scenario_id).sum())
        per_model = ks.groupby("model_id").size()
        copies = int(ks["kernel_type"].str.startswith("copy").sum())
        rows.append([f"`{s.scenario_id}`", s.gpu or "-", s.precision, n_models,
                     f"{per_model.median():.0f}" if len(per_model) else "-", len(ks), copies])
    text = ("GPU scenarios run the fp32 `.tflite` fully delegated to LiteRT's GPU accelerator (WebGPU over "
            "Vulkan; on the host Mesa's software driver lavapipe, so absolute times are emulated while kernel "
            "selection and fusion are the real backend's); the precision is the GPU's compute precision. They "
            "have e2e and kernel records, no op records (LiteRT has no profiler for this accelerator). A kernel "
            "row is one GPU command of a run as the Vulkan timestamp layer saw it, timed by GPU timestamps: "
            "`kernel_type` = its kind plus fused operations (`conv+bias+clamp`), `config` = the layer's "
            "identity of it (`kind` dispatch or copy, `shader`, `groups`, `local_size`, `program`). "
            "Copies (`kernel_type` `copy`) are the read-back of the outputs.\n\n"
            + markdown_table(rows, ["scenario", "GPU", "compute precision", "models", "kernels per model (median)",
                                    "kernel rows", "copies"]))
    fname = plot_gpu_kernel_kinds(ds, out) if out is not None else None
    if fname:
        text += (f"\n\n![{fname}]({fname})\n\nGPU kernel time by kernel kind (the `kernel_type` before its "
                 "first `+`; mean over models of each kind's share of the summed kernel time), per GPU scenario.")
    return "GPU scenarios", text


# ---------------------------------------------------------------- transformers
def role_frame(ds: Dataset) -> pd.DataFrame:
    """The timed op and kernel rows of transformer networks with the role of their IR node
    (``generators.roles``): columns ``model_id``, ``scenario_id``, ``label`` (the scenario id,
    `` kernels`` appended for kernel rows), ``role``, ``latency_ms``. A pair counts when one of
    its ops is attention; its kernels count when every timed kernel names its op (the assembler
    aligned the executed XNNPACK operators to the deduced ones)."""
    from generators.roles import node_role

    keys = ["model_id", "scenario_id"]
    cols = [*keys, "label", "role", "latency_ms"]
    named = ds.ops[ds.ops["node"].notna()]
    if named.empty:
        return pd.DataFrame(columns=cols)
    named = named.assign(role=named["node"].map(node_role))
    pairs = named.loc[named["role"] == "attention", keys].drop_duplicates()
    named = named.merge(pairs, on=keys)
    o = named[named["latency_ms"].notna()]
    parts = [o.assign(label=o["scenario_id"])[cols]]
    k = ds.kernels[ds.kernels["latency_ms"].notna()].merge(pairs, on=keys)
    if len(k):
        unnamed = k.loc[k["op_index"].isna(), keys].drop_duplicates().assign(unnamed=True)
        k = k.merge(unnamed, on=keys, how="left")
        k = k[k["unnamed"].isna()].merge(named[[*keys, "op_index", "role"]], on=[*keys, "op_index"])
        parts.append(k.assign(label=k["scenario_id"] + " kernels")[cols])
    return pd.concat(parts, ignore_index=True)


def transformers_section(ds: Dataset, out: Path | None) -> tuple[str, str] | None:
    """The card's section on transformer networks: the share of op and kernel time in attention,
    MLP, norm and the rest, and the e2e minus sum-of-ops gap, per scenario (its figure drawn into
    ``out``); None without op rows of transformer networks."""
    from generators.roles import ROLES

    fname = "transformer_roles.png"
    rf = role_frame(ds)
    if rf.empty:
        if out is not None:
            (out / fname).unlink(missing_ok=True)  # a stale figure of an earlier assembly
        return None
    shares = mean_shares(rf.rename(columns={"scenario_id": "sid", "label": "scenario_id"}), rf["role"])
    shares = shares.reindex(columns=[r for r in ROLES if r in shares.columns]).sort_index()
    pairs = rf.groupby("label")["model_id"].nunique()
    gap = gap_frame(ds).merge(rf[["model_id", "scenario_id", "label"]].drop_duplicates(),
                                on=["model_id", "scenario_id", "label"])
    gap = (gap.assign(pct=100 * gap["gap_ms"] / gap["reference_ms"]).groupby("label")["pct"].quantile(
        [0.25, 0.5, 0.75]).unstack() if len(gap) else pd.DataFrame())
    rows = []
    for label in shares.index:
        q = gap.loc[label] if label in gap.index else None
        g = "-" if q is None else f"{q[0.5]:+.1f}% ({q[0.25]:+.1f}..{q[0.75]:+.1f})"
        rows.append([f"`{label}`", int(pairs[label]), *[f"{shares.at[label, r]:.0%}" for r in shares.columns], g])
    text = ("Transformer networks (a pair counts when one of its ops is inside an attention block) split by "
            "the part of the network each op's IR node belongs to (`generators/roles.py`: `attention` is the qkv "
            "and projection layers, head reshapes and transposes, score matmuls and softmax, or a pooling token "
            "mixer; `mlp` the token MLP; `norm` every operator of a layer norm; `other` the stem, patch "
            "embedding, convolution stages, residual adds and head). Ops are the builtin TFLite kernels of the op "
            "process (XNNPACK off), `kernels` the XNNPACK operators of the kernel process, each attributed to the "
            "TFLite node it runs. An op knows its IR node from the name scope the exporter gives each node's "
            "operators, when the measured `.tflite` holds the exporter's planned operators (an int8 file's "
            "QUANTIZE / DEQUANTIZE have none); a kernel knows its op when the executed XNNPACK operators align "
            "with the ones deduced from the IR (fp32: the deduction does not cover int8 kernels). Shares are "
            "means over networks of each part's share of the summed time; the gap is the profiled process's "
            "end-to-end time minus the summed op (kernel) times, in % of it (median, IQR):\n\n"
            + markdown_table(rows, ["scenario", "networks", *shares.columns, "e2e - sum (median, IQR)"]))
    if out is not None:
        plot_share_bars(shares, out / fname, "mean share of summed op / kernel time per network")
        text += (f"\n\n![{fname}]({fname})\n\nTime of transformer networks by part (mean over networks of each "
                 "part's share), per scenario for ops and kernels.")
    return "Transformer networks", text


# ---------------------------------------------------------------- the summary (DVC metrics)
def _median(x: pd.Series) -> float | None:
    x = pd.to_numeric(x, errors="coerce").dropna()
    return round(float(x.median()), 6) if len(x) else None


def summary(ds: Dataset) -> dict[str, Any]:
    """The dataset's figures that runs are compared on: row counts, and per scenario the
    networks measured, the median latency and the median between-process spread (the noise)."""
    t = ds.tables()
    out: dict[str, Any] = {f"{n}_rows": int(len(t[n])) for n in TABLES}
    e = t["e2e"]
    per = {}
    for sid, g in e.groupby("scenario_id", sort=True):
        row = {"networks": int(g["model_id"].nunique()), "median_latency_ms": _median(g["latency_ms"])}
        if "between_cv" in g:
            row["median_between_cv"] = _median(g["between_cv"])
        per[sid] = {k: v for k, v in row.items() if v is not None}
    out["scenarios"] = per
    return out


def write_summary(ds: Dataset, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary(ds), indent=1, sort_keys=True) + "\n")
    return path


# ---------------------------------------------------------------- the card
def markdown_table(rows: list[list[Any]], header: list[str]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(out)


_table = markdown_table


LOADED_SHARE = 0.10  # the release protocol's limit (conf/measure/release.yaml, load.max_foreign_busy)


def _recorded(rows, column: str):
    """The rows' known values of a column that older releases lack (empty where absent)."""
    return rows[column].dropna() if column in rows.columns else rows.iloc[0:0, 0]


def _probe_cell(obs) -> str:
    """Median / max of the rows' speed-probe slow-down, or "-" where no row has it."""
    col = _recorded(obs, "probe_slowdown")
    return f"{col.median():.0%} / {col.max():.0%}" if len(col) else "-"


def _faults_cell(g) -> str:
    """Median page faults a run over the rows that count them, and how many do; "-" where none."""
    col = _recorded(g, "page_faults_per_run")
    return f"{col.median():,.0f} ({len(col):,})" if len(col) else "-"


def load_section(ds: Dataset) -> tuple[str, str] | None:
    """The machine's state while the suite measured, per scenario (pipelines/machine_load.py):
    a latency taken while other processes shared the pinned cores is the wrong scenario's."""
    e = ds.e2e[ds.e2e["dataset"] == "latbench"]
    if e.empty or "load_observed" not in e.columns:
        return None
    rows = []
    for sid, g in e.groupby("scenario_id", sort=True):
        obs = g[g["load_observed"].fillna(False).astype(bool)]
        freqs = sorted(set(obs["cpu_freq_khz"].dropna()))
        rows.append([sid, len(g), len(obs),
                     f"{obs['foreign_busy_frac'].median():.1%}" if len(obs) else "-",
                     f"{obs['foreign_busy_frac'].max():.1%}" if len(obs) else "-",
                     int((obs["foreign_busy_frac"] > LOADED_SHARE).sum()),
                     f"{obs['steal_frac'].max():.1%}" if len(obs) else "-",
                     f"{obs['loadavg_max'].max():.2f}" if len(obs) else "-",
                     _probe_cell(obs),
                     int(g["remeasured"].fillna(0).sum()),
                     "unknown" if freqs == ["unknown"] else (", ".join(freqs[:2]) + (" ..." if len(freqs) > 2 else "")
                                                              if freqs else "-"),
                     f"{g['between_cv'].median():.1%}" if g["between_cv"].notna().any() else "-",
                     _faults_cell(g)])
    body = ("Every measuring process records what the host did meanwhile: the share of the pinned cores' "
            "time other processes used (/proc/stat busy time minus the process's own CPU time), the "
            "hypervisor's steal, the load average and the cores' clock (scaling_cur_freq; `unknown` where "
            "the machine has no cpufreq). A process above the `measure.load` thresholds was measured again, "
            "and a pair still loaded was refused (`failures.csv`, kind `loaded`), never kept; a row over "
            f"{LOADED_SHARE:.0%} was kept only where the others' time stayed within two clock ticks per pinned "
            "core (/proc/stat's resolution: for a process of a few tens of milliseconds one tick reads as a "
            "large share, so the share is not judged below it) or where the check was off "
            "(`measure.load.check: false`, stated in its record's `load.check`): treat the latter as taken "
            "under load. Rows measured "
            "before this check have no load columns (`load observed` counts those that have). The speed "
            "probe (`pipelines/speed_probe.py`) times a fixed piece of work on each pinned core just before "
            "and after every process; `probe slow-down` is the worst over the fastest probe seen (median "
            "and max over pairs). It sees what the load figures cannot: this VM's episodes in which "
            "everything runs about 1.75x slower with no steal and no other process. A process above "
            "`measure.load.max_slowdown` was measured again like a loaded one; rows measured before the "
            "probe existed have it empty. The noise floor is the median spread between independent "
            "processes (`between_cv`). `page faults a run`: the median over the rows that record it "
            "(PyTorch's worker, on jemalloc: pipelines/runners/allocator.py) and how many rows do; "
            "PyTorch rows without it were measured on glibc's malloc, whose runs fault on fresh pages.\n\n"
            + _table(rows, ["scenario", "pairs", "load observed", "others' share (median)", "others' share (max)",
                            f"pairs over {LOADED_SHARE:.0%}", "steal (max)", "load avg (max)",
                            "probe slow-down (median / max)", "processes re-measured", "clock (kHz)",
                            "noise floor", "page faults a run (median; rows)"]))
    return "Machine load while measuring", body


# ---------------------------------------------------------------- frameworks on the same device
TREND = 0.3  # |rank correlation| below which the card reports no trend with FLOPs


def framework_title(framework: str, dataset: str) -> str:
    """How the card names a framework: the runner's title for the suite's own rows, the
    importer's name for public ones; a legacy runtime says so (``PyTorch (TorchScript, legacy)``)."""
    if dataset == "latbench":
        from pipelines.runners import runner_for

        runner = runner_for(framework, "cpu")
        title = runner.title if runner and runner.title else framework
    else:
        from .usc import FRAMEWORKS as USC_FRAMEWORKS

        title = USC_FRAMEWORKS.get(framework, framework) if dataset == "usc-mobile-ml-benchmark" else framework
    if framework in legacy_frameworks() and "legacy" not in title:
        title = f"{title[:-1]}, legacy)" if title.endswith(")") else f"{title} (legacy)"
    return title


def _fw(framework: str) -> str:
    """A framework in the section's tables: its id, ``(legacy)`` marked."""
    return f"`{framework}` (legacy)" if framework in legacy_frameworks() else f"`{framework}`"


def _spread(r: pd.Series) -> list[Any]:
    """Cells: networks, median ratio, interquartile range, share below 1."""
    return [len(r), f"{r.median():.2f}x", f"{r.quantile(0.25):.2f}-{r.quantile(0.75):.2f}", f"{(r < 1).mean():.0%}"]


def _ratio_rows(df: pd.DataFrame, by: str, overall: bool) -> list[list[Any]]:
    """Rows (device, point, B / A, group, spread cells) of the framework ratios per ``by`` group,
    plus an ``all`` row per pair when ``overall`` and the pair has several groups."""
    rows = []
    for (device, point, a, b), g in df.groupby(["device", "point", "a", "b"], sort=False):
        groups = [(k, gg["ratio"]) for k, gg in g.groupby(g[by].fillna("-"), sort=True)]
        if overall and len(groups) > 1:
            groups.append(("all", g["ratio"]))
        rows += [[device, point, f"{_fw(b)} / {_fw(a)}", f"{k}", *_spread(r)] for k, r in groups]
    return rows


def _op_vocabularies(ds: Dataset, points: list[tuple[str, str, dict[str, str]]]) -> str:
    """One clause per point: how many op types each framework's op records name, and how many
    all the frameworks with op records share."""
    parts = []
    for device, point, sids in points:
        kinds = {fw: set(ds.ops.loc[ds.ops["scenario_id"] == sid, "op_type"].dropna()) for fw, sid in sids.items()}
        recorded = [k for k in kinds.values() if k]
        shared = sorted(set.intersection(*recorded)) if len(recorded) >= 2 else []
        counts = ", ".join(f"{fw} {len(k)}" if k else f"{fw} none" for fw, k in kinds.items())
        parts.append(f"{device} {point}: op types recorded {counts}"
                     + (("; shared by all that record ops: none" if not shared else
                         f"; shared by all that record ops {len(shared)} ({', '.join(shared[:8])}"
                         f"{', ...' if len(shared) > 8 else ''})") if len(recorded) >= 2 else ""))
    return "; ".join(parts)


def _why(row: Any, title: str, outside: dict[str, tuple[float, str, int]]) -> str:
    """The one-line, computed account of where a runtime stands at a point."""
    line = (f"fastest on {row.wins} of {row.networks} networks ({row.wins / row.networks:.0%}), its time "
            f"{row.vs_best_other:.2f}x the fastest other runtime's (median)")
    if row.scenario_id in outside:
        share, what, n = outside[row.scenario_id]
        line += f"; {share:.0%} of its profiled run is outside its recorded {what} (median over {n} networks)"
    rho = row.size_trend
    if rho is None or pd.isna(rho):
        line += "; too few networks with FLOPs for a trend with size"
    elif rho >= TREND:
        line += (f"; its difference to the fastest other grows with network FLOPs (rank correlation {rho:.2f}): "
                 "a difference in kernel speed")
    elif rho <= -TREND:
        line += (f"; its difference to the fastest other is largest on small networks (rank correlation with FLOPs "
                 f"{rho:.2f}): a fixed cost per run or per operator in the slower runtime")
    else:
        line += f"; no clear trend of its difference with network FLOPs (rank correlation {rho:.2f})"
    return f"- {row.device} {row.point}, **{title}**: {line}."


def frameworks_section(ds: Dataset) -> tuple[str, str]:
    """The card's section comparing frameworks at the same CPU point of one device: per-network
    ratios by generator source and by the IR's dominant op, and where each runtime wins and why
    (computed); one line saying why when no two frameworks share a point or a network."""
    title = "Frameworks on the same device"
    points = framework_scenario_points(ds)
    if not points:
        return title, ("Not compared: no two frameworks measured one device at the same CPU point (accelerator, "
                       "cores, threads, precision).")
    df = framework_ratio_frame(ds)
    if df.empty:
        return title, (f"Not compared: {len(points)} CPU point(s) have two or more frameworks, but no network was "
                       "measured by two of them.")
    dataset_of = dict(zip(ds.scenarios["scenario_id"], ds.scenarios["dataset"]))
    named = sorted({(fw, dataset_of[sid]) for _, _, sids in points for fw, sid in sids.items()},
                   key=lambda t: (framework_rank(t[0]), t[1]))
    legend = [f"- {_fw(fw)}: {framework_title(fw, d)}" + (f" ({d})" if d != "latbench" else "")
              + (f". {legacy_frameworks()[fw]}." if fw in legacy_frameworks() else "") for fw, d in named]
    ir = ds.models.set_index("model_id")["ir"] if "ir" in ds.models.columns else pd.Series(dtype="object")
    ops = {m: dominant_op(ir.get(m)) for m in sorted(df["model_id"].unique())}
    df = df.assign(dominant_op=df["model_id"].map(ops))
    no_ir = int(df.loc[df["dominant_op"].isna(), "model_id"].nunique())
    text = [("Scenarios of one device that differ in the framework alone (same processor, accelerator, cores, "
             "threads, precision, batch and graph passes) are compared on the networks both measured: the ratio "
             "is B's end-to-end latency over A's (> 1: A faster); median and interquartile range over networks, "
             "and the share of networks on which B is faster. Frameworks:"), "", *legend, "",
            "By the networks' generator source:", "",
            _table(_ratio_rows(df, "source", overall=True),
                   ["device", "point", "B / A", "source", "networks", "median", "IQR", "B faster"]), "",
            ("Op records are not compared op type by op type: each runtime names its operators in its own "
             f"vocabulary ({_op_vocabularies(ds, points)}), and they come from separately profiled processes "
             "(TFLite's with its builtin kernels, not the XNNPACK delegate its end-to-end runs use). Networks are "
             "grouped instead by the op type carrying most of their multiply-accumulates in the IR (convolutions "
             "split as the ops table's `op_type`: conv2d, dwconv2d, group_conv2d; fc)"
             + (f"; {no_ir} network(s) without a stored IR are left out" if no_ir else "") + ":"), ""]
    grouped = df[df["dominant_op"].notna()]
    text += [_table(_ratio_rows(grouped, "dominant_op", overall=False),
                    ["device", "point", "B / A", "dominant op", "networks", "median", "IQR", "B faster"])
             if len(grouped) else "(no network with a stored IR)", ""]
    wins = framework_wins(ds)
    if wins.empty:
        text += ["Where each runtime wins: no network was measured by every framework of a point."]
        return title, "\n".join(text)
    outside = outside_shares(ds)
    rows = []
    for r in wins.itertuples():
        o = outside.get(r.scenario_id)
        rows.append([r.device, r.point, _fw(r.framework), f"{r.wins} of {r.networks} ({r.wins / r.networks:.0%})",
                     f"{r.vs_best_other:.2f}x", f"{o[0]:.0%} ({o[1]})" if o else "-",
                     "-" if r.size_trend is None or pd.isna(r.size_trend) else f"{r.size_trend:.2f}"])
    text += [("Where each runtime wins, over the networks every framework of the point measured: the share on "
              "which it is the fastest, its time over the fastest other runtime's (median), the share of its "
              "profiled run outside its recorded kernels or ops (median; the runtime's own time between "
              "operators), and the rank correlation of |log| of that ratio with the network's FLOPs (> 0: the "
              "difference grows with size; < 0: it is largest on small networks):"), "",
             _table(rows, ["device", "point", "framework", "fastest on", "time / fastest other", "outside recorded",
                           "difference vs FLOPs"]), ""]
    text += [_why(r, framework_title(r.framework, dataset_of[r.scenario_id]), outside) for r in wins.itertuples()]
    return title, "\n".join(text)


def write_card(ds: Dataset | str | Path, out_dir: str | Path | None = None, notes: list[str] | None = None,
               sections: list[tuple[str, str]] | None = None) -> Path:
    """Write ``DATASET.md`` and its figures into ``out_dir`` (default: the dataset's folder);
    ``sections`` (title, Markdown) go after the sources, ``notes`` into *Data notes*."""
    if not isinstance(ds, Dataset):
        ds = load_dataset(ds)
    out = Path(out_dir) if out_dir is not None else ds.path
    if out is None:
        raise ValueError("write_card: give out_dir for a dataset not loaded from a folder")
    out.mkdir(parents=True, exist_ok=True)
    lines = ["# latbench dataset", "",
             f"Schema version {SCHEMA_VERSION}. Written by `pipelines/dataset/card.py` from the tables in this "
             "folder; the schema and the loading API are documented in docs/dataset.md.", ""]

    # counts
    datasets = sorted(set().union(*[set(ds.tables()[n]["dataset"]) for n in TABLES]))
    lines += ["## Contents", ""]
    rows = [[f"`{n}`", len(ds.tables()[n])] + [int((ds.tables()[n]["dataset"] == d).sum()) for d in datasets]
            for n in TABLES]
    lines += [_table(rows, ["table", "rows", *[f"{d}" for d in datasets]]), ""]
    if len(ds.scenarios):
        # the processor (soc) is part of what a device is: the project's host VM has been an AMD
        # EPYC and an Intel Xeon, and each release holds one (pipelines/release.py)
        sc = ds.scenarios.assign(processor=ds.scenarios["soc"].fillna("-")).groupby(
            ["dataset", "device", "processor", "accelerator"], sort=True).agg(
            scenarios=("scenario_id", "size"),
            frameworks=("framework", lambda s: ", ".join(sorted(s.dropna().unique())) or "-"),
            precisions=("precision", lambda s: ", ".join(sorted(s.dropna().unique())) or "-")).reset_index()
        lines += ["Scenarios per device:", "", _table(sc.values.tolist(), list(sc.columns)), ""]
    if len(ds.models):
        fam = ds.models.groupby(["dataset", "source"], sort=True).agg(
            models=("model_id", "size"), families=("family", lambda s: s.nunique())).reset_index()
        lines += ["Models per source:", "", _table(fam.values.tolist(), list(fam.columns)), ""]

    # sources
    lines += ["## Sources and how they were measured", ""]
    for d in datasets:
        info = SOURCES_INFO.get(d, {"title": d, "how": "(no description registered)"})
        head = f"**{info['title']}** (`{d}`)"
        if info.get("url"):
            head += f", {info['url']}"
        if info.get("licence"):
            head += f", {info['licence']} licence"
        commits = sorted(ds.scenarios.loc[ds.scenarios["dataset"] == d, "source_commit"].dropna().unique())
        if commits:
            head += f", commit {', '.join(commits)}"
        lines += [head + ".", "", info["how"], ""]
    from .findings import findings_section

    for title, body in [*(sections or []), *filter(None, [load_section(ds), findings_section(ds)]),
                        frameworks_section(ds), *filter(None, [transformers_section(ds, out)])]:
        lines += [f"### {title}", "", body.rstrip(), ""]

    # figures
    lines += ["## Figures", ""]
    for fig in FIGURES:
        fname, text = fig(ds, out)
        if fname:
            lines += [f"![{fname}]({fname})", "", text, ""]
        else:
            lines += [f"- {fig.__name__.replace('plot_', '')}: not drawn: {text}.", ""]
    for name in FIGURE_FILES:
        p = out / name
        if p.exists() and f"]({name})" not in "\n".join(lines):
            p.unlink()
    cpu_ops = ds.ops.merge(ds.scenarios[["scenario_id", "accelerator"]], on="scenario_id")
    if not (cpu_ops["accelerator"] == "cpu").any():
        lines += ["- CPU e2e minus sum-of-ops gap: not drawn: no CPU op records in this dataset (they come from "
                  "the suite's own host/phone measurements).", ""]

    # notes
    if notes:
        lines += ["## Data notes", ""] + [f"- {n}" for n in notes] + [""]

    lines += ["## Schema", "", markdown(), ""]
    return write_text(out / CARD, "\n".join(lines).rstrip() + "\n")
