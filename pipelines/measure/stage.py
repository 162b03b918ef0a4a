"""The measure stage's entry point: one grid point, from the config to the records.

:func:`run_measure` takes the point's protocol (``protocol.py``), resolves its plan
(``plan.py``) and executes it (``sweep.py``), which writes the records (``records.py``); a
point the device or the config does not offer writes ``SCENARIO.json`` saying why.
"""
from __future__ import annotations

import copy
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .plan import Plan, resolve_plan
from .protocol import StageScenario, grid_dir_name, list_models, point_config, point_name, stage_scenario
from .records import write_json
from .sweep import Sweep

if TYPE_CHECKING:
    from ..devices.base import Device


def not_offered(out: Path, reason: str, device_name: str, framework: str, precision: str, cores: str | None,
                accelerator: str) -> dict[str, Any]:
    """A grid point the device (or the config) does not offer: ``SCENARIO.json`` says why (DVC
    needs the stage's output) and nothing is measured."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "SCENARIO.json", {"status": "not_offered", "reason": reason, "device": device_name,
                                       "framework": framework, "precision": precision,
                                       "cores": cores if accelerator == "cpu" else None, "accelerator": accelerator})
    return {"scenario_id": out.name, "status": "not_offered", "reason": reason, "out": out,
            "ok": 0, "failed": 0, "skipped": 0}


def scenario_status(plan: Plan, device: Device, models: int, **more: Any) -> dict[str, Any]:
    """``SCENARIO.json`` of a measured grid point."""
    return {"status": "measured", "scenario": plan.scenario.to_dict(), "device": device.describe(),
            "protocol_digest": plan.digest, "measure": asdict(plan.protocol), "models": models,
            "granularities": ["e2e", *plan.modes], "granularities_not_offered": plan.not_offered, **more}


def run_measure(cfg: Any, framework: str, precision: str, cores: str | None, *, threads: int | None = None,
                accelerator: str = "cpu", device: Device | None = None, models_dir: str | Path | None = None,
                artifacts_dir: str | Path | None = None, out_root: str | Path | None = None,
                progress: bool = True) -> dict[str, Any]:
    """Measure the selected networks in one scenario of the configured device: the point's
    protocol, then its plan, then the sweep.

    Returns ``{"scenario_id", "status" (measured | not_offered), "out", counts...}``. A grid
    point the device does not offer, or that ``scenario.accelerators`` or ``measure.points``
    leaves out, writes ``SCENARIO.json`` with the reason and measures nothing. ``cores`` is
    needed on the CPU only."""
    from ..devices import make_device

    device = device or make_device(cfg.device)
    models_dir = Path(models_dir or Path(cfg.data_dir) / "models")
    artifacts_dir = Path(artifacts_dir or Path(cfg.data_dir) / "artifacts")
    out_root = Path(out_root or Path(cfg.data_dir) / "measurements" / device.name)
    grid_accelerators = list(getattr(getattr(cfg, "scenario", None), "accelerators", None) or [accelerator])
    point = point_name(framework, precision, cores, accelerator)
    m = point_config(cfg.measure, point)
    if accelerator not in grid_accelerators:
        st = StageScenario(None, f"scenario.accelerators ({', '.join(grid_accelerators)}) leaves out {accelerator}")
    elif m is None:
        st = StageScenario(None, f"measure.points ({', '.join(cfg.measure.points)}) leaves out {point}")
    else:
        st = stage_scenario(device, framework, precision, cores, threads, accelerator)
    if st.scenario is None:
        return not_offered(out_root / grid_dir_name(device.name, framework, precision, cores, accelerator),
                           st.reason, device.name, framework, precision, cores, accelerator)
    scenario = st.scenario
    out = out_root / scenario.scenario_id
    cfg = copy.copy(cfg)
    cfg.measure = m  # the point's protocol (measure.points)
    models = list_models(cfg, models_dir, f"{framework}-{accelerator}")
    with device.lock(out_root / ".lock"):
        plan = resolve_plan(device, scenario, m, out, artifacts_dir, models, getattr(cfg, "release", None))
        write_json(out / "SCENARIO.json", scenario_status(plan, device, len(models)))
        sweep = Sweep(plan, device, progress=progress)
        counts = sweep.run()
    return {"scenario_id": scenario.scenario_id, "status": "measured", "out": out, **counts,
            "runs_made": sweep.runs_made}
