"""nnPerf's GPU/CPU clock synchronization (SenSys'23 section 3.2.2: Algorithm 1 and the
kernel injector's Eq. 2) as native/src/clocksync.c implements it, driven through
``pipelines.gpu.ClockSync`` on synthetic clock streams with a known truth, and on a real
GPU stream of lavapipe, whose GPU clock is CLOCK_MONOTONIC itself (so the raw GPU
timestamps are the ground truth of the mapping).

The synthetic tests need only the native build; the real-stream test skips, saying why,
when this machine has no Vulkan device (scripts/setup.sh installs lavapipe: docs/gpu.md).

What the pairs cannot tell: a pair's GPU stamp is late by the queue's wake-up delay, whose
mean is indistinguishable from the clock offset, so every mapped time is early by that
mean. The synthetic tests know it and compare against truth minus that mean; the real test
bounds it.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from pipelines import gpu
from pipelines.runners import litert as nr

JITTER = 10_000.0  # ns, scale of the half-normal queue wake-up delay
MEAN_DELAY = JITTER * np.sqrt(2 / np.pi)
BOUND = 15_000  # ns: the stated bound on |mapped - (true - mean delay)|


# ---------------------------------------------------------------- synthetic streams
def _host_times(n: int, seed: int, *, t0: int = 5_000_000_000_000, gap=(1_000_000, 19_000_000)) -> np.ndarray:
    """Host submit times: one command buffer every 1-19 ms (10 ms on average)."""
    rng = np.random.default_rng(seed)
    return t0 + np.cumsum(rng.integers(gap[0], gap[1], n)).astype(np.int64)


def _pairs(t: np.ndarray, clock: Callable[[np.ndarray], np.ndarray], *, seed: int, jitter: float = JITTER,
           outlier_share: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """GPU start stamps tau = clock(t) + delay, delay ~ |N(0, jitter)|; a share of pairs is
    stalled by 50-500 us more (a queue that was not woken at once)."""
    rng = np.random.default_rng(seed)
    delay = np.abs(rng.normal(0, jitter, len(t)))
    stalled = rng.random(len(t)) < outlier_share
    delay[stalled] += rng.uniform(50_000, 500_000, stalled.sum())
    return np.round(clock(t) + delay).astype(np.int64), stalled


def _replay(cs: gpu.ClockSync, t, tau, clock, *, kernel_after: int = 5_000_000) -> tuple[np.ndarray, np.ndarray]:
    """Online, as latbench-run: after each pair, map the GPU time of a kernel of that
    command buffer (``kernel_after`` ns later on the host) with the fit of that moment.
    Returns (accepted per pair, mapping error in ns against the truth minus the mean delay)."""
    accepted, err = np.zeros(len(t), bool), np.zeros(len(t))
    for i, (a, b) in enumerate(zip(t, tau)):
        accepted[i] = cs.observe(int(a), int(b))
        p = int(a) + kernel_after
        err[i] = cs.to_host(int(round(float(clock(np.array([p]))[0])))) - p + MEAN_DELAY
    return accepted, err


def _bootstrap(cs: gpu.ClockSync, t_first: int, clock, seed: int) -> float:
    """Eq. 2 on three injected pairs 0.3 ms apart just before the stream."""
    tb = t_first - np.array([3, 2, 1], dtype=np.int64) * 300_000
    taub, _ = _pairs(tb, clock, seed=seed, outlier_share=0.0)
    return cs.bootstrap(tb, taub)


@pytest.mark.parametrize("offset,drift", [(0.0, 0.0), (-3.7e9, -50e-6), (1.25e12, 50e-6)])
def test_long_stream_error_stays_bounded(native_built, offset, drift):
    """60 s of simulated time, 6000 pairs (k = 8), 10 us jitter, 10% stalled pairs, drift
    of +-50 ppm: after the first second every kernel maps within 15 us of the truth (minus
    the mean delay), the error at the end of the stream is no larger than at its start,
    the fitted slope is within 1e-6 of the true one, and the stalls are rejected.
    (The literal reading, slope from each window alone, reaches 114 us on these streams.)"""
    clock = lambda x: (1 + drift) * np.asarray(x, float) + offset  # noqa: E731
    t = _host_times(6000, seed=2)
    tau, stalled = _pairs(t, clock, seed=3)
    cs = gpu.ClockSync(k=8)
    sigma0 = _bootstrap(cs, int(t[0]), clock, seed=1)
    assert 1_000.0 <= sigma0 < 50_000.0
    accepted, err = _replay(cs, t, tau, clock)
    settled = (t - t[0]) > 1e9
    assert np.abs(err[settled]).max() < BOUND, f"max error {np.abs(err[settled]).max():.0f} ns"
    third = len(t) // 3
    first, last = np.abs(err[settled][:third]).max(), np.abs(err[-third:]).max()
    assert last <= first + 2_000, f"error grows with the stream: {first:.0f} -> {last:.0f} ns"
    assert abs(cs.a - (1 + drift)) < 1e-6, cs.a
    assert cs.a_se < 1e-7
    assert accepted[stalled & settled].mean() < 0.02, "queue stalls were not rejected"
    assert accepted[~stalled].mean() > 0.8, "too many clean pairs rejected"


def test_slope_follows_a_changing_drift(native_built):
    """The drift moves from +50 to -50 ppm over 120 s (a warming oscillator): the slope
    history forgets (10 s time constant): every kernel stays within the bound and the
    slope ends within 25 ppm of the drift of that moment, and below 1 (a forgetting
    least-squares slope lags about two time constants behind: 17 ppm at 0.83 ppm/s)."""
    t = _host_times(12000, seed=5)
    span = float(t[-1] - t[0])

    def clock(x):
        s = (np.asarray(x, float) - t[0]) / 1e9
        return np.asarray(x, float) + 1e9 * (50e-6 * s - 100e-6 * s * s / (2 * span / 1e9)) + 1.25e12

    tau, _ = _pairs(t, clock, seed=6)
    cs = gpu.ClockSync(k=8)
    _bootstrap(cs, int(t[0]), clock, seed=7)
    _, err = _replay(cs, t, tau, clock)
    settled = (t - t[0]) > 1e9
    assert np.abs(err[settled]).max() < BOUND, f"max error {np.abs(err[settled]).max():.0f} ns"
    assert abs(cs.a - (1 - 50e-6)) < 25e-6 and cs.a < 1 - 20e-6, cs.a


def test_recovers_from_a_step_of_the_offset(native_built):
    """The GPU clock steps by 200 us in the middle of a 40 s stream: every later pair is
    first an outlier against the stale fit, but sigma, renewed from the residuals about
    the fit, widens until the pairs are accepted, the next refit re-anchors the offset,
    and within two seconds the error is back under the bound (about 100 pairs: sigma
    opens once three quarters of the last 32 residuals are shifted, and at most doubles
    per period of k pairs)."""
    t = _host_times(4000, seed=8)
    mid = t[len(t) // 2]
    clock = lambda x: np.asarray(x, float) + 7e9 + np.where(np.asarray(x) > mid, 200_000, 0)  # noqa: E731
    tau, _ = _pairs(t, clock, seed=9)
    cs = gpu.ClockSync(k=8)
    _bootstrap(cs, int(t[0]), clock, seed=10)
    _, err = _replay(cs, t, tau, clock)
    before = ((t - t[0]) > 1e9) & (t < mid - 5_000_000)
    after = t > mid + 2e9
    assert np.abs(err[before]).max() < BOUND
    assert np.abs(err[after]).max() < BOUND, f"not recovered: {np.abs(err[after]).max():.0f} ns"


def test_slope_from_the_lower_envelope_shrugs_off_a_load_burst(native_built):
    """Other processes load the CPUs for the second half of a 20 s stream (a pair every
    1-5 ms): 70% of its pairs are 0-60 us later, most of them still within sigma. A slope
    fitted on every accepted pair tilts by more than 1e-6, ten times its own standard
    error; one fitted on the least-delayed pair of each 50 ms bin (the default) stays
    within 8e-7 of the truth and within three of its standard errors. (Replaying 66 real
    lavapipe streams, the envelope brought the worst |a - 1| from 1.3e-5 to 6.2e-6, and
    |a - 1| / a_se from 22 to 3.0: docs/gpu.md.)"""
    clock = lambda x: np.asarray(x, float) + 1.25e12  # noqa: E731
    t = _host_times(6000, seed=20, gap=(1_000_000, 5_000_000))
    tau, _ = _pairs(t, clock, seed=21)
    rng = np.random.default_rng(0)
    loaded = (t > t[len(t) // 2]) & (rng.random(len(t)) < 0.7)
    tau = tau + np.where(loaded, rng.uniform(0, 60_000, len(t)), 0).astype(np.int64)
    fits = {}
    for label, envelope in (("envelope", None), ("all pairs", 0.0)):
        cs = gpu.ClockSync(k=8, envelope_ns=envelope)
        _bootstrap(cs, int(t[0]), clock, seed=22)
        for a, b in zip(t, tau):
            cs.observe(int(a), int(b))
        fits[label] = (cs.a - 1, cs.a_se)
    drift, se = fits["all pairs"]
    assert abs(drift) > 1e-6 and abs(drift) > 10 * se, fits  # the stream does tilt a plain fit
    drift, se = fits["envelope"]
    assert abs(drift) < 8e-7 and abs(drift) < 3 * se, fits


def _late_in_stalls(seed: int, **sync) -> float:
    """A lavapipe-like stream (a pair every 1-5 ms, delays of 4 us plus |N(0, 2 us)|) whose
    first 0.6 s carry a fading CPU load (every pair 50 us late at first, 0 at 0.6 s: the
    envelope itself falls), then 300 ms in which every pair is a stall (all rejected, the fit
    goes stale). Returns how late, at most, a kernel 2 ms after each pair of the stalls maps."""
    rng = np.random.default_rng(seed)
    t = _host_times(1500, seed=seed, gap=(1_000_000, 5_000_000))
    s = (t - t[0]) / 1e9
    delay = 4_000 + np.abs(rng.normal(0, 2_000, len(t)))
    fading, stalls = s < 0.6, (s > 0.7) & (s < 1.0)
    delay[fading] += rng.uniform(0.7, 1, fading.sum()) * 50_000 * (1 - s[fading] / 0.6)
    delay[stalls] += rng.uniform(500_000, 5_000_000, stalls.sum())
    clock = lambda x: np.asarray(x, float) + 1.25e12  # noqa: E731
    cs = gpu.ClockSync(k=8, **sync)
    _bootstrap(cs, int(t[0]), clock, seed=seed)
    late = []
    for a, b, stalled in zip(t, np.round(clock(t) + delay).astype(np.int64), stalls):
        cs.observe(int(a), int(b))
        if stalled:
            p = int(a) + 2_000_000
            late.append(cs.to_host(int(round(float(clock(p))))) - p)
    return float(max(late))


def test_a_young_slope_does_not_map_late_through_a_stale_fit(native_built):
    """A slope is adopted once the history spans a second (the runtime's SYNC_MIN_SPAN_NS, the
    default here). A load that fades over the first 0.6 s tilts a younger envelope (by ~1e-4),
    and when the next 300 ms are all stalls the stale fit extrapolates
    that slope: with a 50 ms minimum, kernels map up to ~5 us *later* than their true start
    (a CI run saw 4.5 us on lavapipe). With a second, a = 1 serves the stalls, and every kernel
    maps early by the window's delay, as the offset says it should."""
    young = [_late_in_stalls(seed, min_span_ns=50e6) for seed in range(10)]
    assert max(young) > 1_000, young  # the stream does make a 50 ms history map late
    default = [_late_in_stalls(seed) for seed in range(10)]
    assert max(default) < 0, default


@pytest.mark.parametrize("offset,drift", [(0.0, 0.0), (-3.7e9, 0.0), (1.25e12, 20e-6)])
def test_short_dense_stream(native_built, offset, drift):
    """A dense stream (a pair per 1-1.25 ms, k = 32, 2 us jitter, 10% stalls): after the
    three injected pairs and 200 observed ones, every kernel maps within 15 us."""
    clock = lambda x: (1 + drift) * np.asarray(x, float) + offset  # noqa: E731
    t = _host_times(3000, seed=2, gap=(1_000_000, 1_250_000))
    tau, stalled = _pairs(t, clock, seed=2, jitter=2_000.0)
    cs = gpu.ClockSync(k=32)
    _bootstrap(cs, int(t[0]), clock, seed=1)
    accepted, err = _replay(cs, t, tau, clock, kernel_after=123_456)
    err += 2_000.0 * np.sqrt(2 / np.pi) - MEAN_DELAY  # this stream's own mean delay
    assert accepted[stalled][20:].mean() < 0.02, "queue stalls were not rejected"
    assert np.abs(err[200:]).max() < BOUND, f"max error {np.abs(err[200:]).max():.0f} ns"


def test_rejects_outliers_against_the_bootstrap(native_built):
    """Eq. 2: sigma from three injected pairs; a pair 10 sigma away is rejected and leaves
    the fit unchanged (Algorithm 1, lines 14-16)."""
    cs = gpu.ClockSync(k=4)
    sigma = cs.bootstrap([0, 1_000_000, 2_000_000], [10_000, 1_012_000, 2_008_000])
    assert sigma == pytest.approx(2 * np.std([10_000, 12_000, 8_000]))
    b = cs.b
    assert not cs.observe(3_000_000, 3_000_000 + 10_000 + 10 * int(sigma))
    assert cs.b == b and cs.counts["rejected"] == 1
    assert cs.observe(4_000_000, 4_010_500)


def test_refit_every_k_observed_pairs(native_built):
    """Algorithm 1, lines 4-11: a refit after every k observed pairs, outliers included
    in the count; the slope is left at 1 until the history can support one."""
    cs = gpu.ClockSync(k=4)
    cs.bootstrap([0, 1_000, 2_000], [500, 1_500, 2_500])
    for i in range(1, 14):  # the first period is k + 1 pairs (n counts from 1 after a refit)
        cs.observe(2_000 + i * 1_000_000, 2_500 + i * 1_000_000)
    assert cs.counts["refits"] == 3 and cs.counts["observed"] == 13
    assert cs.a == 1.0 and cs.counts["slope_updates"] == 0  # 13 ms of history < min_span
    assert cs.to_host(5_000_500) == 5_000_000


def test_time_observe_times_each_call_in_c(native_built):
    """The benchmark's timing hook: one duration per call, refits flagged where the
    counter moved, and the timer's own cost reported (a few tens of ns)."""
    t = _host_times(400, seed=11)
    tau, _ = _pairs(t, lambda x: np.asarray(x, float) + 1e6, seed=12)
    cs = gpu.ClockSync(k=8)
    _bootstrap(cs, int(t[0]), lambda x: np.asarray(x, float) + 1e6, seed=13)
    ns, refit, timer = cs.time_observe(t, tau)
    assert len(ns) == 400 and all(v > 0 for v in ns)
    assert sum(refit) == cs.counts["refits"] > 30
    assert 0 < timer < 10_000


# ---------------------------------------------------------------- a real stream (lavapipe)
def test_real_stream_on_lavapipe(needs_gpu, tiny_gpu_model, tmp_path):
    """800 kernel-mode runs (about 3000 command buffers in 3-8 s): the fitted slope ends
    within 2e-5 of the true 1. The stated bound on mapped - raw: never late (< 1 us), never
    earlier than the largest enqueue delay of the stream's idle command buffers (what the
    pairs cannot tell from the offset: 15-40 us on a quiet host, hundreds of us when other
    processes hold the CPUs), and early by a typical delay: its median between the smallest
    and the 90th percentile of those delays. Kernels are ordered, do not overlap, end
    inside their run and start inside it up to that delay."""
    run = nr.run_native(tiny_gpu_model, accelerator="gpu", precision="fp32", mode="kernel", warmup=2, runs=800,
                        records_path=tmp_path / "k.jsonl", timeout=120)
    assert run.meta["gpu"]["sync"]["min_span_ns"] == gpu.SYNC_MIN_SPAN_NS  # what the synthetic tests use
    sync = run.end["gpu"]["sync"]
    assert sync["observed"] >= 200 and sync["refits"] >= 20, sync
    assert abs(sync["a"] - 1) < 2e-5, sync
    delay = np.array(gpu.idle_enqueue_delays(gpu.gpu_kernels(run)), float)
    assert len(delay) >= 100 and delay.min() > 0
    by_run = gpu.kernels_by_run(run)
    assert sorted(by_run) == [r["run"] for r in run.runs]
    err = []
    for r in run.runs:
        ks = by_run[r["run"]]
        for k in ks:
            assert r["start_ns"] - delay.max() <= k["start_ns"] <= k["end_ns"] <= r["end_ns"], k
            # durations scale by 1 / a only: |a - 1| <= 1e-3 at any time (CS_MAX_DRIFT)
            assert k["end_ns"] - k["start_ns"] == pytest.approx(k["gpu_end_ns"] - k["gpu_begin_ns"], rel=1e-3, abs=2)
        for a, b in zip(ks, ks[1:]):
            assert a["end_ns"] <= b["start_ns"]
        err += [k["start_ns"] - k["gpu_begin_ns"] for k in ks]
    err = np.array(err, float)
    assert err.max() < 1_000, f"mapped later than the truth by {err.max():.0f} ns"
    assert -err.min() <= delay.max() + 10_000, f"early by {-err.min():.0f} ns, delays up to {delay.max():.0f} ns"
    # the offset absorbs the accepted pairs' mean delay: a typical delay, between the
    # smallest and the 90th percentile of the stream's idle delays
    lo, hi = delay.min(), np.percentile(delay, 90)
    assert lo - 1_000 <= np.median(-err) <= hi, (np.median(-err), lo, hi)
