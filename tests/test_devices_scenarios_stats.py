"""Device topology from recorded sysfs trees, scenario grids, and measurement statistics."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pipelines.devices import HostDevice, core_combinations, core_set, cpu_mask, parse_cpu_list, read_clusters
from pipelines.runners import frameworks
from pipelines.scenarios import Scenario, ScenarioGridConfig, expand_grid, explain_grid
from pipelines.stats import (
    AdaptiveStopper,
    FixedRuns,
    make_stopper,
    median_ci,
    median_ci_ranks,
    pooled_summary,
    summarize,
)


# ---------------------------------------------------------------- recorded sysfs trees
def write_tree(root: Path, groups: list[tuple[list[int], int | None]], cpuinfo: str = "") -> Path:
    """A fake ``<root>/sys/devices/system/cpu`` with one cpufreq policy per (cpus, max kHz) group
    (``None``: no cpufreq at all, as on a VM)."""
    base = root / "sys/devices/system/cpu"
    all_cpus = sorted(c for cpus, _ in groups for c in cpus)
    base.mkdir(parents=True)
    (base / "online").write_text(f"0-{max(all_cpus)}\n")
    (base / "present").write_text(f"0-{max(all_cpus)}\n")
    for cpus, khz in groups:
        for c in cpus:
            d = base / f"cpu{c}"
            d.mkdir()
            (d / "online").write_text("1\n")
            if khz is None:
                continue
            f = d / "cpufreq"
            f.mkdir()
            related = f"{cpus[0]}-{cpus[-1]}" if len(cpus) > 1 else str(cpus[0])
            (f / "related_cpus").write_text(related + "\n")
            (f / "affected_cpus").write_text(" ".join(map(str, cpus)) + "\n")
            (f / "cpuinfo_max_freq").write_text(f"{khz}\n")
            (f / "scaling_governor").write_text("schedutil\n")
    if cpuinfo:
        (root / "proc").mkdir()
        (root / "proc/cpuinfo").write_text(cpuinfo)
    return root


@pytest.fixture
def sd855(tmp_path):
    return write_tree(tmp_path / "sd855", [([0, 1, 2, 3], 1785600), ([4, 5, 6], 2419200), ([7], 2841600)],
                      cpuinfo="processor\t: 0\nBogoMIPS\t: 38.40\nCPU part\t: 0x804\n"
                              "Hardware\t: Qualcomm Technologies, Inc SM8150\n")


@pytest.fixture
def exynos9820(tmp_path):
    return write_tree(tmp_path / "exynos", [([0, 1, 2, 3], 1950000), ([4, 5], 2314000), ([6, 7], 2730000)])


@pytest.fixture
def vm(tmp_path):
    return write_tree(tmp_path / "vm", [([0, 1], None)],
                      cpuinfo="processor\t: 0\nmodel name\t: AMD EPYC\n\nprocessor\t: 1\nmodel name\t: AMD EPYC\n")


def labels(sets):
    return [s.label for s in sets]


def test_parse_cpu_list():
    assert parse_cpu_list("0-3,6\n") == [0, 1, 2, 3, 6]
    assert parse_cpu_list("4 5 6") == [4, 5, 6]
    assert cpu_mask([7]) == "0x80" and cpu_mask([0, 1]) == "0x3" and cpu_mask([4, 5, 6]) == "0x70"


def test_snapdragon_855(sd855):
    cl = read_clusters(sd855)
    assert [(c.name, c.tag, c.cpus, c.max_freq_khz) for c in cl] == [
        ("large", "large", (7,), 2841600), ("medium", "med", (4, 5, 6), 2419200),
        ("small", "small", (0, 1, 2, 3), 1785600)]
    combos = {s.label: s for s in core_combinations(cl)}
    assert labels(core_combinations(cl)) == [
        "1large", "1med", "2med", "3med", "1small", "2small", "3small", "4small",
        "1large1med", "1large2med", "1large3med"]
    # every USC Pixel 4 combination is there
    assert {"1large", "1med", "2med", "3med", "1small", "2small", "3small", "4small", "1large1med"} <= set(combos)
    assert combos["1large"].mask == "0x80" and combos["1large"].cpus == (7,)
    assert combos["2med"].cpus == (4, 5) and combos["2med"].mask == "0x30"
    assert combos["4small"].mask == "0xf"
    assert combos["1large1med"].cpus == (4, 7) and combos["1large1med"].mask == "0x90"
    assert combos["1large1med"].heterogeneous and not combos["3med"].heterogeneous
    assert labels(core_combinations(cl, max_cores=2)) == ["1large", "1med", "2med", "1small", "2small", "1large1med"]
    # any label the device can hold, in canonical order
    assert core_set(cl, "1small1large").label == "1large1small"
    with pytest.raises(ValueError, match="the med cluster has 3 core"):
        core_set(cl, "4med")
    d = HostDevice("pixel4", root=str(sd855)).describe()
    assert d["cpu_model"] == "Qualcomm Technologies, Inc SM8150"
    assert d["cores"] == 8 and d["governor"] == "schedutil" and len(d["clusters"]) == 3


def test_exynos_9820(exynos9820):
    cl = read_clusters(exynos9820)
    assert [(c.name, c.cpus) for c in cl] == [("large", (6, 7)), ("medium", (4, 5)), ("small", (0, 1, 2, 3))]
    got = labels(core_combinations(cl))
    # the USC Galaxy S10 combinations
    assert {"1large", "2large", "1med", "2med", "1small", "2small", "3small", "4small", "1large2med"} <= set(got)
    assert got[-2:] == ["1large1med", "1large2med"]
    assert {s.label: s for s in core_combinations(cl)}["1large2med"].cpus == (4, 5, 6)


def test_two_clusters_are_large_small(tmp_path):
    cl = read_clusters(write_tree(tmp_path / "p35", [([0, 1, 2, 3], 1800000), ([4, 5, 6, 7], 2300000)]))
    assert [(c.name, c.cpus[0]) for c in cl] == [("large", 4), ("small", 0)]
    assert "1large1small" in labels(core_combinations(cl))


def test_vm_without_cpufreq(vm):
    cl = read_clusters(vm)
    assert len(cl) == 1 and cl[0].name == "large" and cl[0].cpus == (0, 1) and cl[0].max_freq_khz is None
    assert labels(core_combinations(cl)) == ["1large", "2large"]
    d = HostDevice("vm", root=str(vm)).describe()
    assert d["cpu_model"] == "AMD EPYC" and d["cores"] == 2 and d["governor"] is None


def test_host_parses():
    h = HostDevice()
    d = h.describe()
    assert d["cores"] >= 1 and d["clusters"] and d["hostname"] and d["kernel"]
    assert core_combinations(h.clusters())
    assert read_clusters("/nonexistent-root")  # nothing readable: one CPU, no error


# ---------------------------------------------------------------- scenarios
def test_scenario_ids():
    s = Scenario("host", "tflite", "cpu", "fp32", cores="2large", cpus=(0, 1), threads=2)
    assert s.scenario_id == "host-tflite-cpu-2large-fp32"
    assert Scenario("host", "tflite", "cpu", "fp32", cores="1large", cpus=(0,), threads=4).scenario_id == \
        "host-tflite-cpu-1large-fp32-t4"
    assert Scenario("pixel4", "tflite", "gpu", "fp16").scenario_id == "pixel4-tflite-gpu-fp16"
    row = Scenario("pixel4", "pytorch", "cpu", "int8", cores="1large2med", cpus=(7, 4, 5), threads=3).to_dict()
    assert row["scenario_id"] == "pixel4-pytorch-cpu-1large2med-int8"
    assert row["mask"] == "0xb0" and row["heterogeneous"] is True and row["core_count"] == 3
    with pytest.raises(ValueError, match="^framework: unknown framework 'onnx'"):
        Scenario("host", "onnx", "cpu", "fp32")


def test_grid_expansion(sd855, vm):
    grid = ScenarioGridConfig(frameworks=["tflite", "pytorch"], accelerators=["cpu", "gpu"],
                              precisions=["fp32", "fp16", "int8"])
    scen, dropped = explain_grid(read_clusters(sd855), grid, device="pixel4", gpu="Adreno 640")
    ids = [s.scenario_id for s in scen]
    assert len(ids) == len(set(ids))
    n_sets = len(core_combinations(read_clusters(sd855)))
    # tflite: 3 precisions x sets + gpu fp32/fp16; pytorch: fp32/int8 x sets + gpu fp32
    assert len(ids) == 3 * n_sets + 2 + 2 * n_sets + 1
    assert "pixel4-tflite-cpu-1large1med-int8" in ids and "pixel4-tflite-gpu-fp16" in ids
    assert not any(i.startswith("pixel4-pytorch") and "fp16" in i for i in ids)
    assert all(s.threads == s.core_count for s in scen if s.accelerator == "cpu")
    reasons = {d.what: d.reason for d in dropped}
    assert "fp16 is not offered" in reasons["pixel4-pytorch-cpu-fp16"]
    assert "int8" in reasons["pixel4-tflite-gpu-int8"]

    # the VM: no GPU, one cluster; a label with a cluster it lacks is dropped with a reason
    grid = ScenarioGridConfig(accelerators=["cpu", "gpu"], cores=["1large", "2large", "1med", "3large"], threads=[1, 2])
    scen, dropped = explain_grid(read_clusters(vm), grid)
    assert [s.scenario_id for s in scen] == [
        "host-tflite-cpu-1large-fp32", "host-tflite-cpu-1large-fp32-t2",
        "host-tflite-cpu-2large-fp32-t1", "host-tflite-cpu-2large-fp32"]
    reasons = {d.what: d.reason for d in dropped}
    assert "no GPU" in reasons["host-tflite-gpu-fp32"]
    assert "no 'med' cluster" in reasons["1med"] and "2 core" in reasons["3large"]
    # from a mapping (Hydra), with max_cores
    scen = expand_grid(read_clusters(sd855), {"cores": "all", "max_cores": 1}, device="pixel4")
    assert [s.cores for s in scen] == ["1large", "1med", "1small"]


@pytest.mark.parametrize("cfg, message", [
    ({"precisions": ["fp64"]}, "precisions: unknown precision 'fp64' (known: fp32, fp16, int8)"),
    ({"frameworks": ["onnx"]}, f"frameworks: unknown framework 'onnx' (known: {', '.join(frameworks())})"),
    ({"accelerators": ["npu"]}, "accelerators: unknown accelerator 'npu' (known: cpu, gpu)"),
    ({"cores": ["2huge"]}, "cores: unknown cluster 'huge' in '2huge' (known: large, med, small)"),
    ({"cores": ["large2"]}, "cores: core set 'large2' is not <count><cluster>"),
    ({"threads": [0]}, "threads: expected positive integers, got 0"),
    ({"threads": "all"}, "threads: expected 'cores' or a list of counts"),
    ({"precision": ["fp32"]}, "precision: unknown key"),
])
def test_grid_config_errors_are_one_line(cfg, message):
    with pytest.raises(ValueError) as e:
        ScenarioGridConfig.from_config(cfg)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


# ---------------------------------------------------------------- stats
def test_summarize():
    s = summarize(np.arange(1, 101) * 1_000_000)  # 1..100 ms
    assert s["n"] == 100 and s["median_ms"] == pytest.approx(50.5) and s["mean_ms"] == pytest.approx(50.5)
    assert s["min_ms"] == 1 and s["max_ms"] == 100
    assert s["p10_ms"] == pytest.approx(10.9) and s["p90_ms"] == pytest.approx(90.1)
    assert s["cv"] == pytest.approx(np.std(np.arange(1, 101), ddof=1) / 50.5)
    assert s["ci_low_ms"] < 50.5 < s["ci_high_ms"] and s["ci_coverage"] >= 0.95
    assert (s["ci_low_ms"], s["ci_high_ms"]) == (40, 61)  # x_(40), x_(61): the textbook ranks for n = 100
    assert math.isnan(summarize([1, 2, 3])["ci_low_ms"])  # too few samples for 95 %
    assert median_ci_ranks(5, 0.95) is None and median_ci_ranks(6, 0.95)[:2] == (0, 5)


@pytest.mark.parametrize("n", [20, 50])
def test_median_ci_covers_true_median_at_nominal_rate(n):
    rng = np.random.default_rng(1)
    sigma, mu = 0.3, math.log(10.0)  # lognormal: true median 10 ms
    x = rng.lognormal(mu, sigma, size=(1000, n))
    lo, hi, cov = median_ci_ranks(n, 0.95)
    xs = np.sort(x, axis=1)
    covered = np.mean((xs[:, lo] <= 10.0) & (10.0 <= xs[:, hi]))
    assert 0.92 <= covered <= 0.98
    assert abs(covered - cov) < 0.025  # the exact coverage it reports
    # summarize gives the same interval on one sample set
    s = summarize(x[0] * 1e6)
    assert (s["ci_low_ms"], s["ci_high_ms"]) == pytest.approx((xs[0, lo], xs[0, hi]))


def _measure(rng, sigma):
    return lambda k: list(rng.lognormal(math.log(5e6), sigma, size=k))


def test_adaptive_stopping():
    rng = np.random.default_rng(0)
    rule = AdaptiveStopper(rel_width=0.02, min_runs=10, max_runs=300, batch=10)
    quiet = rule.collect(_measure(rng, 0.005))
    noisy = rule.collect(_measure(rng, 0.05))
    hopeless = rule.collect(_measure(rng, 0.5))
    assert len(quiet) < len(noisy) < 300 and len(hopeless) == 300
    assert rule.record(quiet)["stop_reason"] == "ci_width"
    rec = rule.record(hopeless)
    assert rec == {"policy": "adaptive", "runs": 300, "stop_reason": "max_runs",
                   "params": {"rel_width": 0.02, "level": 0.95, "min_runs": 10, "max_runs": 300, "batch": 10}}
    assert summarize(quiet)["ci_rel_width"] <= 0.02


def test_fixed_runs_and_config():
    rng = np.random.default_rng(0)
    rule = FixedRuns(50)
    got = rule.collect(_measure(rng, 0.5))
    assert len(got) == 50 and rule.record(got) == {"policy": "fixed", "params": {"runs": 50}, "runs": 50,
                                                   "stop_reason": "fixed_runs"}
    assert make_stopper({"policy": "fixed", "runs": 20}) == FixedRuns(20)
    assert make_stopper({"rel_width": 0.05}).params()["rel_width"] == 0.05
    for bad, msg in [({"policy": "sometimes"}, "policy: unknown stopping policy"),
                     ({"policy": "fixed", "rel_width": 0.1}, "rel_width: unknown key for policy fixed"),
                     ({"policy": "adaptive", "min_runs": 0}, "min_runs: expected a positive integer")]:
        with pytest.raises(ValueError, match="^" + msg):
            make_stopper(bad)


def test_pooled_summary():
    rng = np.random.default_rng(0)
    shifts = [1.0, 1.03, 0.98, 1.05, 1.0, 0.99]  # per-process drift, as measured on this VM
    procs = [rng.lognormal(math.log(5e6 * s), 0.01, size=50) for s in shifts]
    p = pooled_summary(procs)
    assert p["processes"] == 6 and p["n"] == 300 and len(p["per_process"]) == 6
    assert p["median_of_medians_ms"] == pytest.approx(np.median([np.median(x) for x in procs]) / 1e6)
    assert 0.05 < p["between_rel_range"] < 0.09  # drift dominates ...
    assert p["within_cv"] < 0.02 < p["between_rel_range"]  # ... the within-process noise
    assert p["medians_ci_low_ms"] <= p["median_of_medians_ms"] <= p["medians_ci_high_ms"]
    assert p["pooled"]["n"] == 300
    assert math.isnan(median_ci([1.0, 2.0], 0.95)[0])  # too few samples for a 95 % interval
