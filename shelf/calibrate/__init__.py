"""``latbench calibrate``: a predictor for a device the suite has never seen, from measurements
chosen to teach it most, within a time budget.

nn-Meter builds a device's predictor from days of adaptive kernel sampling; LitePred adapts one
in under an hour from a small sampled set. A calibration here does the same at the level of
whole networks, with the suite's own runtime and protocol:

1. a pool of networks of the suite's generator sources, drawn with a seed of its own
   (:mod:`.pool`);
2. rounds that measure a spread first, then where a bootstrap model is least sure
   (:mod:`.sampling`), on the device through the measure stage's plan and sweep, so data taken
   under load is measured again or refused as the stage refuses it (:mod:`.measuring`), within
   ``--budget`` (:mod:`.session`: resumable, with progress and an ETA);
3. the candidates (the shelf's predictors from scratch, the zoo's entries rescaled) scored by
   cross-validation, the best fitted, and its error on held-out networks, a uniform draw from
   the pool never chosen or fitted on, stated (:mod:`.fitting`);
4. a shelf entry in the user's shelf (:mod:`.entry`), which ``latbench predict --scenario``
   reads over the committed shelf.

:func:`calibrate` runs it all; ``shelf/calibrate/cli.py`` is the command.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable


class CalibrateError(ValueError):
    """A calibration that cannot go on: the message names the option, file or network at fault."""


def calibrate(cfg: Any, device: Any, scenario: Any, *, work: Path, shelf_dir: Path, budget_s: float,
              pool_sizes: dict[str, int], seed: int, holdout: float = 0.2, first: int = 24, batch: int = 24,
              reserve_s: float | None = None, allow_load: bool = False, zoo: Any = None, folds: int = 5,
              params: dict[str, dict[str, Any]] | None = None, say: Callable[[str], None] = print,
              progress: bool = True) -> Any:
    """Calibrate ``scenario`` on ``device`` (see the module doc); returns the
    :class:`~.session.Outcome`. ``cfg`` is the composed configuration whose ``measure`` section is
    the protocol (its ``granularities`` are what is recorded); ``zoo``: the shelf to transfer from
    (None: from scratch only); ``folds`` of the candidates' cross-validation; ``params``:
    predictor name -> overrides of its ``conf/predictor`` parameters; ``reserve_s``: the time
    kept for the fit (default: 15 % of the budget, at least a minute)."""
    from .measuring import Bench
    from .pool import build_pool
    from .session import Spec, State, finish, run_rounds

    if not 0.05 <= holdout <= 0.5:
        raise CalibrateError(f"--holdout {holdout}: between 0.05 and 0.5")
    work = Path(work)
    spec = Spec(scenario.scenario_id, device.name, dict(pool_sizes), seed, holdout, first, batch,
                list(cfg.measure.granularities))
    state = State(work, spec)
    pool = build_pool(work, cfg.generator, pool_sizes, seed, progress=say)
    bench = Bench(cfg, device, scenario, work, pool, allow_load=allow_load)
    reserve = reserve_s if reserve_s is not None else max(60.0, 0.15 * budget_s)
    if state.rounds:
        say(f"calibrate: resuming {work} ({len(state.rounds)} rounds, {state.spent_s / 60:.1f} min spent)")
    run_rounds(bench, pool, state, budget_s, reserve, say, progress)
    return finish(bench, pool, state, Path(shelf_dir), zoo, budget_s, say, k=folds, params=params)


__all__ = ["CalibrateError", "calibrate"]
