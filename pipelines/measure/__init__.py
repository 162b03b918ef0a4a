"""The ``measure`` stage: every exported network in one scenario of one device.

DVC runs it as a matrix over the CPU grid of the ``scenario`` config section and over its GPU
precisions (dvc.yaml); each cell measures one scenario into
``<data_dir>/measurements/<device>/<scenario_id>/`` (``SCENARIO.json``, one record or error
record per pair, traces, ``measure.log``). Its parts, in the order a cell runs them:

- ``stage``: the entry point of one grid point (:func:`run_measure`);
- ``protocol``: the config schema, the grid and its points, the protocol digest;
- ``plan``: what to measure, resolved once (pairs, reused and released pairs, the speed
  probe's reference, the point's protocol);
- ``sweep``: executing the plan (interleaving, stopping, resuming, failures);
- ``observe``: the speed probe and the machine's load around every process;
- ``records``: what a finished pair becomes (:class:`Record`, which assemble reads).

docs/measure.md has the protocol, the files and the failure kinds.
"""
from .observe import MeasureError, check_affinity, check_threads
from .plan import Pair, Plan, resolve_plan
from .protocol import (GRANULARITIES, TRANSIENT_KINDS, MeasureConfig, PointConfig, StageScenario, StoppingConfig,
                       grid_dir_name, grid_formats, grid_points, list_models, point_config, point_name,
                       protocol_digest, reading_points, scenario_dir, stage_scenario, validate_config, validate_grid)
from .records import Record, RecordError, aggregate_events, load_summary, read_json, write_json
from .stage import not_offered, run_measure, scenario_status
from .sweep import Sweep, build_record, tidy_work

__all__ = ["GRANULARITIES", "TRANSIENT_KINDS", "MeasureConfig", "MeasureError", "Pair", "Plan", "PointConfig", "Record", "RecordError",
           "StageScenario", "StoppingConfig", "Sweep", "aggregate_events", "build_record", "check_affinity",
           "check_threads", "grid_dir_name", "grid_formats", "grid_points", "list_models", "load_summary",
           "not_offered", "point_config", "point_name", "protocol_digest", "read_json", "reading_points",
           "resolve_plan", "run_measure", "scenario_dir", "scenario_status", "stage_scenario", "tidy_work",
           "validate_config", "validate_grid", "write_json"]
