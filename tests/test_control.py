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
from pipelines.release_writer import write_release
from support.sweeps import exported_sweep, tiny_sweep_cfg, tiny_sweep_overrides

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
    cfg = _cfg(data, release, f"release.control=[{','.join(names)}]")
    history = release / control.HISTORY

    # a released pair is measured again in the control sweep (release.reuse does not apply)
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

    # rewriting the release (the next session's landing) keeps the history, and its card states the drift
    write_release(data / "dataset", release)
    assert control.read_history(history) == rows
    card = (release / "DATASET.md").read_text()
    assert "## Between-session drift (the control set)" in card and f"| {SID} | 20261126T000000Z | 2 |" in card


def test_a_control_name_that_was_not_generated_is_one_line_naming_the_key(exported, tmp_path):
    cfg = _cfg(exported, tmp_path / "none-v1", "release.control=[zoo-resnet-ref]")
    with pytest.raises(control.ControlError, match=r"^release\.control: 'zoo-resnet-ref' is not among the generated"):
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
    cfg = tiny_sweep_cfg(data, release, f"release.control=[{names[0]}]", granularities="[e2e]",
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


def test_the_command_appends_each_row_once(exported, tmp_path):
    """``python -m pipelines.control`` lands each point's rows as the point finishes, and only then."""
    from pipelines.config import compose, write_params

    data = tmp_path / "data"
    shutil.copytree(exported, data)
    release = tmp_path / "datasets" / "tiny-v1"
    name = _names(data)[0]
    params = write_params(compose(tiny_sweep_overrides(data, release, f"release.control=[{name}]", grid=GRID)),
                          tmp_path / "params.yaml")
    assert control.main(["--params", str(params), "--quiet"]) == 0
    rows = control.read_history(release / control.HISTORY)
    assert [(r["scenario_id"], r["name"]) for r in rows] == [(SID, name)]


def _row(session: str, latency: float, slowdown: str) -> dict:
    return {"session": session, "scenario_id": SID, "model_id": "m", "latency_ms": str(latency), "between_cv": "0.01",
            "max_probe_slowdown": slowdown}


def test_the_drift_is_measured_from_the_first_session_the_probe_judged(tmp_path):
    """A session without the speed probe's record (its processes may have run in slow episodes)
    is reported against the first judged session, marked, and is no reference."""
    rows = [_row("20261125T000000Z", 2.0, ""), _row("20261126T000000Z", 1.0, "0.05"),
            _row("20261127T000000Z", 1.1, "0.1")]
    table = {r["session"]: r for r in control.drift(rows)}
    assert table["20261125T000000Z"]["median_abs_drift"] == pytest.approx(1.0)
    assert not table["20261125T000000Z"]["judged"] and table["20261126T000000Z"]["judged"]
    assert table["20261126T000000Z"]["max_abs_drift"] == 0.0
    assert table["20261127T000000Z"]["max_abs_drift"] == pytest.approx(0.1)
    assert control.format_drift(control.drift(rows)).splitlines()[1].endswith("(probe not recorded)")
    # a history written before the column reads with it empty, and keeps it on the next append
    old = tmp_path / control.HISTORY
    columns = [c for c in control.COLUMNS if c not in control.LATER_COLUMNS]
    old.write_text(",".join(columns) + "\n" + ",".join(["20261125T000000Z", "vm", SID, "m", "x", "2.0", "0.01", "3"]
                                                         + [""] * (len(columns) - 8)) + "\n")
    assert control.read_history(old)[0]["max_probe_slowdown"] == ""
    control.append_history(old, [{**_row("20261126T000000Z", 1.0, "0.05"), "name": "x"}])
    assert [r["max_probe_slowdown"] for r in control.read_history(old)] == ["", "0.05"]
