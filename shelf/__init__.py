"""The predictor shelf: one fitted predictor per known scenario, committed, ready for ``latbench predict``.

nn-Meter ships a predictor per device; the shelf holds one per *scenario* the suite has data for
(every USC phone x framework x core set x precision, every HELP device, the host's scenarios,
every Qualcomm AI Hub device x runtime x precision x compute unit the board's track holds),
each with its provenance and the accuracy it reached on networks it never saw.

The package sits above both ``pipelines/`` and ``leaderboard/``: the board chooses each
scenario's predictor and its baselines are what the shelf fits and reads; the ``latbench``
command line (pipelines/cli.py) takes the shelf's two subcommands from its entry-point group
``latbench.commands``. Neither package imports this one.

- :mod:`shelf.build`: choosing each scenario's predictor from the board, fitting and writing it
  (``latbench shelf build``);
- :mod:`shelf.store`: :class:`~shelf.store.Shelf`, a shelf folder read from its ``INDEX.json``,
  predicting batches of graphs and breaking one down per op;
- :mod:`shelf.readers`: how the shelf asks each kind of candidate for a latency and a breakdown;
- :mod:`shelf.report`: what ``latbench predict`` prints;
- :mod:`shelf.machine`: the machine a host scenario's predictions are priced on (its release's)
  beside this one, and the speed-probe ratio ``--scale-to-this-machine`` multiplies them by;
- :mod:`shelf.cli`: the subcommands ``latbench predict`` and ``latbench shelf build``.

Layout (``shelf/data/``, committed)::

    shelf/data/INDEX.json                    scenario_id -> predictor, folder, accuracy, provenance (training:
                                             track, fold, networks, generator sources, release, op types)
    shelf/data/<scenario_id>/predictor.json  (+ arrays) leaderboard.baselines.persist format, no pickles
    shelf/data/<scenario_id>/held_out.json   the held-out networks, measured and predicted

The Python API for NAS loops::

    from shelf import Shelf
    ms = Shelf().predict(graphs, scenario_id)
"""
from __future__ import annotations

from typing import Any


# the board's tracks whose scored scenarios go on the shelf (shelf/build.py): the USC k-fold track,
# HELP's 900-network track, the host's per-scenario track, the host tracks of the runtimes that
# one does not hold, and Qualcomm AI Hub's k-fold track (today's phones and NPUs)
SHELF_TRACKS = ("usc-real-kfold", "help-nb201-n900", "host-per-scenario", "host-onnxruntime", "host-executorch",
                "qaihub-kfold")


class ShelfError(ValueError):
    """A scenario the shelf does not have, a graph it cannot predict, a broken shelf folder."""


def __getattr__(name: str) -> Any:
    # `from shelf import Shelf` loads the store (numpy, pandas) only when asked: `latbench --help`
    # imports shelf.cli, which must stay cheap
    if name == "Shelf":
        from .store import Shelf

        return Shelf
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SHELF_TRACKS", "Shelf", "ShelfError"]
