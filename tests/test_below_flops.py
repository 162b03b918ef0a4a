"""Issue 17: no entry may be worse than FLOPs on a scenario without the board saying why
(leaderboard/below_flops.py, leaderboard/why_below_flops.yaml)."""
from __future__ import annotations

from pathlib import Path

from leaderboard.below_flops import NO_REASON, Reason, flagged, load_reasons
from leaderboard.render import load_results, render_markdown, site_data

RESULTS = Path(__file__).resolve().parents[1] / "leaderboard" / "results"


def _doc(entry, track, per, kind="baseline"):
    return {"entry": entry, "track": track, "meta": {"kind": kind}, "plot": {},
            "result": {"per_scenario": per, "aggregate": {}}}


def test_direction_follows_the_primary_metric_and_only_entries_are_compared():
    status = {"a": {"primary": "spearman", "available": True}, "b": {"primary": "mape", "available": True}}
    by_track = {
        "a": [_doc("flops", "a", {"s1": {"spearman": 0.8}, "s2": {"spearman": 0.5}}),
              _doc("x", "a", {"s1": {"spearman": 0.7}, "s2": {"spearman": 0.9}}),
              _doc("y", "a", {"s1": {"spearman": float("nan")}}, kind="submission")],
        "b": [_doc("flops", "b", {"s1": {"mape": 20.0}}), _doc("x", "b", {"s1": {"mape": 25.0}}),
              _doc("z", "b", {"s1": {"mape": 15.0}})],
        "c": [_doc("x", "c", {"s1": {"mape": 99.0}})],  # no flops entry: nothing to compare with
    }
    reasons = [Reason("a", "s*", "x", "because"), Reason("*", "*", "x", "later rule")]
    got = {(f["track"], f["scenario"], f["entry"]): f["why"] for f in flagged(status, by_track, reasons)}
    assert got == {("a", "s1", "x"): "because", ("a", "s1", "y"): NO_REASON, ("b", "s1", "x"): "later rule"}


def test_every_committed_cell_below_flops_has_a_reason():
    status, by_track = load_results(RESULTS)
    flags = flagged(status, by_track, load_reasons())
    assert flags, "the committed results have cells below FLOPs (raspi4 on the HELP tracks)"
    missing = [f"{f['track']} {f['scenario']} {f['entry']}: {f['value']} vs flops {f['flops']}"
               for f in flags if f["why"] == NO_REASON]
    assert not missing, ("below FLOPs with no reason in leaderboard/why_below_flops.yaml:\n" + "\n".join(missing))


def test_the_board_lists_and_marks_them():
    status, by_track = load_results(RESULTS)
    md = render_markdown(status, by_track)
    head = md.splitlines()[:40]  # the overview and the contents open the board
    assert "## Overview" in head and any(ln.startswith("**Contents:** [Overview](#overview)") for ln in head)
    assert any(ln.startswith("| [help-nb201-n10](#track-help-nb201-n10) |") for ln in head)
    # a cell below FLOPs carries a footnote; the footnote under its track gives the reason
    raspi = next(ln for ln in md.splitlines() if ln.startswith("| transfer | baseline |") and "[^help-nb201-n10-" in ln)
    mark = raspi[raspi.index("[^help-nb201-n10-"):].split("]")[0] + "]"
    why = flagged(status, by_track, load_reasons())
    reason = next(f["why"] for f in why if f["track"] == "help-nb201-n10" and f["entry"] == "transfer")
    assert f"{mark}: Below FLOPs: {reason[:60]}" in md.replace("\\", "")
    track = next(t for t in site_data(status, by_track)["tracks"] if t["name"] == "help-nb201-n10")
    view = next(v for v in track["views"] if v["id"] == "per-scenario-spearman")
    rows = {r["label"]: r for r in view["rows"]}
    col = view["columns"].index("raspi4")
    assert rows["transfer"]["below_flops"][col] and not rows["flops"]["below_flops"][col]
    assert not rows["usc_lasso"]["below_flops"][col]  # above FLOPs on raspi4 since its graph passes
    assert "below_flops" not in rows["noise floor"]
