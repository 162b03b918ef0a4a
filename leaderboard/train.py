"""Hydra entry point for training baselines on tracks, so sweeps run with Hydra multirun
(``hydra-joblib-launcher`` by default, ``hydra/launcher=submitit_local`` or ``submitit_slurm``
selectable). Config: ``leaderboard/conf/train.yaml``; predictor hyperparameters from
``conf/predictor/<predictor>.yaml`` (a mapping of constructor parameters; a ``name`` or
``_target_`` key there is ignored), overridden by ``params``.

    leaderboard-train -m predictor=flops,lookup track=help-nb201-n10,help-nb201-n100
    leaderboard-train predictor=all      # every registered predictor on every track with data
    leaderboard-train predictor=usc_mlp track=usc-real-kfold out=leaderboard/entries/public scenarios='*-gpu-*'
                                         # refit only the matching scenarios; the entry keeps the others
    leaderboard-train predictor=all track=host out=leaderboard/entries/host   # the committed host entries

    leaderboard-train predictor=flops track=my-phone-n10 tracks=my/tracks splits=my/splits
                                         # a track of your own folder; its split goes to my/splits

Data roots: ``public=`` / ``host=`` (default: ``LATBENCH_PUBLIC_DATA`` / ``LATBENCH_HOST_DATA``,
else :data:`leaderboard.tracks.DATA_ROOTS`: the host tracks read the committed release
``datasets/host-v1``; ``host=data/dataset`` trains on the main job's own dataset).

User tracks: ``tracks=`` (a folder, or a list of folders) and ``splits=`` (default:
``LATBENCH_TRACKS`` / ``LATBENCH_SPLITS``, else no user tracks and ``data/leaderboard/splits``:
:func:`leaderboard.tracks.use_track_folders`).

A refused run (an unknown track or predictor, a wrong track file, ``scenarios=`` matching
nothing, an entry of another predictor) is one line, ``leaderboard-train: error: ...``, exit
status 2.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

ROOT = Path(__file__).resolve().parents[1]


def predictor_params(name: str, overrides: Any = None, conf_dir: Path = ROOT / "conf" / "predictor") -> dict[str, Any]:
    """conf/predictor/<name>.yaml (if any) merged with ``overrides``, as plain constructor kwargs."""
    base: dict[str, Any] = {}
    path = conf_dir / f"{name}.yaml"
    if path.is_file():
        loaded = OmegaConf.to_container(OmegaConf.load(path), resolve=True) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: expected a mapping of predictor parameters")
        if isinstance(loaded.get("params"), dict):  # {name: ..., params: {...}} layout
            loaded = loaded["params"]
        base = {k: v for k, v in loaded.items() if k not in ("name", "_target_")}
    if overrides:
        base.update(OmegaConf.to_container(overrides, resolve=True) if not isinstance(overrides, dict) else overrides)
    return base


def run_job(cfg: DictConfig) -> str:
    """One predictor (``predictor=<name>``) or every registered one (``predictor=all``, what the
    leaderboard's DVC stage runs: the registry is the one place a predictor is added) on
    ``track`` (a name; ``all``: every track with data; ``public`` / ``host``: every track of
    that data root). Returns the entries' folder."""
    import time

    from .baselines import PREDICTORS
    from .run import log, slug, train_entry
    from .tracks import TRACKS, data_roots, use_track_folders

    folders = cfg.get("tracks")
    if folders is not None and not isinstance(folders, str):
        folders = [str(f) for f in OmegaConf.to_container(folders, resolve=True)]
    use_track_folders(folders, cfg.get("splits"))
    overrides = OmegaConf.to_container(cfg.params, resolve=True) if cfg.params else {}
    if cfg.track in (None, "all"):
        tracks = TRACKS.names()
    elif cfg.track in ("public", "host"):  # every track of one data root (the DVC stages)
        tracks = [t for t in TRACKS.names() if TRACKS.get(t).data == cfg.track]
    else:
        tracks = [cfg.track]
    names = PREDICTORS.names() if cfg.predictor == "all" else [cfg.predictor]
    if len(names) > 1 and (overrides or cfg.entry):
        raise ValueError("predictor=all takes no params or entry overrides: name one predictor")
    scenarios = cfg.get("scenarios")
    if scenarios is not None and not isinstance(scenarios, str):
        scenarios = list(OmegaConf.to_container(scenarios, resolve=True))
    roots = data_roots(cfg.get("public"), cfg.get("host"))
    t0, out = time.monotonic(), None
    for name in names:
        entry = cfg.entry or (name + "".join(f"-{k}{v}" for k, v in sorted(overrides.items())))
        out = train_entry(name, predictor_params(name, overrides), tracks, roots,
                          cfg.out, entry=slug(entry), scenarios=scenarios)
    log(f"trained {len(names)} predictor(s) on {len(tracks)} track(s) in {time.monotonic() - t0:.0f} s")
    return str(out.parent if len(names) > 1 else out)


# An absolute path: given "conf", Hydra looks for a module `leaderboard.conf` when the console
# script `leaderboard-train` calls main(), and finds none.
@hydra.main(version_base="1.3", config_path=str(ROOT / "leaderboard" / "conf"), config_name="train")
def main(cfg: DictConfig) -> str:
    from foundation.registry import UnknownName

    from .tracks import TrackError

    try:
        return run_job(cfg)
    except (TrackError, UnknownName, ValueError, FileNotFoundError) as e:  # a refused run: one line, no traceback
        print(f"leaderboard-train: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
