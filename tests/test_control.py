"""The control set (pipelines/control.py): the same named networks measured again every session,
their rows appended to the release's control.csv, which a rewrite of the release keeps, and the
drift of each session against the first.

Three NAS-Bench-201 cells are generated and exported; two of them are the control set, measured
in two sessions on TFLite fp32, one core (e2e, a short fixed protocol).
"""
from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from pipelines import control
from pipelines.assemble import run_assemble
from pipelines.measure import run_measure
from pipelines.release import write_release
from support.sweeps import exported_sweep, tiny_sweep_cfg

SID = "host-tflite-cpu-1large-fp32"
GRID = ("scenario.frameworks=[tflite]", "scenario.precisions=[fp32]", "scenario.cores=[1large]",
        "scenario.accelerators=[cpu]")


def _cfg(data: Path, release: Path, *more: str):
    return tiny_sweep_cfg(data, release, *more, granularities="[e2e,op]", grid=GRID)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    return exported_sweep(tmp_path_factory, "control", _cfg)


def _names(data: Path) -> list[str]:
    with (data / "models" / "index.csv").open() as f:
        return sorted(r["name"] for r in csv.DictReader(f))


def test_two_sessions_append_history_the_release_keeps_and_the_drift_is_reported(exported, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(exported, data)
    release = tmp_path / "datasets" / "tiny-v1"
    names = _names(data)[:2]
    cfg = _cfg(data, release, f"measure.control=[{','.join(names)}]")
    history = release / control.HISTORY

    # a released pair is measured again in the control sweep (reuse_release does not apply)
    assert run_measure(_cfg(data, release), "tflite", "fp32", "1large", progress=False)["ok"] == 3
    run_assemble(cfg, progress=False)
    write_release(data / "dataset", release)

    first = control.measure_control(cfg, session="20261125T000000Z", progress=False)
    assert sorted(r["name"] for r in first) == names and {r["scenario_id"] for r in first} == {SID}
    assert all(float(r["latency_ms"]) > 0 and r["processes"] == 2 for r in first)
    # the control sweep is e2e only, in its own folder, whatever the points' granularities
    folder = data / "control" / "20261125T000000Z" / "host" / SID
    assert not list(folder.glob("*.op.trace.json")) and len(list(folder.glob("*.json"))) == 3  # 2 + SCENARIO.json
    control.append_history(history, first)
    control.append_history(history, control.measure_control(cfg, session="20261126T000000Z", progress=False))
    rows = control.read_history(history)
    assert [r["session"] for r in rows] == ["20261125T000000Z"] * 2 + ["20261126T000000Z"] * 2

    table = control.drift(rows)
    assert [(r["scenario_id"], r["session"], r["networks"]) for r in table] == [
        (SID, "20261125T000000Z", 2), (SID, "20261126T000000Z", 2)]
    assert table[0]["max_abs_drift"] == 0.0  # the first session is the reference
    lat = {(r["session"], r["model_id"]): float(r["latency_ms"]) for r in rows}
    moved = [abs(lat[("20261126T000000Z", m)] / lat[("20261125T000000Z", m)] - 1) for m in {r["model_id"] for r in rows}]
    assert table[1]["max_abs_drift"] == pytest.approx(max(moved))
    assert "median |drift|" in control.format_drift(table)

    # rewriting the release (the next session's landing) keeps the history
    write_release(data / "dataset", release)
    assert control.read_history(history) == rows


def test_a_control_name_that_was_not_generated_is_one_line_naming_the_key(exported, tmp_path):
    cfg = _cfg(exported, tmp_path / "none-v1", "measure.control=[zoo-resnet-ref]")
    with pytest.raises(control.ControlError, match=r"^measure\.control: 'zoo-resnet-ref' is not among the generated"):
        control.measure_control(cfg, progress=False)
    assert control.main(["--params", str(tmp_path / "absent.yaml"), "--report"]) == 2


def test_a_session_stopped_part_way_keeps_the_points_it_finished(exported, tmp_path, monkeypatch):
    """Each point's rows go to the sink as soon as the point is done: a session stopped at its
    second point (Ctrl-C, the sweep's budget) has the first point's rows in the history."""
    import pipelines.measure as measure_mod

    data = tmp_path / "data"
    shutil.copytree(exported, data)
    release = tmp_path / "datasets" / "tiny-v1"
    names = _names(data)[:1]
    cfg = tiny_sweep_cfg(data, release, f"measure.control=[{names[0]}]", granularities="[e2e]",
                         grid=(*GRID[:2], "scenario.cores=[1large,2large]", GRID[3]))
    history = release / control.HISTORY
    real, calls = measure_mod.run_measure, []

    def stop_at_the_second_point(*a, **kw):
        calls.append(a[1:4])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(measure_mod, "run_measure", stop_at_the_second_point)
    with pytest.raises(KeyboardInterrupt):
        control.measure_control(cfg, session="20261127T000000Z", progress=False,
                                sink=lambda got: control.append_history(history, got))
    rows = control.read_history(history)
    assert [(r["scenario_id"], r["name"]) for r in rows] == [(SID, names[0])]
    assert calls == [("tflite", "fp32", "1large"), ("tflite", "fp32", "2large")]
