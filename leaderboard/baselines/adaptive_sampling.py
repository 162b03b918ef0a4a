"""nn-Meter's adaptive data sampling (MobiSys'21, Sec. 5.2, Algorithm 2), measured on a device.

To train a kernel's latency predictor nn-Meter does not sample the configuration space
uniformly. It

1. samples ``N`` configurations from a *prior* distribution, the distribution of each
   configuration dimension over the kernels of a model zoo (line 11), here the kernels of the
   project's twelve nn-Meter zoo families (``generators/zoo``: references and variants) found
   with the fusion rules (:class:`Prior`);
2. fits the predictor and tests it on a test set ``TD`` of configurations that real networks
   use (the zoo's own kernel configurations; 20% of every newly sampled batch is moved into
   ``TD`` as well, "to avoid overfitting") (lines 12-14);
3. while the error on ``TD`` is above the threshold ``e`` (lines 16-23): picks the test points
   with the largest prediction error and samples ``M`` new configurations around each, keeping
   HW, K and S and drawing the channel numbers from ``[0.4 C, 1.2 C]`` (:func:`fine_grained`,
   lines 1-8), measures them and refits.

Each configuration is measured as a tiny network holding just that kernel
(:func:`kernel_graph`: conv+bn+relu for a conv kernel, etc.), exported to TFLite and timed end
to end on a device (:class:`DeviceKernelMeasurer`, default: the host, one pinned core, one
thread). The result is a table of :data:`.nnmeter_kernelwise.DESC_COLUMNS` + ``latency_ms``
that :class:`.nnmeter_kernelwise.NnMeterPredictor` trains on (``training="samples"``).

:func:`uniform_sample` is the comparison nn-Meter makes in Sec. 7.3 (random sampling over the
configuration ranges). Measuring is a parameter (a function from a description table to ms),
so the algorithm itself is independent of where the kernels run.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from .nnmeter_kernelwise import DESC_COLUMNS, features_of, graph_kernels, load_rules_for, with_costs

Measure = Callable[[pd.DataFrame], np.ndarray]

#: Configuration dimensions nn-Meter samples per kernel type (the others follow from them).
DIMENSIONS: dict[str, tuple[str, ...]] = {
    "conv": ("hw", "k", "s", "cin", "cout"),
    "dwconv": ("hw", "k", "s", "cin"),
    "fc": ("cin", "cout"),
    "maxpool": ("hw", "k", "s", "cin"),
    "avgpool": ("hw", "k", "s", "cin"),
}
CHANNEL_RANGE = (0.4, 1.2)  # fine-grained sampling range around a channel number (Algorithm 2, line 3)


# ---------------------------------------------------------------- single-kernel networks
def _complete(row: dict[str, Any]) -> dict[str, Any]:
    """Fill the dependent columns of a sampled configuration (out_hw, groups, ...)."""
    t = row["kernel_type"]
    r = {c: row.get(c, 1) for c in DESC_COLUMNS}
    r["kernel_type"] = t
    for c in DESC_COLUMNS[1:]:
        r[c] = int(r[c])
    if t == "dwconv":
        r["cout"], r["groups"] = r["cin"], r["cin"]
    elif t in ("maxpool", "avgpool"):
        r["cout"], r["groups"] = r["cin"], 1
    elif t == "fc":
        r["hw"] = r["out_hw"] = r["k"] = r["s"] = r["groups"] = 1
    else:
        r["groups"] = 1
    if t in ("conv", "dwconv", "maxpool", "avgpool"):
        # padding k // 2 (what kernel_graph builds): 'same' for the odd kernels the zoo uses
        r["out_hw"] = (r["hw"] + 2 * (r["k"] // 2) - r["k"]) // r["s"] + 1
    r["n_inputs"] = 1
    return r


def kernel_graph(desc: dict[str, Any]) -> Any:
    """A network holding only the kernel ``desc`` describes (nn-Meter measures kernels this way)."""
    from generators.ir import Graph

    d = _complete(desc)
    t = d["kernel_type"]
    g = Graph(name=f"kernel-{t}", source="adaptive-sampling", meta={"kernel": d})
    if t == "fc":
        x = g.input([1, d["cin"]])
        y = g.add("fc", x, out_features=d["cout"])
        return g.set_outputs(y)
    x = g.input([1, d["cin"], d["hw"], d["hw"]])
    if t in ("conv", "dwconv"):
        y = g.add("conv2d", x, out_channels=d["cout"], kernel=d["k"], stride=d["s"], padding=d["k"] // 2,
                  groups=d["groups"], bias=False)
        y = g.add("relu", g.add("batchnorm", y))
    elif t in ("maxpool", "avgpool"):
        y = g.add(t, x, kernel=d["k"], stride=d["s"], padding=d["k"] // 2)
    else:
        raise ValueError(f"kernel_graph: no single-kernel network for kernel type {t!r} "
                         f"(known: {', '.join(DIMENSIONS)})")
    return g.set_outputs(y)


class DeviceKernelMeasurer:
    """Measures kernel descriptions on a device: each becomes a single-kernel network, exported
    to TFLite fp32 under ``workdir`` (reused when it exists) and run end to end in a fresh
    pinned process (``runs`` timed runs after ``warmup``), the median run being that pass's
    time. The batch is measured ``repeats`` times, pass after pass, and each kernel gets the
    median over passes, in ms: on a shared machine a burst of other work slows every process
    for seconds at a time (kernels in a row come out many times slower), and passes spread over time
    rarely all meet one. Records are kept beside each model; the models themselves are deleted
    after measuring unless ``keep_models`` (a large conv's .tflite is 100 MB: a few hundred
    samples would fill gigabytes)."""

    def __init__(self, workdir: str | Path, runs: int = 20, warmup: int = 3, repeats: int = 1,
                 cpus: tuple[int, ...] = (0,), device: dict | None = None, keep_models: bool = False):
        self.workdir = Path(workdir)
        self.keep_models = keep_models
        self.runs, self.warmup, self.repeats, self.cpus = runs, warmup, repeats, tuple(cpus)
        self.device_cfg = dict(device or {"kind": "host", "name": "host"})
        self.measured = 0  # numbers the records files

    def __call__(self, desc: pd.DataFrame) -> np.ndarray:
        from generators.export.tflite import export_tflite
        from pipelines.devices import make_device
        from pipelines.scenarios import Scenario

        dev = make_device(self.device_cfg)
        scenario = Scenario(self.device_cfg.get("name", "host"), "tflite", "cpu", "fp32", cores="1large",
                            cpus=self.cpus, threads=1)
        models = []
        for row in desc.to_dict("records"):
            g = kernel_graph(row)
            model = self.workdir / f"{row['kernel_type']}-{g.model_id}.tflite"
            if not model.is_file():
                export_tflite(g, model)
            models.append(model)
        times = np.empty((self.repeats, len(models)))
        for r in range(self.repeats):
            for i, model in enumerate(models):
                self.measured += 1
                run = dev.run("tflite", model, scenario=scenario, mode="e2e", warmup=self.warmup, runs=self.runs,
                              records_path=model.with_name(f"{model.stem}.{self.measured}.records.jsonl"))
                times[r, i] = statistics.median(run.durations_ns()) / 1e6
        if not self.keep_models:
            for model in set(models):
                model.unlink(missing_ok=True)
        return np.median(times, axis=0)


# ---------------------------------------------------------------- the prior (model zoo)
@dataclass
class Prior:
    """Kernel configurations of one type seen in a model zoo: their marginal distributions
    (what Algorithm 2 samples from) and the configurations themselves (the test set)."""

    kernel_type: str
    configs: pd.DataFrame  # DESC_COLUMNS, one row per distinct zoo kernel configuration
    counts: np.ndarray  # how often each configuration occurs in the zoo

    @classmethod
    def from_graphs(cls, graphs: list, kernel_type: str, rules: Any = "auto") -> "Prior":
        rules = load_rules_for(rules) if isinstance(rules, (str, Path)) else rules
        frames = [graph_kernels(g, rules) for g in graphs]
        k = pd.concat(frames, ignore_index=True)
        k = k[k["kernel_type"] == kernel_type]
        if k.empty:
            raise ValueError(f"prior: no {kernel_type!r} kernel in the {len(graphs)} given networks")
        grouped = k.groupby(list(DESC_COLUMNS), sort=True).size()
        return cls(kernel_type, grouped.index.to_frame(index=False), grouped.to_numpy())

    @classmethod
    def from_zoo(cls, kernel_type: str, variants_per_family: int = 3, seed: int = 0, rules: Any = "auto",
                 families: list[str] | None = None) -> "Prior":
        """The prior of nn-Meter's zoo families (reference + ``variants_per_family`` variants each)."""
        from generators.zoo import NNMETER_FAMILIES, reference, variant

        graphs = []
        for fam in families or NNMETER_FAMILIES:
            graphs.append(reference(fam))
            graphs += [variant(fam, seed, i) for i in range(variants_per_family)]
        return cls.from_graphs(graphs, kernel_type, rules)

    def dims(self) -> tuple[str, ...]:
        return DIMENSIONS.get(self.kernel_type, ("hw", "cin"))

    def limits(self) -> dict[str, float]:
        """The prior's boundary: the largest MACs, weights and memory of a zoo kernel of this type."""
        c = with_costs(self.configs)
        return {k: float(c[k].max()) for k in ("flops", "params", "memory")}

    def within(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows inside the boundary. Independent draws can combine a 224x224 input with 2048
        channels (a kernel that takes seconds per run) or an 11x11 window with 2048 x 2048
        channels (2 GB of weights, more than a .tflite file holds): no zoo network has those."""
        if not rows:
            return rows
        c = with_costs(pd.DataFrame(rows, columns=list(DESC_COLUMNS)))
        ok = np.ones(len(rows), dtype=bool)
        for k, v in self.limits().items():
            ok &= c[k].to_numpy() <= v
        return [r for r, keep in zip(rows, ok) if keep]

    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """``n`` configurations, each dimension drawn from its zoo distribution (weighted by
        occurrence) independently, as nn-Meter's "possibility distribution of each dimension",
        keeping those within the zoo's largest kernel (the prior's boundary, :meth:`limits`)."""
        w = self.counts / self.counts.sum()
        rows: list[dict[str, Any]] = []
        for _ in range(100):
            cols = {d: self.configs[d].to_numpy()[rng.choice(len(self.configs), size=n, p=w)] for d in self.dims()}
            draw = [_complete({"kernel_type": self.kernel_type, **{d: int(cols[d][i]) for d in cols}})
                    for i in range(n)]
            rows += self.within(draw)
            if len(rows) >= n:
                break
        return pd.DataFrame(rows[:n], columns=list(DESC_COLUMNS))

    def test_configs(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """Up to ``n`` distinct configurations real zoo networks use (nn-Meter's initial TD)."""
        idx = rng.choice(len(self.configs), size=min(n, len(self.configs)), replace=False)
        rows = [_complete(r) for r in self.configs.iloc[np.sort(idx)].to_dict("records")]
        return pd.DataFrame(rows, columns=list(DESC_COLUMNS))

    def bounds(self) -> dict[str, tuple[int, int]]:
        return {d: (int(self.configs[d].min()), int(self.configs[d].max())) for d in self.dims()}


def uniform_sample(prior: Prior, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Random sampling (nn-Meter Sec. 7.3's comparison): each dimension uniform over the zoo's
    range (kernel sizes and strides over the values the zoo uses), within the same largest-kernel
    boundary as :meth:`Prior.sample` (without it most draws are huge kernels)."""
    rows: list[dict[str, Any]] = []
    while len(rows) < n:
        r: dict[str, Any] = {"kernel_type": prior.kernel_type}
        for d, (lo, hi) in prior.bounds().items():
            r[d] = int(rng.choice(np.unique(prior.configs[d]))) if d in ("k", "s") else int(rng.integers(lo, hi + 1))
        rows += prior.within([_complete(r)])
    return pd.DataFrame(rows, columns=list(DESC_COLUMNS))


def fine_grained(points: pd.DataFrame, m: int, rng: np.random.Generator) -> pd.DataFrame:
    """Algorithm 2, FineGrainedSample: ``m`` new configurations per point, HW, K and S fixed,
    every channel number drawn uniformly from ``[0.4 C, 1.2 C]`` (at least 1)."""
    lo, hi = CHANNEL_RANGE
    rows = []
    for p in points.to_dict("records"):
        for _ in range(m):
            r = dict(p)
            for c in ("cin", "cout"):
                a, b = max(1, int(np.floor(lo * p[c]))), max(1, int(np.ceil(hi * p[c])))
                r[c] = int(rng.integers(a, b + 1))
            if p["kernel_type"] in ("dwconv", "maxpool", "avgpool"):
                r["cout"] = r["cin"]  # one channel number: the input's
            rows.append(_complete(r))
    return pd.DataFrame(rows, columns=list(DESC_COLUMNS))


# ---------------------------------------------------------------- the kernel predictor and its error
def fit_kernel_forest(desc: pd.DataFrame, y: np.ndarray, n_estimators: int = 50, seed: int = 0):
    """The per-kernel-type forest of the predictor (same features, log target), on its own."""
    from sklearn.ensemble import RandomForestRegressor

    from .trees import ForestOpModel

    t = str(desc["kernel_type"].iloc[0])
    F = with_costs(desc.reset_index(drop=True))[list(features_of(t))].to_numpy(float)
    rf = RandomForestRegressor(n_estimators=n_estimators, random_state=seed, n_jobs=1).fit(F, np.log(y))
    forest = ForestOpModel.from_sklearn(rf)
    return lambda d: forest.predict(with_costs(d.reset_index(drop=True))[list(features_of(t))].to_numpy(float))


def relative_errors(predict: Callable[[pd.DataFrame], np.ndarray], desc: pd.DataFrame, y: np.ndarray) -> np.ndarray:
    return np.abs(predict(desc) - y) / y


def rmspe(err: np.ndarray) -> float:
    """Root mean square percentage error (nn-Meter's Table 9 metric), in %."""
    return float(100 * np.sqrt(np.mean(err ** 2)))


# ---------------------------------------------------------------- Algorithm 2
@dataclass
class SamplingResult:
    """All measured samples (``split`` train|test, ``stage`` prior|test|fine, ``iteration``) and
    the error on the test set after each iteration."""

    samples: pd.DataFrame
    history: list[dict[str, Any]] = field(default_factory=list)

    def train(self) -> pd.DataFrame:
        return self.samples[self.samples["split"] == "train"].reset_index(drop=True)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.train().to_parquet(path, index=False)
        return path


def _measured(desc: pd.DataFrame, measure: Measure, stage: str, iteration: int, rng: np.random.Generator,
              test_fraction: float) -> pd.DataFrame:
    d = desc.copy()
    d["latency_ms"] = np.asarray(measure(desc), dtype=float)
    d["stage"], d["iteration"] = stage, iteration
    n_test = int(round(test_fraction * len(d)))
    split = np.array(["train"] * len(d), dtype=object)
    split[rng.permutation(len(d))[:n_test]] = "test"  # line 13/21: 20% of new data join TD
    d["split"] = split
    return d


def adaptive_sample(prior: Prior, measure: Measure, n_initial: int = 100, n_test: int = 50, m: int = 10,
                    error_threshold: float = 10.0, max_iterations: int = 5, n_worst: int = 5,
                    test_fraction: float = 0.2, n_estimators: int = 50, seed: int = 0,
                    progress: Callable[[str], None] | None = None) -> SamplingResult:
    """Algorithm 2 for one kernel type: prior sampling, then fine-grained sampling around the
    ``n_worst`` test points with the largest error until RMSPE on the test set <= ``error_threshold``
    (%) or ``max_iterations`` rounds. Returns every measured sample and the error history."""
    rng = np.random.default_rng(seed)
    td = prior.test_configs(n_test, rng)
    parts = [_measured(td, measure, "test", 0, rng, 1.0)]
    parts.append(_measured(prior.sample(n_initial, rng), measure, "prior", 0, rng, test_fraction))
    result = SamplingResult(pd.concat(parts, ignore_index=True))
    for it in range(max_iterations + 1):
        s = result.samples
        train, test = s[s["split"] == "train"], s[s["split"] == "test"]
        f = fit_kernel_forest(train[list(DESC_COLUMNS)], train["latency_ms"].to_numpy(), n_estimators, seed)
        err = relative_errors(f, test[list(DESC_COLUMNS)], test["latency_ms"].to_numpy())
        e = rmspe(err)
        result.history.append({"iteration": it, "n_train": len(train), "n_test": len(test), "rmspe": e,
                               "acc10": float(np.mean(err <= 0.10) * 100)})
        if progress:
            progress(f"iteration {it}: {len(train)} train, {len(test)} test, RMSPE {e:.1f}%")
        if e <= error_threshold or it == max_iterations:
            break
        worst = test.iloc[np.argsort(-err)[:n_worst]][list(DESC_COLUMNS)]  # line 17
        new = _measured(fine_grained(worst, m, rng), measure, "fine", it + 1, rng, test_fraction)
        result.samples = pd.concat([s, new], ignore_index=True)
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m leaderboard.baselines.adaptive_sampling conv --out kernels-conv.parquet``:
    Algorithm 2 for one kernel type on this host; writes the training samples for
    ``NnMeterPredictor(training="samples", kernel_samples=...)`` and prints the error history."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m leaderboard.baselines.adaptive_sampling", description=main.__doc__)
    ap.add_argument("kernel_type", choices=sorted(DIMENSIONS))
    ap.add_argument("--out", required=True, help="parquet file of the measured training samples")
    ap.add_argument("--workdir", default=None, help="where single-kernel models and records go (default: beside --out)")
    ap.add_argument("--initial", type=int, default=100, help="N, prior samples")
    ap.add_argument("--test", type=int, default=50, help="initial test configurations from the zoo")
    ap.add_argument("--m", type=int, default=10, help="M, fine-grained samples per inaccurate point")
    ap.add_argument("--worst", type=int, default=5, help="inaccurate test points refined per iteration")
    ap.add_argument("--threshold", type=float, default=10.0, help="e, target RMSPE in %%")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    out = Path(a.out)
    workdir = Path(a.workdir) if a.workdir else out.with_suffix("")
    prior = Prior.from_zoo(a.kernel_type, seed=a.seed)
    measure = DeviceKernelMeasurer(workdir, runs=a.runs, repeats=a.repeats)
    res = adaptive_sample(prior, measure, n_initial=a.initial, n_test=a.test, m=a.m, n_worst=a.worst,
                          error_threshold=a.threshold, max_iterations=a.iterations, seed=a.seed, progress=print)
    res.save(out)
    print(f"{len(res.train())} training samples -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["CHANNEL_RANGE", "DIMENSIONS", "DeviceKernelMeasurer", "Prior", "SamplingResult", "adaptive_sample",
           "fine_grained", "fit_kernel_forest", "kernel_graph", "relative_errors", "rmspe", "uniform_sample"]
