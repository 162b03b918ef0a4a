"""Statistics of latency samples: summaries, a distribution-free CI of the median, stopping rules.

Samples are integer nanoseconds (as the runtime records them); summaries are milliseconds.

- ``summarize(samples_ns, level=0.95)``: n, median, mean, std (ddof=1), p10, p90 (linear
  interpolation), cv (std / mean), min, max, and ``ci_low``/``ci_high``: the order-statistic
  confidence interval of the median. With B ~ Binomial(n, 1/2), ``j`` is the largest integer with
  P(B <= j) <= (1 - level) / 2 and the interval is [x_(j+1), x_(n-j)] (1-based order statistics);
  its coverage, 1 - 2 P(B <= j) >= level, holds for any continuous distribution and is reported
  as ``ci_coverage``. Too few samples for the level (n < 6 at 95%) give NaN bounds.
  ``ci_rel_width`` = (ci_high - ci_low) / median.
- Stopping rules, one interface (``policy``, ``params()``, ``stop_reason(samples)``,
  ``should_stop(samples)``, ``next_batch(n_done)``, ``collect(measure)``, ``record(samples)``):
  ``FixedRuns(runs)`` (benchmark_model's ``--num_runs``) and
  ``AdaptiveStopper(rel_width=0.02, level=0.95, min_runs=10, max_runs=500, batch=10)``, which stops
  once the median's CI is narrower than ``rel_width`` of the median, or at ``max_runs``. ``record``
  says which policy ran, with its parameters, the runs done and why it stopped.
- ``pooled_summary(per_process_samples)``: several processes of one (model, scenario). On shared
  machines the median drifts between processes by more than it varies within one
  (../shared/NOTES.md), so the record keeps both: the pooled summary of all samples, the median of
  the per-process medians (the headline), the between-process spread (relative range and CV of the
  per-process medians) and the within-process spread (median of the per-process CVs).
- ``median_interval(per_process_samples, level=0.95)``: an interval of the median latency however
  few processes ran (``latbench profile`` prints it): the order-statistic CI of the per-process
  medians when there are enough of them for ``level`` (6 at 95%: the record's
  ``medians_ci_*``); with 2 to 5, a Student t-interval of the mean of the per-process medians
  (mean +- t(level, k-1) s / sqrt(k), its lower bound clipped at 0); with one process, a
  percentile bootstrap of the median over that process's runs, which covers the within-process
  noise only (the drift between processes is not in it). ``kind`` says which one it is.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from scipy.stats import binom
from scipy.stats import t as student_t

from foundation.configs import check_fields, plain

NS_PER_MS = 1e6
BOOTSTRAP_RESAMPLES = 2000  # median_interval's resamples of a single process's runs


def _as_ms(samples_ns: Sequence[float]) -> np.ndarray:
    a = np.asarray(samples_ns, dtype=np.float64).ravel()
    if a.size and not np.all(np.isfinite(a)):
        raise ValueError("samples must be finite numbers (nanoseconds)")
    return a / NS_PER_MS


def median_ci_ranks(n: int, level: float = 0.95) -> tuple[int, int, float] | None:
    """0-based indices ``(lo, hi)`` into the sorted sample and the exact coverage of
    [x[lo], x[hi]] as a CI of the median, or None when ``n`` is too small for ``level``."""
    if not 0 < level < 1:
        raise ValueError(f"level: must be in (0, 1), got {level}")
    if n < 1:
        return None
    alpha2 = (1.0 - level) / 2.0
    j = int(binom.ppf(alpha2, n, 0.5))
    while j >= 0 and binom.cdf(j, n, 0.5) > alpha2:
        j -= 1
    if j < 0:
        return None
    coverage = 1.0 - 2.0 * float(binom.cdf(j, n, 0.5))
    return j, n - j - 1, coverage


def median_ci(samples: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """``(low, high, coverage)``: distribution-free CI of the median, in the samples' unit."""
    x = np.sort(np.asarray(samples, dtype=np.float64).ravel())
    r = median_ci_ranks(x.size, level)
    if r is None:
        return math.nan, math.nan, math.nan
    lo, hi, cov = r
    return float(x[lo]), float(x[hi]), cov


def summarize(samples_ns: Sequence[float], level: float = 0.95) -> dict[str, float]:
    """Summary in ms of latency samples in ns (see the module doc)."""
    x = _as_ms(samples_ns)
    n = int(x.size)
    if n == 0:
        raise ValueError("summarize: no samples")
    median = float(np.median(x))
    mean = float(x.mean())
    std = float(x.std(ddof=1)) if n > 1 else 0.0
    lo, hi, cov = median_ci(x, level)
    return {
        "n": n,
        "median_ms": median,
        "mean_ms": mean,
        "std_ms": std,
        "p10_ms": float(np.percentile(x, 10)),
        "p90_ms": float(np.percentile(x, 90)),
        "cv": std / mean if mean > 0 else math.nan,
        "min_ms": float(x.min()),
        "max_ms": float(x.max()),
        "ci_level": float(level),
        "ci_low_ms": lo,
        "ci_high_ms": hi,
        "ci_coverage": cov,
        "ci_rel_width": (hi - lo) / median if median > 0 and not math.isnan(lo) else math.inf,
    }


# ---------------------------------------------------------------- stopping rules
class _Rule:
    policy = ""

    def params(self) -> dict[str, Any]:
        raise NotImplementedError

    def stop_reason(self, samples_ns: Sequence[float]) -> str | None:
        raise NotImplementedError

    def next_batch(self, n_done: int) -> int:
        raise NotImplementedError

    def should_stop(self, samples_ns: Sequence[float]) -> bool:
        return self.stop_reason(samples_ns) is not None

    def collect(self, measure: Callable[[int], Sequence[float]]) -> list[float]:
        """Call ``measure(k)`` (returns k samples in ns) until the rule stops; all samples."""
        samples: list[float] = []
        while not self.should_stop(samples):
            k = self.next_batch(len(samples))
            got = list(measure(k))
            if not got:
                raise RuntimeError(f"{self.policy}: measure({k}) returned no samples")
            samples.extend(got)
        return samples

    def record(self, samples_ns: Sequence[float]) -> dict[str, Any]:
        """What a measurement record stores about how many runs were made and why."""
        return {"policy": self.policy, "params": self.params(), "runs": len(samples_ns),
                "stop_reason": self.stop_reason(samples_ns)}


@dataclass
class FixedRuns(_Rule):
    """A fixed number of runs, like benchmark_model's ``--num_runs``."""

    runs: int = 50
    policy = "fixed"

    def __post_init__(self):
        check_fields(self)  # the types: the annotations (foundation.configs)
        if self.runs < 1:
            raise ValueError(f"runs: expected a positive integer, got {self.runs!r}")

    def params(self) -> dict[str, Any]:
        return {"runs": self.runs}

    def stop_reason(self, samples_ns: Sequence[float]) -> str | None:
        return "fixed_runs" if len(samples_ns) >= self.runs else None

    def next_batch(self, n_done: int) -> int:
        return max(self.runs - n_done, 0)


@dataclass
class AdaptiveStopper(_Rule):
    """Run in batches until the CI of the median is narrower than ``rel_width`` x median."""

    rel_width: float = 0.02
    level: float = 0.95
    min_runs: int = 10
    max_runs: int = 500
    batch: int = 10
    policy = "adaptive"

    def __post_init__(self):
        check_fields(self)  # the types: the annotations (foundation.configs)
        if not self.rel_width > 0:
            raise ValueError(f"rel_width: expected a positive number, got {self.rel_width!r}")
        if not 0 < self.level < 1:
            raise ValueError(f"level: expected a number in (0, 1), got {self.level!r}")
        for name in ("min_runs", "max_runs", "batch"):
            v = getattr(self, name)
            if v < 1:
                raise ValueError(f"{name}: expected a positive integer, got {v!r}")
        if self.max_runs < self.min_runs:
            raise ValueError(f"max_runs: {self.max_runs} is below min_runs {self.min_runs}")

    def params(self) -> dict[str, Any]:
        return {"rel_width": self.rel_width, "level": self.level, "min_runs": self.min_runs,
                "max_runs": self.max_runs, "batch": self.batch}

    def stop_reason(self, samples_ns: Sequence[float]) -> str | None:
        n = len(samples_ns)
        if n >= self.max_runs:
            return "max_runs"
        if n < self.min_runs:
            return None
        x = np.asarray(samples_ns, dtype=np.float64)
        lo, hi, _ = median_ci(x, self.level)
        med = float(np.median(x))
        if not math.isnan(lo) and med > 0 and (hi - lo) / med <= self.rel_width:
            return "ci_width"
        return None

    def next_batch(self, n_done: int) -> int:
        if n_done < self.min_runs:
            return self.min_runs - n_done
        return max(min(self.batch, self.max_runs - n_done), 0)


def make_stopper(cfg: Mapping[str, Any] | _Rule | None) -> _Rule:
    """A rule from config: ``{policy: fixed, runs: 50}`` or ``{policy: adaptive, rel_width: ...}``."""
    if isinstance(cfg, _Rule):
        return cfg
    if cfg is None:
        return AdaptiveStopper()
    cfg = dict(plain(cfg))
    policy = cfg.pop("policy", "adaptive")
    classes = {"fixed": FixedRuns, "adaptive": AdaptiveStopper}
    if policy not in classes:
        raise ValueError(f"policy: unknown stopping policy {policy!r} (known: {', '.join(classes)})")
    cls = classes[policy]
    known = list(cls.__dataclass_fields__)
    unknown = sorted(set(cfg) - set(known))
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown key for policy {policy} (known: {', '.join(known)})")
    return cls(**cfg)


# ---------------------------------------------------------------- several processes
def pooled_summary(per_process_samples: Sequence[Sequence[float]], level: float = 0.95) -> dict[str, Any]:
    """Summary of one (model, scenario) measured in several processes (samples in ns each)."""
    groups = [np.asarray(s, dtype=np.float64).ravel() for s in per_process_samples]
    groups = [g for g in groups if g.size]
    if not groups:
        raise ValueError("pooled_summary: no samples")
    per = [summarize(g, level) for g in groups]
    medians = np.array([p["median_ms"] for p in per])
    mom = float(np.median(medians))
    lo, hi, cov = median_ci(medians, level)
    return {
        "processes": len(groups),
        "n": int(sum(g.size for g in groups)),
        "median_of_medians_ms": mom,
        "process_medians_ms": medians.tolist(),
        "between_rel_range": float((medians.max() - medians.min()) / mom) if mom > 0 else math.nan,
        "between_cv": float(medians.std(ddof=1) / medians.mean()) if len(medians) > 1 else 0.0,
        "within_cv": float(np.median([p["cv"] for p in per])),
        "within_ci_rel_width": float(np.median([p["ci_rel_width"] for p in per])),
        "medians_ci_low_ms": lo,  # CI of the median across processes (NaN with < 6 at 95%)
        "medians_ci_high_ms": hi,
        "medians_ci_coverage": cov,
        "pooled": summarize(np.concatenate(groups), level),
        "per_process": per,
    }


def median_interval(per_process_samples: Sequence[Sequence[float]], level: float = 0.95,
                    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """An interval (ms) of the median latency of one (model, scenario) from its processes'
    samples (ns each), whatever their number (see the module doc): ``kind`` is
    ``order-statistic`` (across the process medians), ``t`` (over the process medians) or
    ``bootstrap`` (over the runs of a single process); ``processes``, ``runs``, ``level``,
    ``low_ms``, ``high_ms``. The bootstrap is seeded (``seed``): the same samples give the
    same interval."""
    groups = [_as_ms(s) for s in per_process_samples]
    groups = [g for g in groups if g.size]
    if not groups:
        raise ValueError("median_interval: no samples")
    medians = np.array([float(np.median(g)) for g in groups])
    k = len(groups)
    out: dict[str, Any] = {"processes": k, "runs": int(sum(g.size for g in groups)), "level": float(level)}
    if median_ci_ranks(k, level) is not None:
        lo, hi, _ = median_ci(medians, level)
        return {**out, "kind": "order-statistic", "low_ms": lo, "high_ms": hi}
    if k >= 2:
        half = float(student_t.ppf((1 + level) / 2, k - 1)) * float(medians.std(ddof=1)) / math.sqrt(k)
        mean = float(medians.mean())
        return {**out, "kind": "t", "low_ms": max(mean - half, 0.0), "high_ms": mean + half}
    x = groups[0]
    rng = np.random.default_rng(seed)
    boot = np.median(x[rng.integers(0, x.size, size=(resamples, x.size))], axis=1)
    alpha = (1 - level) / 2
    return {**out, "kind": "bootstrap", "low_ms": float(np.quantile(boot, alpha)),
            "high_ms": float(np.quantile(boot, 1 - alpha))}
