"""A shelf folder, read: :class:`Shelf` loads ``INDEX.json``, each scenario's saved predictor on
first use (only the scenarios asked: numpy and pandas are imported when one is loaded; no
candidate imports torch or scikit-learn to predict), and predicts batches of graphs or breaks one
graph down per op."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from . import ShelfError
from .readers import READERS, Reader

if TYPE_CHECKING:  # numpy and pandas come with the predictors: reading the index needs neither
    import numpy as np
    import pandas as pd

SHELF_DIR = Path(__file__).resolve().parent / "data"  # the committed shelf
INDEX = "INDEX.json"
INDEX_SCHEMA = "latbench.shelf/1"
HELD_OUT = "held_out.json"  # per scenario folder: the held-out networks, measured and predicted


class Shelf:
    """The committed shelf (or another folder written by :func:`shelf.build.build`)."""

    def __init__(self, folder: str | Path = SHELF_DIR):
        from foundation.safeload import LoadError, load_json

        self.folder = Path(folder)
        f = self.folder / INDEX
        if not f.is_file():
            raise ShelfError(f"{f}: no predictor shelf here (build one with `latbench shelf build`)")
        try:
            self.index = load_json(f, 16 << 20, max_nodes=2_000_000)
        except LoadError as e:
            raise ShelfError(str(e)) from None
        if not isinstance(self.index, dict) or self.index.get("schema") != INDEX_SCHEMA:
            raise ShelfError(f"{f}: not a {INDEX_SCHEMA} index")
        self._loaded: dict[str, Any] = {}

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
            self._loaded[scenario_id] = load_predictor(self.folder / e["folder"])
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
        return np.asarray(reader.predict(self.predictor(scenario_id), scenario_id, graphs), dtype="float64")

    def breakdown(self, graph: Any, scenario_id: str) -> pd.DataFrame:
        """One row per op (USC op-wise predictors: each IR op) or operator (additive_mlp: each
        operator LiteRT runs) of ``graph``: op_index, node, op_type, predicted_ms, plus the
        predictor's overhead as a last row, so the rows sum to :meth:`predict`."""
        reader = self._reader(scenario_id)
        return reader.breakdown(self.predictor(scenario_id), scenario_id, graph)


__all__ = ["HELD_OUT", "INDEX", "INDEX_SCHEMA", "SHELF_DIR", "Shelf"]
