"""What every measuring process's records hold, whichever runtime wrote them: meta first, end
last, the asked-for warm-up and timed runs, each run a positive monotonic span, in order."""
from __future__ import annotations


def check_run_records(res, runs: int, warmup: int) -> None:
    types = [r["type"] for r in res.records]
    assert types[0] == "meta" and types[-1] == "end"
    assert len(res.runs) == runs == res.end["timed_runs"]
    assert len([r for r in res.of_type("run") if r["phase"] == "warmup"]) == warmup
    for r in res.of_type("run"):
        assert isinstance(r["start_ns"], int) and r["duration_ns"] > 0
        assert r["end_ns"] - r["start_ns"] == r["duration_ns"]
    starts = [r["start_ns"] for r in res.of_type("run")]
    assert starts == sorted(starts)
