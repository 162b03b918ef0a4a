"""The speed probe: how fast the pinned CPUs are right before and right after a measuring process.

Why (issue 18): this VM has episodes of about 10 s in which everything runs about 1.75x slower,
while the guest sees no steal and no other process's CPU time (20 fresh processes of one network
back to back: twelve at 27 ms, then five in a row at 45-51 ms). The load check
(:mod:`pipelines.machine_load`) cannot see them, so a process taken in one was kept. The probe
runs a fixed piece of work (``native/src/probe.c``: float multiply-adds plus a streaming sweep;
the median of 5 timed reps after an untimed one, about 0.8 ms a rep here) on each of the
scenario's CPUs, in a thread pinned to that CPU, just before and just after the process; its
duration over the fastest probe seen on that CPU in this process is the *slow-down*. A process whose slow-down exceeds ``measure.load.max_slowdown`` is refused
and measured again, like a loaded one.

The reference is the fastest probe seen, so it only gets faster: the sweep starts with a short
calibration (``calibrate``), and every probe afterwards can lower it. Each record keeps the
raw durations and the reference at the time, so a process judged against a reference that
later improved can be re-judged from the record.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from pathlib import Path
from typing import Sequence

PROBE_LIB = Path(__file__).resolve().parents[1] / "native" / "build" / "liblatbench_probe.so"
REPS = 5  # timed repetitions of the fixed work per probe, the median kept (about 0.6 ms each here)

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


def probe_for(cpus: Sequence[int] | None, calibrated: bool) -> "SpeedProbe":
    """The process's probe of a CPU set: one reference per CPU set for the process's life, so
    every sweep of it (a point, the control set) is judged against the fastest probe seen.
    ``calibrated``: run the first calibration if it has not run yet (the load check needs a
    reference before its first verdict; a sweep that only records the probe does not)."""
    key = tuple(sorted(cpus) if cpus else sorted(os.sched_getaffinity(0)))
    probe = _PROBES.setdefault(key, SpeedProbe(key))
    if calibrated and not probe.calibrated:
        probe.calibrate()
    return probe


class SpeedProbe:
    """Probes a CPU set and keeps the fastest duration seen per CPU (the reference)."""

    def __init__(self, cpus: Sequence[int] | None = None, reps: int = REPS):
        self.cpus = sorted(cpus) if cpus else sorted(os.sched_getaffinity(0))
        self.reps = reps
        self.best: dict[int, float] = {}
        self.calibrated = False

    def sample(self) -> dict[int, float]:
        """One probe on every CPU of the set; lowers the reference where it was faster."""
        got = {c: probe_once(c, self.reps) for c in self.cpus}
        for c, s in got.items():
            self.best[c] = min(s, self.best.get(c, s))
        return got

    def calibrate(self, probes: int = 16, spacing_s: float = 0.25) -> dict[int, float]:
        """A first reference: ``probes`` probes spread over about ``probes * spacing_s`` seconds
        (4 s: a slow episode lasts about 10 s, so a calibration can fall inside one; later
        probes then lower the reference, and the records keep the raw durations)."""
        for i in range(probes):
            if i:
                time.sleep(spacing_s)
            self.sample()
        self.calibrated = True
        return dict(self.best)

    def slowdown(self, seen: dict[int, float]) -> float:
        """How much slower than the reference the slowest CPU of ``seen`` ran (0.0 = as fast)."""
        return max(s / self.best[c] - 1.0 for c, s in seen.items())


__all__ = ["PROBE_LIB", "REPS", "SpeedProbe", "probe_for", "probe_once"]
