"""The plan of a sweep, resolved once before anything runs.

For one scenario on one device: the point's protocol and its digest, the format the runner
reads, the profiled modes it offers (and why it does not offer the others), the pairs still to
measure with the finished processes an interrupted sweep left in ``.work/``, the pairs skipped
(done under the same digest, a failure on record, or held by the committed release) and the
speed probe's reference from the release. The sweep (``sweep.py``) only executes it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..artifacts import artifact_path
from ..release import Release, ReleaseConfig, reused_pairs
from ..runners import RUNNERS
from ..scenarios import Scenario
from .protocol import TRANSIENT_KINDS, MeasureConfig, protocol_digest, stopper
from .records import read_json

if TYPE_CHECKING:
    from ..devices.base import Device


@dataclass
class Pair:
    """One (model, scenario) pair in a sweep."""

    model_id: str
    source: str
    artifact: Path
    work: Path  # .work/<model_id>/
    processes: list[dict] = field(default_factory=list)  # finished e2e processes (samples, meta)
    profiled: dict[str, dict] = field(default_factory=dict)  # mode -> finished op/kernel process
    done: bool = False
    remeasured: int = 0  # processes of this pair measured again because they ran under load

    def samples(self) -> list[list[int]]:
        return [p["samples_ns"] for p in self.processes]

    def pooled(self) -> list[int]:
        return [s for p in self.processes for s in p["samples_ns"]]


@dataclass
class Plan:
    """What a sweep of one scenario measures, and how (see the module doc)."""

    scenario: Scenario
    protocol: MeasureConfig
    out: Path
    artifacts: Path
    digest: str
    format: str
    modes: list[str]  # profiled granularities (op, kernel) the runner records
    not_offered: dict[str, str]  # granularity asked for -> why the runner cannot record it
    rule: Any  # the stopping rule (pipelines/stats.py)
    pairs: list[Pair] = field(default_factory=list)
    skipped: int = 0  # pairs already done (records, failures on record, released)
    released: int = 0  # of them, pairs the release holds
    release: str | None = None  # the release consulted (its label), if any
    reference: dict[int, float] = field(default_factory=dict)  # CPU -> the release's probe seconds
    # profiled mode -> the mode whose process records it too (Runner.ops_in_kernel_mode: op -> kernel)
    shared: dict[str, str] = field(default_factory=dict)

    def own_modes(self) -> list[str]:
        """The profiled modes that run a process of their own."""
        return [m for m in self.modes if m not in self.shared]

    def record_path(self, model_id: str) -> Path:
        return self.out / f"{model_id}.json"

    def error_path(self, model_id: str) -> Path:
        return self.out / f"{model_id}.error.json"

    def is_done(self, model_id: str) -> bool:
        rec = read_json(self.record_path(model_id))
        if rec is not None and rec.get("protocol", {}).get("digest") == self.digest:
            return True
        err = read_json(self.error_path(model_id))
        return (err is not None and not self.protocol.retry_failed and err.get("protocol_digest") == self.digest
                and err.get("kind") not in TRANSIENT_KINDS)

    def pair(self, source: str, model_id: str) -> Pair:
        """A pair to measure, with the processes an interrupted sweep finished."""
        pair = Pair(model_id, source, artifact_path(self.artifacts, model_id, self.format),
                    self.out / ".work" / model_id)
        self.load_work(pair)
        return pair

    def load_work(self, pair: Pair) -> None:
        """Finished processes of an interrupted earlier sweep (same protocol only)."""
        if not pair.work.is_dir():
            return
        for p in sorted(pair.work.glob("p*.json"), key=lambda q: int(q.stem[1:]) if q.stem[1:].isdigit() else 0):
            d = read_json(p)
            if d and d.get("digest") == self.digest:
                pair.processes.append(d)
        for mode in self.modes:
            d = read_json(pair.work / f"{mode}.json")
            if d and d.get("digest") == self.digest:
                pair.profiled[mode] = d


def resolve_plan(device: Device, scenario: Scenario, protocol: MeasureConfig, out: Path, artifacts: Path,
                 models: Sequence[tuple[str, str]], release: ReleaseConfig | None = None) -> Plan:
    """The plan of measuring ``models`` ((source, model_id)) in ``scenario`` on ``device`` with
    the point's ``protocol``; ``release``: the release section (None: no release consulted)."""
    runner = RUNNERS[(scenario.framework, scenario.accelerator)]
    plan = Plan(scenario=scenario, protocol=protocol, out=Path(out), artifacts=Path(artifacts),
                digest=protocol_digest(protocol, scenario), format=runner.formats[scenario.precision],
                modes=[g for g in protocol.granularities if g != "e2e" and g in runner.granularities],
                not_offered={g: runner.missing_granularities.get(g, "not recorded by this runner")
                             for g in protocol.granularities if g not in runner.granularities},
                rule=stopper(protocol.stopping))
    if runner.ops_in_kernel_mode and {"op", "kernel"} <= set(plan.modes):
        plan.shared = {"op": "kernel"}
    held: set[tuple[str, str]] = set()
    if release is not None and release.folder:
        plan.release = release.folder
        held = reused_pairs(release, protocol.stopping)
        if protocol.load.probe and getattr(device, "kind", None) == "host":
            # the speed probe starts from the release's reference when this machine's processor
            # measured its rows (the control set too: it measures released pairs again)
            plan.reference = Release(release.folder).reference_for(device.name,
                                                                   str(device.describe().get("cpu_model")))
    for source, mid in models:
        if plan.is_done(mid):
            plan.skipped += 1
            continue
        if (mid, scenario.scenario_id) in held:  # landed from another machine
            plan.released += 1
            plan.skipped += 1
            continue
        plan.pairs.append(plan.pair(source, mid))
    return plan
