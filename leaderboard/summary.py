"""The board's figures in the forms DVC compares between runs (``dvc exp show``, ``dvc metrics
diff``, ``dvc plots diff``; declared in the root dvc.yaml), written beside the site by
``leaderboard render``:

- ``summary.json``: per track and entry the aggregate metrics (MAPE, +-10% accuracy, rank
  correlation and the track's primary metric), nested so DVC shows ``<track>.<entry>.mape``;
- ``board.csv``: one row per (track, entry) with the same figures, the data of a bar plot.
"""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

COLUMNS = ("mape", "acc10", "spearman")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def board_rows(status: dict[str, Any], by_track: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per scored (track, entry), tracks and entries in name order."""
    rows = []
    for track in sorted(by_track):
        primary = (status.get(track) or {}).get("primary", "mape")
        for doc in sorted(by_track[track], key=lambda d: d["entry"]):
            agg = doc["result"]["aggregate"]
            row = {"track": track, "entry": doc["entry"], "label": f"{track} / {doc['entry']}",
                   "kind": doc["meta"].get("kind", "submission"), "primary": primary}
            row.update({m: _num(agg.get(m)) for m in COLUMNS})
            rows.append(row)
    return rows


def write_summary(status: dict[str, Any], by_track: dict[str, list[dict[str, Any]]], out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = board_rows(status, by_track)
    nested: dict[str, dict[str, Any]] = {}
    for r in rows:
        nested.setdefault(r["track"], {})[r["entry"]] = {m: r[m] for m in COLUMNS if r[m] is not None}
    summary = out / "summary.json"
    summary.write_text(json.dumps(nested, indent=1, sort_keys=True) + "\n")
    board = out / "board.csv"
    with open(board, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["track", "entry", "label", "kind", "primary", *COLUMNS])
        w.writeheader()
        w.writerows(rows)
    return [summary, board]
