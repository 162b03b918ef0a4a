"""The speed probe: how fast the pinned CPUs are right before and right after a measuring process.

Why (issue 18): a small VM has episodes of several seconds in which everything runs markedly
slower, while the guest sees no steal and no other process's CPU time (fresh processes of one
network back to back run at one speed, then several in a row at a much slower one). The load check
(:mod:`pipelines.machine_load`) cannot see them, so a process taken in one was kept. The probe
runs a fixed piece of work (``native/src/probe.c``: float multiply-adds plus a streaming sweep;
the median of 5 timed reps after an untimed one, under a millisecond a rep) on each of the
scenario's CPUs, in a thread pinned to that CPU, just before and just after the process; its
duration over the CPU's reference speed is the *slow-down*. A process whose slow-down exceeds
``measure.load.max_slowdown`` is refused and measured again, like a loaded one.

The reference of a CPU is the fastest *median of WINDOW consecutive probes* seen on it in this
process, not the fastest single probe. The machine's fast mode has a spread of its own, with a
stray fast reading now and then: judged against the fastest single probe, which only ever gets
faster as probes accumulate, ordinary fast-mode readings read slow and most processes of a sweep
are refused. The median
of a window ignores a stray reading, and its minimum over the sweep still only gets faster, so
a long slow phase never becomes the reference once a fast stretch was seen. The sweep starts
with a short calibration (``calibrate``, more probes than a window). Each record keeps the raw
durations and the reference at the time, so a process can be re-judged from the record.
"""
from __future__ import annotations

import ctypes
import os
import statistics
import threading
import time
from collections import deque
from pathlib import Path
from typing import Sequence

PROBE_LIB = Path(__file__).resolve().parents[1] / "native" / "build" / "liblatbench_probe.so"
REPS = 5  # timed repetitions of the fixed work per probe, the median kept (under a millisecond each)
WINDOW = 8  # consecutive probes of a CPU whose median is a candidate reference (3 stray ones change nothing)

_lib = None


def _probe_lib(path: str | os.PathLike = PROBE_LIB):
    global _lib
    if _lib is None:
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: the speed probe is not built (run native/build.sh), "
                                    f"or set measure.load.probe: false to measure without it")
        lib = ctypes.CDLL(str(path))
        lib.lb_probe_ns.restype = ctypes.c_int64
        lib.lb_probe_ns.argtypes = [ctypes.c_int]
        lib.lb_probe_digest.restype = ctypes.c_double
        _lib = lib
    return _lib


def probe_once(cpu: int, reps: int = REPS) -> float:
    """Seconds the fixed work took in a thread pinned to ``cpu`` (ctypes releases the GIL, so
    nothing of this process runs beside it but the caller waiting in ``join``)."""
    lib = _probe_lib()
    out: list[float] = []
    err: list[BaseException] = []

    def work() -> None:
        try:
            os.sched_setaffinity(0, {cpu})  # pid 0: this thread only, not the process
            ns = lib.lb_probe_ns(reps)
            if ns < 0:
                raise OSError("clock_gettime failed in the speed probe")
            out.append(ns / 1e9)
        except BaseException as e:  # handed to the caller below
            err.append(e)

    t = threading.Thread(target=work, name=f"speed-probe-{cpu}")
    t.start()
    t.join()
    if err:
        raise err[0]
    return out[0]


_PROBES: dict[tuple[int, ...], "SpeedProbe"] = {}


def probe_for(cpus: Sequence[int] | None, calibrated: bool,
              reference: dict[int, float] | None = None) -> "SpeedProbe":
    """The process's probe of a CPU set: one reference per CPU set for the process's life, so
    every sweep of it (a point, the control set) is judged against the fastest probe seen.
    ``calibrated``: run the first calibration if it has not run yet (the load check needs a
    reference before its first verdict; a sweep that only records the probe does not).
    ``reference``: seconds per CPU the release's earlier sessions judged against
    (``RELEASE.json``'s ``probe_reference_s``); the probe starts from it (see SpeedProbe)."""
    key = tuple(sorted(cpus) if cpus else sorted(os.sched_getaffinity(0)))
    probe = _PROBES.setdefault(key, SpeedProbe(key))
    if reference:
        probe.adopt(reference)
    if calibrated and not probe.calibrated:
        probe.calibrate()
    return probe


class SpeedProbe:
    """Probes a CPU set and keeps a reference speed per CPU: the fastest median of ``window``
    consecutive probes (``best``; before the first full window, the median of what was seen)."""

    def __init__(self, cpus: Sequence[int] | None = None, reps: int = REPS, window: int = WINDOW,
                 reference: dict[int, float] | None = None):
        self.cpus = sorted(cpus) if cpus else sorted(os.sched_getaffinity(0))
        self.reps = reps
        self.recent: dict[int, deque[float]] = {c: deque(maxlen=window) for c in self.cpus}
        # fastest median of a full window, per CPU. A session that starts in a long slow phase
        # would take that phase as its speed and keep processes of a slow episode; the release's
        # reference from earlier sessions on the same processor (``reference``) is where it
        # starts, so only this session's faster windows lower it.
        self._floor: dict[int, float] = {}
        self.best: dict[int, float] = {}
        self.calibrated = False
        self.adopt(reference or {})

    def adopt(self, reference: dict[int, float]) -> None:
        """Take an earlier reference (seconds per CPU) as a full window's median: the
        reference becomes the faster of it and what this probe has seen."""
        for c in self.cpus:
            if c in reference:
                self._floor[c] = min(float(reference[c]), self._floor.get(c, float("inf")))
                self.best[c] = self._floor[c]

    def sample(self) -> dict[int, float]:
        """One probe on every CPU of the set; the reference follows (see :meth:`observe`)."""
        got = {c: probe_once(c, self.reps) for c in self.cpus}
        self.observe(got)
        return got

    def observe(self, readings: dict[int, float]) -> None:
        """Take probe durations (seconds) per CPU into the windows and lower the reference
        where a full window's median is faster than any before."""
        for c, s in readings.items():
            r = self.recent[c]
            r.append(s)
            m = statistics.median(r)
            if len(r) == r.maxlen:
                self._floor[c] = min(m, self._floor.get(c, m))
            self.best[c] = self._floor.get(c, m)

    def calibrate(self, probes: int = 16, spacing_s: float = 0.25) -> dict[int, float]:
        """A first reference: ``probes`` probes spread over about ``probes * spacing_s`` seconds
        (4 s: a slow episode lasts several seconds, so a calibration can fall inside one; later
        probes then lower the reference, and the records keep the raw durations). 16 probes
        are two full windows."""
        for i in range(probes):
            if i:
                time.sleep(spacing_s)
            self.sample()
        self.calibrated = True
        return dict(self.best)

    def slowdown(self, seen: dict[int, float]) -> float:
        """How much slower than the reference the slowest CPU of ``seen`` ran (0.0 = as fast
        or faster: a single probe may beat the median it is judged against)."""
        return max(0.0, max(s / self.best[c] - 1.0 for c, s in seen.items()))


__all__ = ["PROBE_LIB", "REPS", "WINDOW", "SpeedProbe", "probe_for", "probe_once"]
