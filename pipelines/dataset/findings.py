"""The USC study's qualitative findings, checked on the suite's own measurements.

The USC study (Li, Paolieri, Golubchik, Sec. 3.1 and 4.2) draws four lessons from its phones;
the dataset card states, for the suite's own rows (``dataset == "latbench"``), whether this data
shows the same and with which figures:

1. multicore: on homogeneous cores more threads give a *sublinear* end-to-end speed-up
   (Insight 1, Fig. 2);
2. int8: quantization speeds most networks and operations up, but element-wise operations and
   padding get slower (2.55x / 2.60x on Snapdragon 855 / Exynos 9820; Insight 2, Figs. 4-5);
3. op-type breakdown: convolutions carry most of the time (the reason op-wise predictors model
   them first, Sec. 4.2);
4. the sum of the operations' times is consistently below the end-to-end latency (Fig. 9),
   the gap being the framework's overhead.

Each finding is a :class:`Finding` with the figure behind it and whether it holds here; where
the host cannot show a finding (no heterogeneous cores on a VM) or shows it differently, the
card says why. Nothing is drawn here: the card's figures (card.py) show the distributions.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .comparisons import (Pairs, cpu_scenarios, gap_frame, int8_pairs, multicore_pairs, ratio_frame, scenario_pairs,
                          thread_per_core)
from .load import Dataset


def _cpu_threads_per_core(ds: Dataset) -> pd.DataFrame:
    return thread_per_core(cpu_scenarios(ds))

# op types the USC study groups as element-wise (its Fig. 5 "Element-wise" and "Padding")
ELEMENTWISE = ("add", "mul", "sub", "div", "maximum", "minimum")
PADDING = ("pad",)
CONV_TYPES = ("conv2d", "dwconv2d", "group_conv2d")


@dataclass(frozen=True)
class Finding:
    topic: str
    usc: str  # what the USC study reports
    here: str  # what this data shows, with figures
    holds: bool | None  # None: this data cannot tell


def _own(ds: Dataset) -> Dataset:
    return ds.subset("latbench")


def _ratios(ds: Dataset, pairs: Pairs) -> list[tuple[str, pd.Series]]:
    """(``<device> <framework> <cores>``, per-network ratios) of the card's figure for ``pairs``."""
    df = ratio_frame(ds, pairs)
    return [(f"{group} {label}", g["ratio"]) for (group, label), g in df.groupby(["group", "label"], sort=True)]


def _q(r: pd.Series) -> str:
    return f"median {r.median():.2f}x (quartiles {r.quantile(0.25):.2f}-{r.quantile(0.75):.2f}, n = {len(r)})"


def multicore(ds: Dataset) -> Finding:
    usc = "sublinear end-to-end speed-up on homogeneous cores; heterogeneous combinations can be slower than one core"
    own = _own(ds)
    res = _ratios(own, multicore_pairs)
    if not res:
        return Finding("multicore", usc, "no pair of one-core and multicore scenarios measured", None)
    cpu = own.scenarios.dropna(subset=["core_count"])  # a GPU scenario has no core set
    count = dict(zip(cpu["cores"], cpu["core_count"].astype(int)))
    parts, sub = [], []
    for label, r in res:
        n = count[label.rsplit(" ", 1)[1]]
        parts.append(f"{label}: {_q(r)}, {(r < n).mean():.0%} below {n}x")
        sub.append(r.median() < n)
    here = ("speed-up over one core: " + "; ".join(parts) + ". The host's one cluster cannot show the "
            "heterogeneous-core slow-down; its two vCPUs may be hyperthreads of one physical core, which bounds "
            "the speed-up further than a phone's separate cores.")
    return Finding("multicore", usc, here, all(sub))


def int8(ds: Dataset) -> Finding:
    usc = ("int8 faster end to end in TFLite on every core set; element-wise ops and padding slower after "
           "quantization (2.55x / 2.60x on Snapdragon 855 / Exynos 9820)")
    own = _own(ds)
    res = _ratios(own, int8_pairs)
    if not res:
        return Finding("int8", usc, "no scenario measured at both fp32 and int8", None)
    parts = [f"{label}: fp32/int8 {_q(r)}, int8 faster for {(r > 1).mean():.0%} of networks" for label, r in res]
    ops = _op_ratio(own, [(num, den) for _, num, den, _ in scenario_pairs(own, int8_pairs)])
    slow = ""
    if ops is not None and len(ops):
        ew = ops[ops.index.isin(ELEMENTWISE + PADDING)]
        slow = (" Per op type (summed per network, fp32/int8, median over networks): "
                + ", ".join(f"{t} {v:.2f}x" for t, v in ops.sort_values().head(6).items())
                + (f"; element-wise and padding: {', '.join(f'{t} {v:.2f}x' for t, v in ew.items())}" if len(ew) else "")
                + ".")
    return Finding("int8", usc, "; ".join(parts) + "." + slow, all(r.median() > 1 for _, r in res))


def _op_ratio(ds: Dataset, pairs: list[tuple[str, str]]) -> pd.Series | None:
    """Per op type: median over networks of (summed time in scenario a / in scenario b)."""
    rows = []
    for a, b in pairs:
        oa = ds.ops[ds.ops["scenario_id"] == a].groupby(["model_id", "op_type"])["latency_ms"].sum()
        ob = ds.ops[ds.ops["scenario_id"] == b].groupby(["model_id", "op_type"])["latency_ms"].sum()
        j = pd.concat([oa.rename("a"), ob.rename("b")], axis=1).dropna()
        j = j[(j["a"] > 0) & (j["b"] > 0)]
        if len(j):
            rows.append((j["a"] / j["b"]).rename("ratio").reset_index())
    if not rows:
        return None
    r = pd.concat(rows, ignore_index=True)
    return r.groupby("op_type")["ratio"].median()


def breakdown(ds: Dataset) -> Finding:
    usc = "convolutions (regular and depthwise) carry most of a CNN's time"
    from .comparisons import framework_rank

    s = _cpu_threads_per_core(_own(ds))
    s = s[s["precision"] == "fp32"]
    ops = ds.ops[ds.ops["scenario_id"].isin(s["scenario_id"])]
    if ops.empty:
        return Finding("op types", usc, "no fp32 op records", None)
    # one framework's records: each runtime names its operators in its own vocabulary (the card's
    # framework section); the first of the registry's order with op records (TFLite's op types
    # are the IR's)
    fw_of = dict(zip(s["scenario_id"], s["framework"]))
    fw = min({fw_of[x] for x in ops["scenario_id"].unique()}, key=framework_rank)
    ops = ops[ops["scenario_id"].map(fw_of) == fw]
    share = ops.groupby("op_type")["latency_ms"].sum()
    share = (share / share.sum()).sort_values(ascending=False)
    conv = float(share[share.index.isin(CONV_TYPES + ("fc",))].sum())
    here = (f"share of summed fp32 op time ({fw}) over {ops['model_id'].nunique()} networks: "
            + ", ".join(f"{t} {v:.1%}" for t, v in share.head(6).items())
            + f"; convolutions and FC together {conv:.1%}.")
    return Finding("op types", usc, here, conv > 0.5)


def op_gap(ds: Dataset) -> Finding:
    usc = "the sum of operation times is consistently below the end-to-end latency (framework overhead)"
    s = _cpu_threads_per_core(_own(ds))
    g = gap_frame(ds)
    g = g[g["scenario_id"].isin(s["scenario_id"])]
    if g.empty:
        return Finding("e2e minus sum of ops", usc, "no op records with an end-to-end time", None)
    parts, holds = [], []
    for label, gg in g.groupby("label", sort=True):
        rel = gg["gap_ms"] / gg["reference_ms"]
        parts.append(f"{label}: {rel.median():.1%} of the end-to-end time (median; "
                     f"positive for {(gg['gap_ms'] > 0).mean():.0%} of {len(gg)} networks)")
        holds.append((gg["gap_ms"] > 0).mean() >= 0.9)
    here = ("; ".join(parts) + ". The reference is the end-to-end time of the same profiled process (op mode "
            "runs the builtin kernels, kernel mode XNNPACK; ExecuTorch's kernel process records its portable "
            "operators too, and its gap, kernels only, holds their time), so the gap is the runtime's own time "
            "between operators, not the difference between two backends.")
    return Finding("e2e minus sum of ops", usc, here, all(holds))


FINDINGS = (int8, multicore, breakdown, op_gap)


def findings(ds: Dataset) -> list[Finding]:
    return [f(ds) for f in FINDINGS]


def findings_section(ds: Dataset) -> tuple[str, str] | None:
    """The card's section: one row per finding (None when the dataset has none of the suite's rows)."""
    if not (ds.e2e["dataset"] == "latbench").any():
        return None
    mark = {True: "yes", False: "no", None: "cannot tell"}
    lines = ["The USC study's qualitative findings (Sec. 3.1, 4.2), checked on this dataset's own CPU "
             "scenarios (threads = cores):", ""]
    for f in findings(ds):
        lines += [f"- **{f.topic}** (holds here: {mark[f.holds]}). USC: {f.usc}. Here: {f.here}"]
    return "Findings: the USC study on this data", "\n".join(lines)
