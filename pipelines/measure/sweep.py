"""The sweep: executing a plan.

The pairs of a plan are shuffled (``order_seed``) and measured in blocks of ``chunk``; inside a
block, round k runs process k of every pair not yet done, so drift of a shared machine spreads
over all of them. A pair's e2e processes go on until the stopping rule is met, then its op and
kernel processes run once each, and its record is written. Each finished process is kept under
``.work/<model_id>/`` until its pair is complete, so a killed sweep resumes where it stopped; a
failure becomes ``<model_id>.error.json`` and the sweep goes on.
"""
from __future__ import annotations

import errno
import random
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from tqdm import tqdm

from foundation.atomic import remove_orphans

from ..artifacts import dropped_sidecar
from ..runners.records import NativeRun, NativeRunError
from ..stats import pooled_summary, summarize
from .observe import MeasureError, Observer, check_affinity, check_threads
from .plan import Pair, Plan
from .records import (E2E, Artifact, LoadSummary, Profiled, Protocol, Record, Stats, Stopping, aggregate_events,
                      load_summary, median_or_none, meta_digest, write_json)

if TYPE_CHECKING:
    from ..devices.base import Device


def tidy_work(out: Path) -> None:
    """Removes ``out/.work`` once no pair has unfinished processes in it (an empty folder)."""
    try:
        (out / ".work").rmdir()  # only ever removes an empty folder
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
            raise


class Sweep:
    """Executes a :class:`~pipelines.measure.plan.Plan` on a device (the plan's, or another
    device offering the same scenario: a phone of the farm)."""

    def __init__(self, plan: Plan, device: Device, progress: bool = True, log: Callable[[str], None] | None = None):
        self.plan, self.device, self.scenario, self.cfg = plan, device, plan.scenario, plan.protocol
        self.out = plan.out
        self.progress = progress
        # remeasured: processes run again because they were taken under load; refused: pairs
        # failed because they stayed loaded (kind "loaded")
        self.counts = {"ok": 0, "failed": 0, "skipped": plan.skipped, "remeasured": 0, "refused": 0,
                       "released": plan.released, "speed_waits": 0, "speed_wait_s": 0.0}
        self._log_file = self.out / "measure.log"
        self._log_extra = log
        self.observer = Observer(device, plan.scenario, plan.protocol.load, plan.reference, self.log, self.counts)
        self.runs_made = 0  # timed e2e runs made by this sweep (benchmarks read it)
        self.on_process: Callable[[dict], None] | None = None  # called with each finished e2e process
        self.say: Callable[[str], None] = tqdm.write  # a pair's failure, as it happens (profile: its own error)
        # sweeps sharing one scenario folder at once (the farm's phones) leave .work to their driver
        self.tidy_work = True

    def log(self, msg: str) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        with self._log_file.open("a") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {msg}\n")
        if self._log_extra:
            self._log_extra(msg)

    # -- one pair
    def _e2e_runs(self, pair: Pair) -> int:
        s = self.cfg.stopping
        if s.policy == "fixed":  # split the runs as evenly as possible, earlier processes take the rest
            k = len(pair.processes)
            return s.runs // self.cfg.processes + (1 if k < s.runs % self.cfg.processes else 0)
        return s.batch

    def _enough(self, pair: Pair) -> str | None:
        """Why the pair needs no more e2e processes (None: it needs another)."""
        n = len(pair.processes)
        if self.cfg.stopping.policy == "fixed":
            return "fixed_runs" if n >= self.cfg.processes else None
        if n < self.cfg.processes:
            return None
        if n >= self.cfg.stopping.max_processes:
            return "max_processes"
        return "ci_width" if self.plan.rule.stop_reason(pair.pooled()) == "ci_width" else None

    def _remaining(self, pair: Pair) -> int:
        """Processes the pair still needs as planned (adaptive pairs may need more)."""
        return max(self.cfg.processes - len(pair.processes), 0) + sum(m not in pair.profiled
                                                                       for m in self.plan.own_modes())

    def _run(self, pair: Pair, mode: str, runs: int, tag: str) -> NativeRun:
        if not pair.artifact.is_file():
            side = dropped_sidecar(pair.artifact.parent, self.plan.format)
            why = (f"pruned once its pairs were released, see {side.name}; `latbench prune --restore` and export "
                   "write it again") if side.is_file() else (f"export {self.plan.format} failed or was not "
                                                             "configured; see the export manifest")
            raise MeasureError(f"{pair.artifact}: artifact missing ({why})", "artifact_missing")
        pair.work.mkdir(parents=True, exist_ok=True)
        records = pair.work / f"{tag}.records.jsonl"
        trace = (self.out / f"{pair.model_id}.{mode}.trace.json") if mode != "e2e" else None
        kwargs = {"engine": self.cfg.pytorch_engine} if self.scenario.framework == "pytorch" else {}
        try:
            return self.device.run(self.scenario.framework, pair.artifact, scenario=self.scenario, mode=mode,
                                   warmup=self.cfg.warmup, runs=runs,
                                   overhead_pairs=self.cfg.overhead_pairs if mode != "e2e" else 0,
                                   records_path=records, trace_path=trace, timeout=self.cfg.timeout, **kwargs)
        finally:
            records.unlink(missing_ok=True)  # the record keeps what matters; traces stay

    def _observed_run(self, pair: Pair, mode: str, runs: int, tag: str) -> tuple[NativeRun, dict]:
        def again() -> None:
            self.counts["remeasured"] += 1
            pair.remeasured += 1

        return self.observer.run(lambda: self._run(pair, mode, runs, tag), f"{pair.model_id} {tag}",
                                 f"{pair.artifact}: the {mode} process", again)

    def _e2e_process(self, pair: Pair) -> None:
        k = len(pair.processes)
        run, load = self._observed_run(pair, "e2e", self._e2e_runs(pair), f"p{k}")
        check_affinity(run, self.scenario)
        check_threads(run, self.scenario)
        samples = [int(r["duration_ns"]) for r in run.runs]
        self.runs_made += len(samples)
        proc = {"digest": self.plan.digest, "process": k, "samples_ns": samples,
                "start_ns": min(r["start_ns"] for r in run.runs), "end_ns": max(r["end_ns"] for r in run.runs),
                "meta": meta_digest(run.meta), "affinity_ok": run.end.get("affinity_ok"),
                "unix_ns": run.meta.get("start_unix_ns"), "load": load,
                "page_faults_per_run": run.end.get("page_faults_per_run")}
        write_json(pair.work / f"p{k}.json", proc)
        pair.processes.append(proc)
        if self.on_process:
            self.on_process(proc)

    def _profiled_process(self, pair: Pair, mode: str) -> None:
        run, load = self._observed_run(pair, mode, self.cfg.op_runs, mode)
        check_affinity(run, self.scenario)
        check_threads(run, self.scenario)
        d = {"digest": self.plan.digest, "mode": mode, "meta": meta_digest(run.meta),
             "samples_ns": [int(r["duration_ns"]) for r in run.runs], "overhead": run.overhead,
             "ops": aggregate_events(run.ops, run.runs) if run.ops else [],
             "kernels": aggregate_events(run.kernels, run.runs) if mode == "kernel" else [],
             "end": {k: v for k, v in run.end.items() if k != "thread_affinity"},
             "trace": f"{pair.model_id}.{mode}.trace.json", "load": load}
        write_json(pair.work / f"{mode}.json", d)
        pair.profiled[mode] = d

    def _shared_profile(self, pair: Pair, mode: str, by: str) -> None:
        """``mode``'s part from the process of ``by``, which recorded its rows too (its samples,
        overhead and trace are that process's)."""
        d = {**pair.profiled[by], "mode": mode, "kernels": []}
        write_json(pair.work / f"{mode}.json", d)
        pair.profiled[mode] = d

    # -- the sweep
    def run(self, pairs: Sequence[Pair] | None = None) -> dict[str, int]:
        """Measure ``pairs`` (default: every pair of the plan); returns the counts."""
        remove_orphans(self.out)  # half-written records of a killed sweep
        pairs = self.plan.pairs if pairs is None else pairs
        order = random.Random(self.cfg.order_seed).sample(list(pairs), len(pairs))
        released = f" in the release {self.plan.release}" if self.plan.release else ""
        self.log(f"start: {len(pairs)} pairs to measure, {self.counts['skipped']} already done "
                 f"({self.counts['released']} of them{released or ' released'}) "
                 f"(protocol {self.plan.digest}, {self.cfg.stopping.policy} stopping)")
        bar = tqdm(total=sum(self._remaining(p) for p in order), desc=f"measure {self.scenario.scenario_id}",
                   unit="proc", disable=not self.progress, dynamic_ncols=True)
        size = self.cfg.chunk or len(order) or 1
        for start in range(0, len(order), size):
            self._interleave(order[start:start + size], bar)
        bar.close()
        if self.tidy_work:
            tidy_work(self.out)
        self.log(f"end: {self.counts['ok']} measured, {self.counts['failed']} failed "
                 f"({self.counts['refused']} refused as taken under load), {self.counts['skipped']} already done, "
                 f"{self.counts['remeasured']} processes measured again under load, "
                 f"{self.counts['speed_wait_s']:.0f} s waited for the CPUs to run at speed")
        return dict(self.counts)

    def _interleave(self, pairs: Sequence[Pair], bar: tqdm) -> None:
        """Measure ``pairs`` to the end, interleaved: round k runs process k of every pair not yet done."""
        active = list(pairs)
        while active:
            still = []
            for pair in active:  # a round: one more process of every pair not yet done, interleaved
                try:
                    if self._enough(pair) is None:
                        self._e2e_process(pair)
                        bar.update(1)
                        if self._enough(pair) is None:
                            if len(pair.processes) >= self.cfg.processes:
                                bar.total += 1  # adaptive: one more process than planned
                            still.append(pair)
                            continue
                    for mode in self.plan.own_modes():  # op/kernel processes once the e2e part is complete
                        if mode not in pair.profiled:
                            self._profiled_process(pair, mode)
                            bar.update(1)
                    for mode, by in self.plan.shared.items():
                        if mode not in pair.profiled:
                            self._shared_profile(pair, mode, by)
                    self._finish(pair)
                except (NativeRunError, MeasureError) as e:
                    bar.update(self._remaining(pair))  # its planned processes will not run
                    self._fail(pair, e)
            active = still

    def _finish(self, pair: Pair) -> None:
        write_json(self.plan.record_path(pair.model_id), build_record(self.plan, pair, self._enough(pair)).to_json())
        self.plan.error_path(pair.model_id).unlink(missing_ok=True)
        shutil.rmtree(pair.work, ignore_errors=True)
        pair.done = True
        self.counts["ok"] += 1

    def _fail(self, pair: Pair, e: Exception) -> None:
        kind = getattr(e, "kind", "runtime")
        msg = " ".join(str(e).split())
        write_json(self.plan.error_path(pair.model_id), {
            "model_id": pair.model_id, "scenario_id": self.scenario.scenario_id, "kind": kind, "error": msg,
            "artifact": str(pair.artifact), "protocol_digest": self.plan.digest, "unix_time": time.time(),
            "processes_done": len(pair.processes)})
        shutil.rmtree(pair.work, ignore_errors=True)
        self.counts["failed"] += 1
        self.counts["refused"] += kind == "loaded"
        self.log(f"failed {pair.model_id}: {kind}: {msg}")
        self.say(f"measure: {pair.model_id}: {kind}: {msg}")


def build_record(plan: Plan, pair: Pair, stop_reason: str | None) -> Record:
    """The record of a pair whose processes are all done (``stop_reason``: why it needed no more)."""
    cfg = plan.protocol
    pooled = pooled_summary(pair.samples(), cfg.stopping.level)
    e2e = E2E(
        # the headline: median of the per-process medians (robust to between-process drift)
        latency_ms=pooled["median_of_medians_ms"], pooled=Stats(**pooled["pooled"]),
        **{k: v for k, v in pooled.items() if k not in ("per_process", "pooled")},
        # counted by the torch worker (its allocator: pipelines/runners/allocator.py); None elsewhere
        page_faults_per_run=median_or_none([p.get("page_faults_per_run") for p in pair.processes]),
        # per process: its statistics and, on phones, the device state it ran in
        # (clocks, thermal status) which may change between processes
        per_process=[{**s, "start_ns": p["start_ns"], "end_ns": p["end_ns"],
                      **({"load": p["load"]} if "load" in p else {}),
                      **({"page_faults_per_run": p["page_faults_per_run"]}
                         if p.get("page_faults_per_run") is not None else {}),
                      **({"device": p["meta"]["device"]} if "device" in p["meta"] else {})}
                     for s, p in zip(pooled["per_process"], pair.processes)],
        samples_ns=pair.samples(),
        start_ns=min(p["start_ns"] for p in pair.processes),
        end_ns=max(p["end_ns"] for p in pair.processes),
    )
    protocol = Protocol(
        digest=plan.digest, processes=len(pair.processes), warmup=cfg.warmup, interleaved=True,
        order_seed=cfg.order_seed, chunk=cfg.chunk,
        stopping=Stopping(policy=cfg.stopping.policy, params=asdict(cfg.stopping), runs=pooled["n"],
                          stop_reason=stop_reason),
        granularities=["e2e", *plan.modes], granularities_not_offered=plan.not_offered or {},
    )
    load = LoadSummary(**load_summary([p.get("load") for p in pair.processes]
                                      + [d.get("load") for d in pair.profiled.values()], pair.remeasured),
                       check=asdict(cfg.load))  # the thresholds it was held to (check off: none)
    profiled = {mode: Profiled(summary=Stats(**summarize(d["samples_ns"])), overhead=d["overhead"], ops=d["ops"],
                               kernels=d["kernels"], trace=d["trace"], end=d["end"], runtime=d["meta"],
                               load=d.get("load"))
                for mode, d in pair.profiled.items()}
    return Record(model_id=pair.model_id, source=pair.source, scenario=plan.scenario.to_dict(),
                  artifact=Artifact(format=plan.format, path=str(pair.artifact), bytes=pair.artifact.stat().st_size),
                  protocol=protocol, e2e=e2e, runtime=pair.processes[0]["meta"], load=load, **profiled)
