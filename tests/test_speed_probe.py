"""The speed probe (native/src/probe.c through pipelines/speed_probe.py): a fixed piece of work
timed on one pinned core, the fastest median of a window of consecutive probes kept as the
reference, and the load check's verdict on a process whose probes ran slower than that (the
VM's slow episodes)."""
from __future__ import annotations

import os
import time

import pytest

from pipelines import speed_probe
from pipelines.machine_load import LoadConfig, LoadWindow, judge, judged_share, validate_load
from pipelines.speed_probe import SpeedProbe, probe_once

CPU = sorted(os.sched_getaffinity(0))[0]


def test_the_probe_is_fixed_work_on_the_asked_core():
    """Same arithmetic every call (the digest), a positive duration, and the calling thread's
    own affinity untouched (the probe pins a thread of its own)."""
    before = os.sched_getaffinity(0)
    durations = [probe_once(CPU) for _ in range(5)]
    digest = speed_probe._probe_lib().lb_probe_digest()
    assert all(0 < d < 1.0 for d in durations), durations
    probe_once(CPU, reps=1)
    one = speed_probe._probe_lib().lb_probe_digest()
    probe_once(CPU)
    assert speed_probe._probe_lib().lb_probe_digest() == digest != one  # fixed work, scaled by reps
    assert os.sched_getaffinity(0) == before


def test_the_reference_is_the_fastest_window_median_and_slowdown_is_against_it():
    """Probe readings as the VM gives them (fast mode with its spread and a stray fast one, then
    a slow episode): a stray reading does not become the reference, a full fast window does, and
    a later slow phase never raises it."""
    p = SpeedProbe([CPU], window=4)
    for s in (1.0, 1.1, 0.5):  # before the first full window: the median of what was seen
        p.observe({CPU: s})
    assert p.best[CPU] == 1.0
    p.observe({CPU: 0.9})  # window [1.0, 1.1, 0.5, 0.9]: median 0.95, the stray 0.5 ignored
    assert p.best[CPU] == pytest.approx(0.95)
    for s in (0.8, 0.8, 0.8, 0.8):
        p.observe({CPU: s})
    assert p.best[CPU] == pytest.approx(0.8)
    for s in (1.6, 1.7, 1.6, 1.8, 1.6):  # a slow episode: full slow windows, the reference stays
        p.observe({CPU: s})
    assert p.best[CPU] == pytest.approx(0.8)
    assert p.slowdown({CPU: 0.8}) == 0.0
    assert p.slowdown({CPU: 1.2}) == pytest.approx(0.5)
    assert p.slowdown({CPU: 0.6}) == 0.0  # faster than the reference: not slow, never negative


def test_a_reference_from_earlier_sessions_is_where_the_probe_starts():
    """A session that starts in a long slow phase judges against the release's reference, not
    its own speed; a faster full window still lowers it, a slower one never raises it."""
    p = SpeedProbe([CPU], window=4, reference={CPU: 0.8, CPU + 1: 0.5})
    assert p.best == {CPU: 0.8}  # a CPU outside the set is ignored
    for s in (1.6, 1.7, 1.6, 1.8):
        p.observe({CPU: s})
    assert p.best[CPU] == 0.8 and p.slowdown({CPU: 1.6}) == pytest.approx(1.0)
    for s in (0.7, 0.7, 0.7, 0.7):
        p.observe({CPU: s})
    assert p.best[CPU] == pytest.approx(0.7)
    p.adopt({CPU: 0.9})  # an older, slower reference changes nothing
    assert p.best[CPU] == pytest.approx(0.7)
    p.adopt({CPU: 0.6})
    assert p.best[CPU] == pytest.approx(0.6)


def test_real_probes_calibrate_a_reference():
    p = SpeedProbe([CPU])
    seen = [p.sample()[CPU] for _ in range(4)]
    assert min(seen) <= p.best[CPU] <= max(seen) and not p.calibrated
    p.calibrate(probes=speed_probe.WINDOW, spacing_s=0.01)
    assert p.calibrated and 0 < p.best[CPU] <= max(seen + list(p.recent[CPU]))


def test_the_window_records_the_probe_and_the_check_refuses_a_slow_episode():
    p = SpeedProbe([CPU])
    p.calibrate(probes=3, spacing_s=0.01)
    with LoadWindow([CPU], probe=p) as w:
        time.sleep(0.01)
    probe = w.result["probe"]
    assert set(probe) == {"before_s", "after_s", "best_s", "slowdown"}
    worst = max(probe["before_s"][str(CPU)], probe["after_s"][str(CPU)])
    assert probe["slowdown"] == pytest.approx(max(0.0, worst / probe["best_s"][str(CPU)] - 1), abs=1e-3)
    assert w.result["wall_s"] < 0.5  # the probes stay outside the window's own figures

    quiet = {**w.result, "foreign_busy_frac": 0.0, "foreign_busy_s": 0.0, "steal_frac": 0.0}
    slow = {**quiet, "probe": {**probe, "slowdown": 0.75}}
    assert judge({**quiet, "probe": {**probe, "slowdown": 0.1}}, LoadConfig()) is None
    why = judge(slow, LoadConfig(max_slowdown=0.3))
    assert why and "75% slower than their fastest (limit 30%)" in why and "slow episode" in why
    assert judge(slow, LoadConfig(max_slowdown=None)) is None  # no probe limit
    assert judge(slow, LoadConfig(check=False)) is None  # recorded, never refused


def test_a_foreign_share_below_two_clock_ticks_per_core_is_not_judged():
    """A 10 ms process that saw one foreign clock tick reads a 100% share: /proc/stat cannot
    resolve it, so the check (and bench_release's "others max") takes it as 0; one tick more
    than two per core is judged and refused."""
    base = {"tick_s": 0.01, "cpus": [0], "steal_frac": 0.0, "wall_s": 0.01, "loadavg_end": 0.4}
    tick = {**base, "foreign_busy_frac": 1.0, "foreign_busy_s": 0.01}
    assert judged_share(tick) == 0.0 and judge(tick, LoadConfig(max_foreign_busy=0.1)) is None
    busy = {**base, "wall_s": 0.1, "foreign_busy_frac": 0.3, "foreign_busy_s": 0.03}
    assert judged_share(busy) == 0.3
    assert "other processes used 30% of CPUs [0] (limit 10%" in judge(busy, LoadConfig(max_foreign_busy=0.1))
    two = {**busy, "cpus": [0, 1]}  # the floor scales with the pinned cores: 4 ticks on two
    assert judged_share(two) == 0.0


@pytest.mark.parametrize("bad", [0, -0.1])
def test_max_slowdown_must_be_a_positive_share(bad):
    with pytest.raises(ValueError, match=r"load.max_slowdown: a share > 0"):
        validate_load(LoadConfig(max_slowdown=bad))
    validate_load(LoadConfig(max_slowdown=None))


def test_a_missing_library_names_the_file_and_the_way_out(monkeypatch, tmp_path):
    monkeypatch.setattr(speed_probe, "_lib", None)
    with pytest.raises(FileNotFoundError, match=r"liblatbench_probe.so: the speed probe is not built .*probe: false"):
        speed_probe._probe_lib(tmp_path / "liblatbench_probe.so")
