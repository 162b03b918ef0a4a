"""Observing the machine while a process measures: the speed probe and the load.

A process runs inside a load window (``machine_load.py``: other processes' share of its pinned
CPUs, steal, load average, clocks) and between speed probes (``speed_probe.py``: the VM's slow
episodes, which no load figure shows). A process taken under load is run again
(``load.retries``); still loaded, its pair fails with kind ``loaded`` and its numbers are never
kept. Before a process the sweep waits, at most ``load.speed_wait_s``, for a slow episode to
pass. A process that ran outside its CPU set or on fewer threads than the scenario asks fails
its pair too (``check_affinity``, ``check_threads``).
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from ..machine_load import LoadConfig, LoadWindow, judge
from ..runners.records import NativeRun
from ..scenarios import Scenario
from ..speed_probe import SpeedProbe, probe_for

if TYPE_CHECKING:
    from ..devices.base import Device

SPEED_POLL_S = 2.0  # between speed probes while waiting for a slow episode to pass


class MeasureError(RuntimeError):
    """A pair that cannot be measured (its artifact is missing, it stayed loaded, its threads
    ran elsewhere); ``kind`` is the failure kind its error record states."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


class Observer:
    """Runs measuring processes under observation for one sweep (``reference``: CPU -> the
    speed probe's reference seconds to start from; ``counts``: the sweep's counters)."""

    def __init__(self, device: Device, scenario: Scenario, load: LoadConfig, reference: dict[int, float],
                 log: Callable[[str], None], counts: dict):
        self.device, self.scenario, self.cfg = device, scenario, load
        self.reference, self.log, self.counts = reference, log, counts
        self._probe: SpeedProbe | None = None
        self._probed = False

    def probe(self) -> SpeedProbe | None:
        """The speed probe of the scenario's CPUs (None: ``load.probe: false``), made once;
        calibrated first when its verdict counts (``load.check`` with a ``load.max_slowdown``)."""
        if not self._probed:
            self._probed = True
            lc = self.cfg
            if lc.probe:
                if self.reference:
                    self.log("speed probe: starting from the release's reference "
                             + ", ".join(f"CPU {c} {s * 1e3:.3f} ms" for c, s in sorted(self.reference.items())))
                self._probe = probe_for(self.scenario.cpus or None, calibrated=lc.check and lc.max_slowdown is not None,
                                        reference=self.reference)
        return self._probe

    def wait_for_speed(self, probe: SpeedProbe) -> None:
        """While the probe says the cores run slow, wait and probe again, at most
        ``load.speed_wait_s``; after the longest wait the process runs anyway, and the window's
        verdict decides."""
        lc = self.cfg
        slow = probe.slowdown(probe.sample())
        if slow <= lc.max_slowdown or lc.speed_wait_s <= 0:
            return
        t0 = time.monotonic()
        while slow > lc.max_slowdown and time.monotonic() - t0 < lc.speed_wait_s:
            time.sleep(SPEED_POLL_S)
            slow = probe.slowdown(probe.sample())
        waited = time.monotonic() - t0
        self.counts["speed_waits"] += 1
        self.counts["speed_wait_s"] = round(self.counts["speed_wait_s"] + waited, 1)
        self.log(f"waited {waited:.0f} s for CPUs {probe.cpus} to run at speed "
                 + ("(they do)" if slow <= lc.max_slowdown else f"(still {slow:.0%} slow: measuring anyway)"))

    def run(self, start: Callable[[], NativeRun], what: str, process: str,
            on_retry: Callable[[], None]) -> tuple[NativeRun, dict]:
        """One measuring process (``start`` runs it) with what the machine did meanwhile; run
        again while taken under load (``on_retry`` counts it), then :class:`MeasureError`.
        ``what`` names the process in the log, ``process`` in the error."""
        if getattr(self.device, "kind", None) != "host":
            return start(), {"observed": False, "reason": f"load is read on the host only (device kind "
                                                          f"{getattr(self.device, 'kind', '?')})"}
        lc = self.cfg
        probe = self.probe()
        for attempt in range(lc.retries + 1):
            if attempt:
                on_retry()
                time.sleep(lc.wait_s)
            if lc.check and lc.max_slowdown is not None and probe is not None:
                self.wait_for_speed(probe)
            with LoadWindow(self.scenario.cpus or None, probe=probe) as w:
                run = start()
                w.count_own(run.outside_cpu_s)
            load = {"observed": True, **w.result, "attempt": attempt}
            why = judge(load, lc)
            if why is None:
                return run, load
            self.log(f"loaded {what} (attempt {attempt + 1} of {lc.retries + 1}): {why}")
        raise MeasureError(f"{process} was taken under load {lc.retries + 1} times, last: {why}", "loaded")


def check_affinity(run: NativeRun, scenario: Scenario) -> None:
    """Every thread of the measuring process ran on the scenario's CPU set (else the numbers
    belong to another scenario: fail the pair rather than record them)."""
    end = run.end
    if scenario.cpus and end.get("affinity_ok") is False:
        bad = [t for t in end.get("thread_affinity", []) if sorted(t.get("cpus", [])) != list(scenario.cpus)]
        raise MeasureError(f"{run.meta.get('model')}: threads ran outside CPUs {list(scenario.cpus)}: "
                           + ", ".join(f"{t.get('name')}/{t.get('tid')} on {t.get('cpus')}" for t in bad[:3]), "cpus")


def check_threads(run: NativeRun, scenario: Scenario) -> None:
    """The process computed with the scenario's thread count: the runtime reports the threads
    it could compute on (``compute_threads_observed``: main + its pool threads, read from the
    OS at the end). Fewer than ``scenario.threads`` means the backend ignored the setting (as
    LiteRT's builtin kernels did before they got it under "cpu_delegate"): the numbers belong
    to a narrower scenario, so the pair fails rather than keeping them. More is allowed: the
    builtin kernels keep two pools (Eigen's and ruy's), every thread inside the CPU set."""
    if not scenario.cpus or not scenario.threads:
        return  # a GPU scenario: the host threads are not the compute
    end = run.end
    seen = end.get("compute_threads_observed")
    if seen is None:  # a runtime that does not count them: main + every non-writer thread
        seen = sum(t.get("role") != "writer" for t in end.get("thread_affinity", [])) or None
    if seen is None or seen < scenario.threads:
        raise MeasureError(f"{run.meta.get('model')}: {run.meta.get('mode')} process computed on {seen} thread(s), "
                           f"the scenario asks for {scenario.threads} (threads {end.get('threads_observed')}: "
                           + ", ".join(f"{t.get('role')}/{t.get('tid')}" for t in end.get("thread_affinity", [])[:6])
                           + ")", "threads")
