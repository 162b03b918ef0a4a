"""What the machine was doing while one measuring process ran (the host's /proc and /sys).

A latency measured while another process shares the pinned cores is not the scenario's
latency (issue 18: a busy core can turn a 2-core speed-up into a "slow-down", and nothing
flagged it). :class:`LoadWindow` brackets one measuring process and reports:

- ``loadavg_start`` / ``loadavg_end``: the 1-minute load average (/proc/loadavg);
- ``foreign_busy_s``: CPU time other processes spent on the pinned cores, i.e. the busy time
  of those cores in /proc/stat (user, nice, system, irq, softirq) minus the CPU time of the
  measuring process and of this one (getrusage of children and self, exact, plus what
  :meth:`LoadWindow.count_own` adds: a process the torch zygote forked); /proc/stat
  counts in clock ticks (USER_HZ, 10 ms), so ``tick_s`` is kept beside it;
- ``foreign_busy_frac``: that time over the pinned cores' capacity (wall time x cores);
- ``steal_frac``: time the hypervisor gave the pinned cores' vCPUs to someone else;
- ``cpu_freq_khz``: scaling_cur_freq of each pinned core at both ends, or ``"unknown"`` when
  the machine exposes no cpufreq (many VMs): said, never guessed;
- ``probe``: the speed probe (:mod:`pipelines.speed_probe`) on each pinned core just before and
  just after the process, the core's reference (``best_s``: the fastest median of a window of
  consecutive probes so far), and the ``slowdown`` (the slower of the two over that reference,
  minus 1): the VM's slow episodes show nowhere else.

:func:`judge` turns a window into a verdict against the ``measure.load`` thresholds.
"""
from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from .speed_probe import SpeedProbe

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
# /proc/stat per-CPU columns: user nice system idle iowait irq softirq steal
BUSY_COLUMNS = (0, 1, 2, 5, 6)
STEAL_COLUMN = 7


@dataclass
class LoadConfig:
    """``measure.load``: when a measuring process counts as taken under load."""

    check: bool = True  # false: record the load, never re-measure or refuse for it
    max_foreign_busy: float = 0.15  # other processes' share of the pinned cores' time
    max_steal: float = 0.05  # stolen share of the pinned cores' time
    retries: int = 2  # a loaded process is measured again at most this many times
    wait_s: float = 2.0  # pause before a retry (a burst of load may pass)
    probe: bool = True  # run the speed probe around every process and record it (pipelines/speed_probe.py)
    # the probe's limit: a process is refused when a pinned core ran the probe more than this
    # much slower than its fastest probe (0.3: 30% slower); null: recorded, never refused for it
    max_slowdown: Optional[float] = 0.3
    # before each process, wait at most this long for the probe to come back within max_slowdown
    # (a process started in a slow episode would only be refused); 0: never wait
    speed_wait_s: float = 60.0


def validate_load(cfg: LoadConfig) -> None:
    for name in ("max_foreign_busy", "max_steal"):
        v = getattr(cfg, name)
        if not 0 <= v <= 1:
            raise ValueError(f"load.{name}: a share of CPU time in [0, 1], got {v}")
    if cfg.retries < 0:
        raise ValueError(f"load.retries: must be >= 0, got {cfg.retries}")
    if cfg.wait_s < 0:
        raise ValueError(f"load.wait_s: must be >= 0 seconds, got {cfg.wait_s}")
    if cfg.speed_wait_s < 0:
        raise ValueError(f"load.speed_wait_s: must be >= 0 seconds, got {cfg.speed_wait_s}")
    if cfg.max_slowdown is not None and not cfg.max_slowdown > 0:
        raise ValueError(f"load.max_slowdown: a share > 0 (0.3: 30% slower than the fastest probe) or null, "
                         f"got {cfg.max_slowdown}")


def _proc_stat(root: Path) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for line in (root / "proc/stat").read_text().splitlines():
        head, _, rest = line.partition(" ")
        if head.startswith("cpu") and head[3:].isdigit():
            out[int(head[3:])] = [int(v) for v in rest.split()]
    return out


def _loadavg(root: Path) -> float | None:
    try:
        return float((root / "proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _freqs(root: Path, cpus: Sequence[int]) -> dict[str, int] | str:
    out = {}
    for c in cpus:
        try:
            out[str(c)] = int((root / f"sys/devices/system/cpu/cpu{c}/cpufreq/scaling_cur_freq").read_text())
        except (OSError, ValueError):
            return "unknown"
    return out


def _own_cpu_s() -> float:
    """CPU time of this process and of its finished children (the measuring process)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class LoadWindow:
    """``with LoadWindow(cpus, probe) as w: <run one measuring process>`` then ``w.result``.
    The probes run outside the window's own figures (before its start, after its end), so
    the process's CPU accounting is what it was without them."""

    def __init__(self, cpus: Sequence[int] | None, root: str | os.PathLike = "/", probe: SpeedProbe | None = None):
        self.root = Path(root)
        self.cpus = sorted(cpus) if cpus else sorted(os.sched_getaffinity(0))
        self.probe = probe
        self.result: dict[str, Any] | None = None
        self.outside_own_s = 0.0  # the measuring process's CPU time getrusage cannot see (count_own)

    def count_own(self, cpu_s: float) -> None:
        """Count ``cpu_s`` CPU seconds as the measurement's own: a measuring process that is not
        this process's child (forked by the torch zygote) is invisible to getrusage."""
        self.outside_own_s += cpu_s

    def __enter__(self) -> "LoadWindow":
        self._probe0 = self.probe.sample() if self.probe else None
        self._la0 = _loadavg(self.root)
        self._f0 = _freqs(self.root, self.cpus)
        self._own0 = _own_cpu_s()
        self._stat0 = _proc_stat(self.root)
        self._t0 = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        stat1 = _proc_stat(self.root)
        wall = time.monotonic() - self._t0
        own = _own_cpu_s() - self._own0 + self.outside_own_s
        busy = steal = 0
        for c in self.cpus:
            a, b = self._stat0.get(c), stat1.get(c)
            if a is None or b is None:
                continue
            busy += sum(b[i] - a[i] for i in BUSY_COLUMNS if i < len(b))
            steal += (b[STEAL_COLUMN] - a[STEAL_COLUMN]) if len(b) > STEAL_COLUMN else 0
        capacity = max(wall, 1e-9) * len(self.cpus)
        foreign = max(busy * TICK_S - own, 0.0)
        f1 = _freqs(self.root, self.cpus)
        self.result = {
            "cpus": self.cpus, "wall_s": round(wall, 6), "tick_s": TICK_S,
            "loadavg_start": self._la0, "loadavg_end": _loadavg(self.root),
            "pinned_busy_s": round(busy * TICK_S, 6), "own_cpu_s": round(own, 6),
            "foreign_busy_s": round(foreign, 6), "foreign_busy_frac": round(min(foreign / capacity, 1.0), 4),
            "steal_frac": round(min(steal * TICK_S / capacity, 1.0), 4),
            "cpu_freq_khz": {"start": self._f0, "end": f1} if f1 != "unknown" and self._f0 != "unknown"
            else "unknown",
        }
        if self.probe:
            after = self.probe.sample()
            worst = {c: max(self._probe0[c], after[c]) for c in after}
            self.result["probe"] = {
                "before_s": {str(c): round(v, 7) for c, v in self._probe0.items()},
                "after_s": {str(c): round(v, 7) for c, v in after.items()},
                "best_s": {str(c): round(self.probe.best[c], 7) for c in after},
                "slowdown": round(self.probe.slowdown(worst), 4)}


def _tick_floor(load: dict[str, Any]) -> float:
    """Two clock ticks per pinned core, in CPU seconds: the least time /proc/stat can resolve."""
    return 2 * load["tick_s"] * len(load["cpus"])


def judged_share(load: dict[str, Any]) -> float:
    """The other processes' share of the pinned cores that :func:`judge` holds against the limit:
    0 at two clock ticks per core or less, which /proc/stat cannot resolve (a 10 ms process that
    saw one foreign tick reads 100%, and would otherwise be refused for one tick of rounding)."""
    return load["foreign_busy_frac"] if load["foreign_busy_s"] > _tick_floor(load) else 0.0


def judge(load: dict[str, Any], cfg: LoadConfig) -> str | None:
    """Why the process counts as taken under load (None: it does not)."""
    if not cfg.check:
        return None
    if judged_share(load) > cfg.max_foreign_busy:
        return (f"other processes used {load['foreign_busy_frac']:.0%} of CPUs {load['cpus']} "
                f"(limit {cfg.max_foreign_busy:.0%}; load average {load['loadavg_end']})")
    if load["steal_frac"] > cfg.max_steal and load["steal_frac"] * load["wall_s"] * len(load["cpus"]) > _tick_floor(load):
        return f"the hypervisor stole {load['steal_frac']:.0%} of CPUs {load['cpus']} (limit {cfg.max_steal:.0%})"
    probe = load.get("probe")
    if cfg.max_slowdown is not None and probe and probe["slowdown"] > cfg.max_slowdown:
        return (f"CPUs {load['cpus']} ran the speed probe {probe['slowdown']:.0%} slower than their fastest "
                f"(limit {cfg.max_slowdown:.0%}): a slow episode of the machine")
    return None
