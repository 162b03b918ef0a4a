"""The retest (pipelines/retest.py): released networks measured again in a later session, their
rows appended to the release's retest.csv, which a rewrite of the release keeps and states on the
card, and the comparison with the released labels (session factor, residual spread, agreement,
the ceiling a perfect predictor would reach on these labels).

Three NAS-Bench-201 cells are generated, exported and released on TFLite fp32, one core (e2e, a
short fixed protocol); a split file names two of them as its test networks.
"""
from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from pipelines import control, retest
from pipelines.assemble import run_assemble
from pipelines.measure import run_measure
from pipelines.release_writer import write_release
from support.sweeps import exported_sweep, tiny_sweep_cfg, tiny_sweep_overrides

SID = "host-tflite-cpu-1large-fp32"
GRID = ("scenario.frameworks=[tflite]", "scenario.precisions=[fp32]", "scenario.cores=[1large]",
        "scenario.accelerators=[cpu]")


def _cfg(data: Path, release: Path, *more: str):
    return tiny_sweep_cfg(data, release, *more, grid=GRID)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    return exported_sweep(tmp_path_factory, "retest", _cfg)


def _names(data: Path) -> list[str]:
    return sorted(_ids(data))


def _ids(data: Path) -> dict[str, str]:
    with (data / "models" / "index.csv").open() as f:
        return {r["name"]: r["model_id"] for r in csv.DictReader(f)}


def _split(path: Path, test: list[str], train: list[str]) -> Path:
    path.write_text(json.dumps({"track": "tiny", "version": 1, "spec_hash": "0",
                                "folds": [{"fold": 0, "scenario_id": "*", "train": train, "test": test}]}))
    return path


def test_the_test_networks_of_a_split_are_measured_again_and_the_release_keeps_them(exported, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(exported, data)
    release = tmp_path / "datasets" / "tiny-v1"
    names = _names(data)
    assert len(names) == 3
    assert run_measure(_cfg(data, release), "tflite", "fp32", "1large", progress=False)["ok"] == 3
    run_assemble(_cfg(data, release), progress=False)
    write_release(data / "dataset", release)

    split = _split(tmp_path / "tiny.v1.json", names[:2], names[2:])
    assert retest.split_test_names(split) == names[:2]
    params_file = tmp_path / "params.yaml"
    from pipelines.config import compose, write_params

    write_params(compose(tiny_sweep_overrides(data, release, grid=GRID)), params_file)
    # the retest exports what its networks lack, and only theirs
    ids = _ids(data)
    shutil.rmtree(data / "artifacts" / ids[names[0]])
    shutil.rmtree(data / "artifacts" / ids[names[2]])
    assert retest.main(["--params", str(params_file), "--split", str(split), "--session", "20261128T000000Z",
                        "--quiet"]) == 0
    rows = control.read_history(release / retest.HISTORY)
    assert sorted(r["name"] for r in rows) == names[:2] and {r["scenario_id"] for r in rows} == {SID}
    assert all(float(r["latency_ms"]) > 0 and r["session"] == "20261128T000000Z" for r in rows)
    assert (data / "artifacts" / ids[names[0]]).is_dir() and not (data / "artifacts" / ids[names[2]]).exists()
    # measured again in its own folder, although the release holds the pairs
    folder = data / "retest" / "20261128T000000Z" / "host" / SID
    assert len([p for p in folder.glob("*.json") if p.name != "SCENARIO.json"]) == 2

    table = retest.compare(rows, pd.read_parquet(release / "e2e.parquet"))
    assert [(r["scenario_id"], r["networks"]) for r in table] == [(SID, 2)]
    assert 0.2 < table[0]["factor"] < 5

    # rewriting the release keeps the rows (beside control.csv's), and its card states the comparison
    write_release(data / "dataset", release)
    assert control.read_history(release / retest.HISTORY) == rows
    card = (release / "DATASET.md").read_text()
    assert "## Test-retest (released networks measured again)" in card
    assert f"| {SID} | 20261128T000000Z | 2 |" in card


def _rows(ratios: dict[str, float], session: str = "s1") -> list[dict]:
    return [{"session": session, "scenario_id": SID, "model_id": m, "latency_ms": str(10.0 * q)}
            for m, q in ratios.items()]


def test_compare_separates_the_session_factor_from_each_networks_own_move():
    released = pd.DataFrame({"model_id": list("abcdef"), "scenario_id": [SID] * 6, "latency_ms": [10.0] * 6,
                             "between_cv": [0.01, 0.02, 0.03, 0.04, 0.05, 0.06]})
    # every network 20% slower, and two of them moved on their own
    ratios = {"a": 1.2, "b": 1.2, "c": 1.2, "d": 1.2, "e": 1.2 * 1.12, "f": 1.2 / 1.3}
    rows = _rows(ratios) + [{"session": "s1", "scenario_id": SID, "model_id": "not-released", "latency_ms": "1"}]
    (r,) = retest.compare(rows, released)
    assert r["networks"] == 6 and r["factor"] == pytest.approx(1.2)
    assert r["within10"] == pytest.approx(1 / 6)  # as measured: only f, whose own move undid the 20%
    assert r["within10_after"] == pytest.approx(4 / 6) and r["within5_after"] == pytest.approx(4 / 6)
    # |log 1.12| / sqrt 2 = 0.080 <= log 1.1, |log 1.3| / sqrt 2 = 0.186 > log 1.1
    assert r["ceiling10"] == pytest.approx(5 / 6)
    assert r["sigma"] == pytest.approx(0.0)  # the median absolute residual: 4 of 6 did not move
    assert r["median_between_cv"] == pytest.approx(0.035)
    # two sessions are two rows
    two = retest.compare(rows + _rows({"a": 1.0, "b": 1.1}, "s2"), released)
    assert [(t["session"], t["networks"]) for t in two] == [("s1", 6), ("s2", 2)]
    assert two[1]["factor"] == pytest.approx(1.05)
    assert two[1]["sigma"] == pytest.approx(1.4826 * math.log(1.1) / 2)  # both half the gap from their median
    assert "ceiling10" in retest.format_compare(two) and "| s2 | 2 |" in retest.retest_markdown(two)


def test_a_bad_split_or_none_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"track": "x"}')
    with pytest.raises(control.ControlError, match=r"bad\.json: not a split file"):
        retest.split_test_names(bad)
    with pytest.raises(control.ControlError, match=r"absent\.json: no such split file"):
        retest.split_test_names(tmp_path / "absent.json")
    assert retest.main(["--params", str(tmp_path / "absent.yaml")]) == 2
