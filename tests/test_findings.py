"""The card's findings (pipelines/dataset/findings.py): each USC finding is judged from the
suite's own rows with the figures behind it, and says "cannot tell" without the data."""
from __future__ import annotations

import pandas as pd
import pytest

from pipelines.dataset.findings import findings, findings_section
from pipelines.dataset.load import Dataset
from support.tables import frame as _frame




def _dataset(int8_factor: float, two_core_factor: float, add_int8_slower: bool = True) -> Dataset:
    sids = {("fp32", "1large"): "host-tflite-cpu-1large-fp32", ("int8", "1large"): "host-tflite-cpu-1large-int8",
            ("fp32", "2large"): "host-tflite-cpu-2large-fp32"}
    scen = [{"scenario_id": sid, "dataset": "latbench", "device": "host", "framework": "tflite", "accelerator": "cpu",
             "cores": cores, "core_count": int(cores[0]), "threads": int(cores[0]), "precision": prec}
            for (prec, cores), sid in sids.items()]
    models = [{"model_id": f"m{i}", "dataset": "latbench", "name": f"net{i}", "family": "synthetic", "source": "synthetic"}
              for i in range(8)]
    e2e, ops = [], []
    for i in range(8):
        base = 10.0 + i
        lat = {("fp32", "1large"): base, ("int8", "1large"): base / int8_factor,
               ("fp32", "2large"): base / two_core_factor}
        for key, sid in sids.items():
            run = None
            if key[1] == "1large":
                conv = lat[key] * 0.8
                add = lat[key] * 0.1 if key[0] == "fp32" else base * 0.1 * (2.5 if add_int8_slower else 0.5)
                ops += [{"model_id": f"m{i}", "scenario_id": sid, "dataset": "latbench", "op_index": 0, "op_type": "conv2d", "latency_ms": conv},
                        {"model_id": f"m{i}", "scenario_id": sid, "dataset": "latbench", "op_index": 1, "op_type": "add", "latency_ms": add}]
                run = (conv + add) * 1.1  # the profiled process: 10% above its ops' sum
            e2e.append({"model_id": f"m{i}", "scenario_id": sid, "dataset": "latbench", "latency_ms": lat[key],
                        "op_run_ms": run})
    return Dataset({"models": _frame("models", models), "scenarios": _frame("scenarios", scen),
                    "e2e": _frame("e2e", e2e), "ops": _frame("ops", ops)}, check=False)


def test_each_finding_is_judged_with_its_figures():
    by = {f.topic: f for f in findings(_dataset(int8_factor=1.8, two_core_factor=1.6))}
    assert by["int8"].holds is True and "median 1.80x" in by["int8"].here and "element-wise and padding: add 0.40x" in by["int8"].here
    assert by["multicore"].holds is True and "median 1.60x" in by["multicore"].here and "100% below 2x" in by["multicore"].here
    assert by["op types"].holds is True and "conv2d" in by["op types"].here.split(",")[0]
    assert by["e2e minus sum of ops"].holds is True
    assert "9.1% of the end-to-end time" in by["e2e minus sum of ops"].here


def test_a_finding_that_does_not_hold_says_no_and_the_section_reads():
    by = {f.topic: f for f in findings(_dataset(int8_factor=0.8, two_core_factor=2.5))}
    assert by["int8"].holds is False and by["multicore"].holds is False
    title, body = findings_section(_dataset(1.8, 1.6))
    assert title.startswith("Findings") and body.count("\n- **") == 4 and "holds here: yes" in body


def test_without_the_suite_s_rows_there_is_nothing_to_tell():
    ds = _dataset(1.8, 1.6)
    e = ds.e2e.copy()
    e["dataset"] = "usc-mobile-ml-benchmark"
    other = Dataset({**ds.tables(), "e2e": e}, check=False)
    assert findings_section(other) is None
    empty = Dataset({**ds.tables(), "ops": ds.ops.iloc[0:0]}, check=False)
    assert {f.topic: f.holds for f in findings(empty)}["op types"] is None


def test_a_gpu_scenario_beside_the_cpu_ones_changes_no_finding():
    """A release with the software GPU's scenario (no core set: core_count empty) reads as without it."""
    ds = _dataset(int8_factor=1.8, two_core_factor=1.6)
    gpu = _frame("scenarios", [{"scenario_id": "host-tflite-gpu-fp32", "dataset": "latbench", "device": "host",
                                "framework": "tflite", "accelerator": "gpu", "precision": "fp32"}])
    e2e = _frame("e2e", [{"model_id": "m0", "scenario_id": "host-tflite-gpu-fp32", "dataset": "latbench",
                          "latency_ms": 30.0}])
    with_gpu = Dataset({**ds.tables(), "scenarios": pd.concat([ds.scenarios, gpu], ignore_index=True),
                        "e2e": pd.concat([ds.e2e, e2e], ignore_index=True)}, check=False)
    assert [(f.topic, f.here, f.holds) for f in findings(with_gpu)] == [(f.topic, f.here, f.holds) for f in findings(ds)]


if __name__ == "__main__":
    pytest.main([__file__])
