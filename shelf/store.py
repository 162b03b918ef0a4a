"""A shelf folder, read: :class:`Shelf` loads ``INDEX.json``, each scenario's saved predictor on
first use (only the scenarios asked: numpy and pandas are imported when one is loaded; no
candidate imports torch or scikit-learn to predict), and predicts batches of graphs or breaks one
graph down per op.

Shelves layer: :meth:`Shelf.open` reads the committed shelf and, over it, the user's shelf
(``$LATBENCH_SHELF``, else ``data/shelf`` under the working directory), where ``latbench
calibrate`` writes the entries of the user's own devices; a user entry of a scenario the
committed shelf has too takes its place (:attr:`Shelf.shadowed` names those). An entry may carry
a ``scale`` (``a``, ``b``: a zoo entry's predictor rescaled to a calibrated device), applied to
its predictions and its breakdown alike."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from . import ShelfError
from .readers import READERS, Reader

if TYPE_CHECKING:  # numpy and pandas come with the predictors: reading the index needs neither
    import numpy as np
    import pandas as pd

SHELF_DIR = Path(__file__).resolve().parent / "data"  # the committed shelf
USER_SHELF_ENV = "LATBENCH_SHELF"
USER_SHELF = Path("data") / "shelf"  # the user's shelf, under the working directory
INDEX = "INDEX.json"
INDEX_SCHEMA = "latbench.shelf/1"
HELD_OUT = "held_out.json"  # per scenario folder: the held-out networks, measured and predicted


class Shelf:
    """The committed shelf (or another folder written by :func:`shelf.build.build`)."""

    def __init__(self, folder: str | Path = SHELF_DIR, overlays: Sequence[str | Path] = ()):
        self.folder = Path(folder)
        self.index = _read_index(self.folder)
        self._roots: dict[str, Path] = {sid: self.folder for sid in self.index["scenarios"]}
        self.shadowed: dict[str, Path] = {}  # scenario -> the folder whose entry an overlay's replaced
        for over in overlays:
            over = Path(over)
            for sid, e in _read_index(over)["scenarios"].items():
                if sid in self._roots:
                    self.shadowed[sid] = self._roots[sid]
                self.index["scenarios"][sid] = e
                self._roots[sid] = over
        self._loaded: dict[str, Any] = {}

    @classmethod
    def open(cls, folder: str | Path | None = None, user: str | Path | None = None) -> "Shelf":
        """``folder`` (default: the committed shelf) with the user's shelf over it: ``user``, else
        ``$LATBENCH_SHELF``, else ``data/shelf`` when it holds an index."""
        import os

        over = Path(user or os.environ.get(USER_SHELF_ENV) or USER_SHELF)
        overlays = [over] if (over / INDEX).is_file() and over.resolve() != Path(folder or SHELF_DIR).resolve() else []
        if user and not overlays and Path(user).resolve() != Path(folder or SHELF_DIR).resolve():
            raise ShelfError(f"{Path(user) / INDEX}: no predictor shelf here (`latbench calibrate` writes one)")
        return cls(folder or SHELF_DIR, overlays)

    def root(self, scenario_id: str) -> Path:
        """The shelf folder the scenario's entry is read from."""
        self.entry(scenario_id)
        return self._roots[scenario_id]

    def scenarios(self) -> list[str]:
        return list(self.index["scenarios"])

    def entry(self, scenario_id: str) -> dict[str, Any]:
        e = self.index["scenarios"].get(scenario_id)
        if e is None:
            near = [s for s in self.scenarios() if scenario_id.split("-")[0] in s][:5] or self.scenarios()[:5]
            raise ShelfError(f"scenario {scenario_id!r}: not on the shelf ({len(self.scenarios())} scenarios, e.g. "
                             f"{', '.join(near)}; `latbench predict --list` shows all)")
        return e

    def predictor(self, scenario_id: str) -> Any:
        from leaderboard.baselines import load_predictor

        if scenario_id not in self._loaded:
            e = self.entry(scenario_id)
            self._loaded[scenario_id] = load_predictor(self._roots[scenario_id] / e["folder"])
        return self._loaded[scenario_id]

    def _reader(self, scenario_id: str) -> Reader:
        name = self.entry(scenario_id)["predictor"]
        if name not in READERS:
            raise ShelfError(f"{self.folder / INDEX}: {scenario_id}: predictor {str(name)[:80]!r} is not one the "
                             f"shelf reads ({', '.join(READERS)})")
        return READERS[name]

    def predict(self, graphs: Sequence[Any], scenario_id: str) -> np.ndarray:
        """e2e latency (ms) of every graph in ``scenario_id``, as one batch."""
        import numpy as np

        reader = self._reader(scenario_id)
        ms = np.asarray(reader.predict(self.predictor(scenario_id), scenario_id, graphs), dtype="float64")
        a, b = self._scale(scenario_id)
        return a * ms + b

    def breakdown(self, graph: Any, scenario_id: str) -> pd.DataFrame:
        """One row per op (USC op-wise predictors: each IR op) or operator (additive_mlp: each
        operator LiteRT runs) of ``graph``: op_index, node, op_type, predicted_ms, plus the
        predictor's overhead as a last row, so the rows sum to :meth:`predict`."""
        reader = self._reader(scenario_id)
        rows = reader.breakdown(self.predictor(scenario_id), scenario_id, graph)
        a, b = self._scale(scenario_id)
        if (a, b) != (1.0, 0.0):
            rows["predicted_ms"] = rows["predicted_ms"] * a
            rows.loc[rows["op_index"] < 0, "predicted_ms"] += b
        return rows

    def _scale(self, scenario_id: str) -> tuple[float, float]:
        s = self.entry(scenario_id).get("scale")
        if s is None:
            return 1.0, 0.0
        try:
            a, b = float(s["a"]), float(s["b"])
        except (KeyError, TypeError, ValueError):
            raise ShelfError(f"{self._roots[scenario_id] / INDEX}: {scenario_id}: scale must hold numbers a and b") from None
        if not (a > 0 and b >= 0):
            raise ShelfError(f"{self._roots[scenario_id] / INDEX}: {scenario_id}: scale needs a > 0 and b >= 0")
        return a, b


def _read_index(folder: Path) -> dict[str, Any]:
    from foundation.safeload import LoadError, load_json

    f = folder / INDEX
    if not f.is_file():
        raise ShelfError(f"{f}: no predictor shelf here (build one with `latbench shelf build`)")
    try:
        index = load_json(f, 16 << 20, max_nodes=2_000_000)
    except LoadError as e:
        raise ShelfError(str(e)) from None
    if not isinstance(index, dict) or index.get("schema") != INDEX_SCHEMA or not isinstance(index.get("scenarios"), dict):
        raise ShelfError(f"{f}: not a {INDEX_SCHEMA} index")
    return index


__all__ = ["HELD_OUT", "INDEX", "INDEX_SCHEMA", "SHELF_DIR", "USER_SHELF", "USER_SHELF_ENV", "Shelf"]
