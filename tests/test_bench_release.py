"""benchmarks/bench_release.py: the sweep's wall time and the load it reports."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_release", ROOT / "benchmarks" / "bench_release.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_an_interrupted_session_counts_until_its_last_logged_line(tmp_path):
    """Sessions stopped by hand write no `end:`: each runs to its last line, so three sessions
    of 10, 5 and 2 minutes make 17 minutes (not the 5 of the one that ended)."""
    (tmp_path / "measure.log").write_text(
        "2026-11-27T01:00:00 start: 10 pairs to measure\n"
        "2026-11-27T01:10:00 loaded a p0 (attempt 1 of 6): slow\n"
        "2026-11-27T02:00:00 start: 8 pairs to measure\n"
        "2026-11-27T02:05:00 end: 8 measured\n"
        "2026-11-27T03:00:00 start: 3 pairs to measure\n"
        "2026-11-27T03:01:00 waited 4 s\n"
        "2026-11-27T03:02:00 loaded b p1 (attempt 1 of 6): slow\n")
    assert bench._sweep_minutes(tmp_path) == 17.0


def test_the_load_column_judges_shares_as_the_check_does():
    """One foreign clock tick in a 10 ms process is a raw 100% share the check ignores; the
    others-max column reads it as 0, and a resolvable share as itself."""
    tick = {"observed": True, "tick_s": 0.01, "cpus": [0], "foreign_busy_frac": 1.0, "foreign_busy_s": 0.01}
    busy = {**tick, "foreign_busy_frac": 0.05, "foreign_busy_s": 0.05}
    rec = {"e2e": {"per_process": [{"load": tick}, {"load": busy}, {}]}, "op": {"load": tick}}
    assert [bench.judged_share(w) for w in bench._windows(rec)] == [0.0, 0.05, 0.0]
