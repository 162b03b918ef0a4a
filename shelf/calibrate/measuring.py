"""Measuring a calibration's networks with the suite's runtime and protocol.

A :class:`Bench` is one scenario on one device, measured exactly as the measure stage measures
it: the networks' artifacts are written by the export stage's exporter, then a plan of the
measure stage (``pipelines.measure.resolve_plan``) is executed by its sweep, under the composed
configuration's protocol (the release's by default: the same processes, stopping rule, load
checks and speed probe). Records land in ``<work>/measurements/<device>/<scenario_id>/``, so a
stopped calibration resumes where the sweep stopped, and :meth:`Bench.dataset` assembles them
with the assemble stage into the dataset tables the predictors read. A process taken under load
is measured again and then refused, as the measure stage refuses it; a refused network is a
failure of the calibration's, not a number.
"""
from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, Callable, Sequence

from . import CalibrateError
from .pool import Pool

# the generator sections of conf/generator/release.yaml's overlay: the pool draws from the spaces
# and zoo families the release measured
RELEASE_GENERATORS = "[synthetic,zoo,nasbench201,pytorch,transformer,release]"


def calibration_config(measure: str = "release", granularities: Sequence[str] = (),
                       overrides: Sequence[str] = (), check_load: bool = True) -> Any:
    """The composed configuration a calibration measures under: the ``measure`` protocol (its
    processes, stopping rule, load checks and probe) with nothing of its own to measure (no
    points, sources or models: the calibration chooses the networks), e2e plus
    ``granularities``, the release's generator sections, and the ``overrides`` (``device=...``).
    ``check_load=False`` keeps processes measured under load (``--allow-load``)."""
    from pipelines.config import compose, validate

    cfg = validate(compose([f"measure={measure}", f"generator={RELEASE_GENERATORS}", *overrides]))
    m = copy.deepcopy(cfg.measure)
    m.points, m.sources, m.runner_sources, m.models = {}, [], {}, []
    m.granularities = ["e2e", *[g for g in granularities if g != "e2e"]]
    if not check_load:
        m.load.check = False
    cfg.measure = m
    return cfg


class Bench:
    """One scenario of one device, measured into ``<work>`` (see the module doc)."""

    def __init__(self, cfg: Any, device: Any, scenario: Any, work: Path, pool: Pool, allow_load: bool = False):
        self.cfg, self.device, self.scenario, self.pool = cfg, device, scenario, pool
        self.work = Path(work)
        self.protocol = copy.deepcopy(cfg.measure)
        if allow_load:
            self.protocol.load.check = False
        self.out = self.work / "measurements" / device.name / scenario.scenario_id
        from pipelines.runners import RUNNERS

        self.format = RUNNERS[(scenario.framework, scenario.accelerator)].formats[scenario.precision]

    def export(self, ids: Sequence[str]) -> list[str]:
        """Write the artifacts of ``ids`` not yet written; the ids whose export failed (their
        ``.error.json`` says why)."""
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up lines, before it loads
        from generators.export.formats import FORMATS, exporter_version
        from pipelines.export import export_model

        version = exporter_version()
        options = {"int8_engine": self.cfg.export.int8_engine, "calibration_samples": self.cfg.export.calibration_samples}
        failed = []
        for mid in ids:
            if (self.work / "artifacts" / mid / FORMATS.get(self.format).filename).is_file():
                continue
            res = export_model(str(self.pool.ir_path(mid)), [self.format], str(self.work / "artifacts"), options,
                               version)
            if res[0]["status"] != "ok":
                failed.append(mid)
        return failed

    def measure(self, ids: Sequence[str], progress: bool = True,
                on_pair: Callable[[], None] | None = None) -> dict[str, int]:
        """Measure ``ids`` (exporting them first); pairs done earlier under the same protocol are
        skipped. Returns the sweep's counts."""
        from pipelines.measure import Sweep, resolve_plan
        from pipelines.measure.stage import scenario_status
        from pipelines.measure.records import write_json

        bad = set(self.export(ids))
        pairs = [(self.pool.source_of(m), m) for m in ids if m not in bad]
        with self.device.lock(self.out.parent / ".lock"):
            plan = resolve_plan(self.device, self.scenario, self.protocol, self.out, self.work / "artifacts", pairs,
                                None)
            write_json(self.out / "SCENARIO.json", scenario_status(plan, self.device, len(pairs)))
            sweep = Sweep(plan, self.device, progress=progress)
            if not progress:
                sweep.say = lambda line: None
            counts = sweep.run()
        counts["export_failed"] = len(bad)
        return counts

    def latencies(self) -> dict[str, float]:
        """model_id -> measured e2e latency (ms) of every record in the scenario folder."""
        from pipelines.assemble import read_record

        out = {}
        for p in sorted(self.out.glob("*.json")):
            if p.name == "SCENARIO.json" or p.name.endswith(".error.json"):
                continue
            rec = read_record(p)
            out[rec.model_id] = float(rec.e2e.latency_ms)
        return out

    def failures(self) -> dict[str, str]:
        """model_id -> the kind and message of its failure on record (the measurement's
        ``.error.json``, else its export's)."""
        import json

        out = {}
        for p in sorted(self.out.glob("*.error.json")):
            d = json.loads(p.read_text())
            out[str(d.get("model_id") or p.name[:-len(".error.json")])] = f"{d.get('kind')}: {d.get('error')}"[:300]
        for mid in self.pool.ids:
            err = self.work / "artifacts" / mid / f"{self.format}.error.json"
            if err.is_file():
                out[mid] = "export: " + str(json.loads(err.read_text()).get("error"))[:300]
        return out

    def dataset(self) -> Any:
        """The assembled tables of everything measured so far, as a :class:`pipelines.dataset.load.Dataset`."""
        from pipelines.assemble import AssembleError, assemble
        from pipelines.dataset.load import Dataset

        try:
            a = assemble(self.work)
        except AssembleError as e:
            raise CalibrateError(f"assembling {self.work}: {e}") from None
        return Dataset(a.tables, path=self.work)


__all__ = ["Bench", "RELEASE_GENERATORS", "calibration_config"]
