"""Writing a calibration's shelf entry into the user's shelf folder.

The entry has the committed shelf's layout (:mod:`shelf`): ``<shelf>/<scenario>/`` holds the
saved predictor and ``held_out.json`` (the held-out networks, measured and predicted, so anyone
can check the stated accuracy), and ``<shelf>/INDEX.json`` gains the scenario, with
``origin: calibration`` and what it was calibrated on (device, networks, pool, rounds, budget,
the candidates' cross-validated errors). A rescaled zoo entry keeps the source's saved
predictor and the two numbers of its rescaling (``scale``), which :class:`shelf.store.Shelf`
applies.
"""
from __future__ import annotations

import datetime as _dt
import json
import shutil
from pathlib import Path
from typing import Any

from ..store import HELD_OUT, INDEX, INDEX_SCHEMA

ORIGIN = "calibration"


def write_entry(shelf_dir: Path, scenario_id: str, *, predictor_name: str, params: dict[str, Any],
                accuracy: dict[str, Any], training: dict[str, Any], held_out: dict[str, Any],
                estimator: Any = None, copy_from: Path | None = None, scale: dict[str, Any] | None = None) -> dict:
    """Write the entry (the fitted ``estimator``, or the saved predictor folder ``copy_from`` with
    its ``scale``) and return it as INDEX.json holds it."""
    from leaderboard.baselines import save_predictor

    from ..build import _git_commit, _slug

    shelf_dir = Path(shelf_dir)
    folder = shelf_dir / _slug(scenario_id)
    if folder.exists():
        shutil.rmtree(folder)
    if copy_from is not None:
        shutil.copytree(copy_from, folder)
    else:
        save_predictor(estimator, folder)
    (folder / HELD_OUT).write_text(json.dumps({"scenario_id": scenario_id, **held_out}) + "\n")
    index_path = shelf_dir / INDEX
    index = json.loads(index_path.read_text()) if index_path.is_file() else {"schema": INDEX_SCHEMA, "scenarios": {}}
    entry: dict[str, Any] = {"folder": folder.name, "predictor": predictor_name, "params": params,
                             "accuracy": accuracy, "origin": ORIGIN, "training": training,
                             "built": {"date": _dt.date.today().isoformat(), "commit": _git_commit()}}
    if scale is not None:
        entry["scale"] = scale
    index["scenarios"][scenario_id] = entry
    index["scenarios"] = dict(sorted(index["scenarios"].items()))
    index_path.write_text(json.dumps(index, indent=1) + "\n")
    return entry


__all__ = ["ORIGIN", "write_entry"]
