"""Choosing each scenario's predictor from the board, fitting it and writing the shelf
(``latbench shelf build``).

Which predictor, and how it is stated
-------------------------------------
The board already scores every op-wise baseline on every scenario of its tracks (:data:`SOURCES`,
``shelf.SHELF_TRACKS``). For each
scenario the shelf takes the candidate (:data:`shelf.readers.CANDIDATES`) with the lowest MAPE
there, and keeps those figures (``board``). It then fits that predictor, with the entry's
parameters, on the training networks of the first fold of the track's frozen split in that
scenario, and states as its ``accuracy`` what this very model reaches on that fold's test
networks (MAPE, +-10 % accuracy, Spearman, how many): ``held_out.json`` keeps them with the
measured and predicted times, so anyone can check the figure (a test does). On a k-fold track
the model saw 80 % of the networks; on HELP's single split the same 900 as the board's entry.

:func:`build` writes a shelf folder (the committed one, ``shelf/data/``, by default); the
layout is in :mod:`shelf`'s documentation.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from . import SHELF_TRACKS, ShelfError
from .readers import CANDIDATES, OPWISE, READERS
from .store import HELD_OUT, INDEX, INDEX_SCHEMA, SHELF_DIR

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "leaderboard" / "results"
ACCURACY = ("mape", "acc10", "spearman")


@dataclass(frozen=True)
class ShelfSource:
    """A track whose scored scenarios go on the shelf."""

    track: str


SOURCES = tuple(ShelfSource(t) for t in SHELF_TRACKS)


def _finite(v: Any) -> float | None:
    """A metric as JSON holds it: None where it is undefined (Spearman of one held-out network)."""
    return float(v) if v is not None and np.isfinite(v) else None


# ---------------------------------------------------------------- choosing
def choose(results_dir: Path = RESULTS_DIR, sources: Sequence[ShelfSource] = SOURCES,
           candidates: Sequence[str] = CANDIDATES) -> dict[str, dict[str, Any]]:
    """scenario_id -> {predictor, track, params, accuracy} of the best candidate on the board."""
    best: dict[str, dict[str, Any]] = {}
    for src in sources:
        for name in candidates:
            f = Path(results_dir) / src.track / f"{name}.json"
            if not f.is_file():
                continue
            r = json.loads(f.read_text())
            for sid, m in r["result"]["per_scenario"].items():
                mape = m.get("mape")
                if mape is None or not np.isfinite(mape):
                    continue
                if sid in best and best[sid]["accuracy"]["mape"] <= mape:
                    continue
                best[sid] = {"predictor": name, "track": src.track, "track_version": r.get("track_version"),
                             "params": r["meta"].get("params", {}),
                             "accuracy": {"mape": float(mape), "acc10": _finite(m.get("acc10")),
                                          "spearman": _finite(m.get("spearman")),
                                          "protocol": f"{src.track}, every fold (board entry {name})"}}
    return best


# ---------------------------------------------------------------- building
def _op_types(dataset: Any, ids: Sequence[str]) -> list[str]:
    """The IR operator types of the training networks: read from the IR the dataset stores, else
    from the graph it rebuilds from the network's ``arch`` (HELP's NAS-Bench-201 cells)."""
    models = dataset.models.set_index("model_id")
    ops: set[str] = set()
    for mid in ids:
        text = models.at[mid, "ir"] if "ir" in models.columns else None
        if isinstance(text, str):
            ops.update(node["op"] for node in json.loads(text)["nodes"])
        else:
            ops.update(node.op for node in dataset.graph(mid).nodes.values())
    return sorted(ops - {"input"})


def _generator_sources(dataset: Any, ids: Sequence[str]) -> dict[str, int]:
    """Generator source (the models table's ``source``: synthetic, zoo, nasbench201, transformer,
    pytorch, ...) -> how many of the training networks it gave, most first."""
    models = dataset.models
    src = models.loc[models["model_id"].isin(set(ids)), "source"].fillna("(none)").astype(str)
    counts = src.value_counts()
    return {str(k): int(v) for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}


def _provenance(dataset: Any, ids: Sequence[str]) -> dict[str, Any]:
    """What an entry records of its training networks beyond their count and digest: the
    generator sources, the release they were measured in (a dataset folder holding
    ``RELEASE.json``; :mod:`shelf.machine` names its machine) and their IR operator types."""
    from .machine import release_of

    out: dict[str, Any] = {"generator_sources": _generator_sources(dataset, ids)}
    release = release_of(getattr(dataset, "path", None), ROOT)
    if release:
        out["release"] = release
    out["op_types"] = _op_types(dataset, ids)
    return out


def _git_commit() -> str | None:
    try:
        p = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        return p.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _slug(sid: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in sid)


def _first_fold(track: str, data: Any, split: Any, sid: str) -> tuple[Any, list[str], list[str], dict[str, str]]:
    """(fold, training names, test names, name -> model_id) of the track's first fold in ``sid``:
    the shelf model is fitted on its training networks and states its accuracy on its test
    networks, which it never saw (reproducible: held_out.json)."""
    e = data.measured(sid)
    by_name = dict(zip(e["name"], e["model_id"]))
    fold = min(split.for_scenario(sid), key=lambda f: f.fold)
    train = [n for n in fold.train if n in by_name]
    test = sorted(n for n in fold.test if n in by_name)
    if not train or not test:
        raise ShelfError(f"{track}: {sid}: fold {fold.fold} has {len(train)} training and {len(test)} test "
                         "networks measured")
    return fold, train, test, by_name


def fit_params(predictor: str, params: dict[str, Any], dataset: Any, scenario_id: str) -> dict[str, Any]:
    """The board entry's parameters, as the shelf fits them. The shelf is asked about IR graphs,
    so an op-wise candidate (:data:`~shelf.readers.OPWISE`) learns the IR's ops (``target="ir"``)
    where the scenario has op rows: those are the framework's own operators (the host's LiteRT
    records: a layer norm's MEAN and RSQRT, no batch norm, which LiteRT folds into the
    convolution), and a model fitted on them would refuse or misprice the IR ops it is asked
    about. An entry that fixed its ``target`` keeps it."""
    if READERS[predictor] is not OPWISE or params.get("target", "auto") != "auto":
        return dict(params)
    has_rows = len(dataset.ops_for(scenario_id)) > 0
    return {**params, "target": "ir"} if has_rows else dict(params)


def _networks_digest(ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]


def describe(out: Path = SHELF_DIR, roots: dict[str, Any] | None = None, splits_dir: Path | None = None,
             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Record again what each entry of the shelf folder ``out`` was trained on from the data,
    without fitting anything (:func:`_provenance`: the generator sources of its training networks
    with their counts, which ``latbench predict --list`` shows; the release they were measured
    in, whose machine ``latbench predict`` names; their IR operator types, which its caveat
    reads); an entry whose training networks are no longer those the data's split gives (their
    digest differs) is refused: rebuild it. Only ``INDEX.json`` is written."""
    from leaderboard.run import available

    out = Path(out)
    index_path = out / INDEX
    if not index_path.is_file():
        raise ShelfError(f"{index_path}: no shelf index to describe")
    index = json.loads(index_path.read_text())
    tracks = sorted({e["training"]["track"] for e in index["scenarios"].values()})
    ok, skipped = available(tracks, roots, splits_dir, write_splits=False)
    for sid, entry in index["scenarios"].items():
        t = entry["training"]
        if t["track"] not in ok:
            raise ShelfError(f"track {t['track']}: no data to describe {sid} from ({skipped.get(t['track'], 'unknown track')})")
        data, split = ok[t["track"]]
        _, train, _, by_name = _first_fold(t["track"], data, split, sid)
        ids = [by_name[n] for n in train]
        if _networks_digest(ids) != t["networks_sha256"]:
            raise ShelfError(f"{sid}: its training networks are not those of {t['track']} fold {t['fold']} any more: "
                             f"rebuild it (latbench shelf build --scenario {sid})")
        t.pop("release", None)
        t.update(_provenance(data.dataset, ids))
        if progress:
            gens = ", ".join(f"{k} {v}" for k, v in t["generator_sources"].items())
            progress(f"{sid}: {len(t['op_types'])} op types in {len(ids)} training networks ({gens})")
    index_path.write_text(json.dumps(index, indent=1) + "\n")
    return index


def build(out: Path = SHELF_DIR, scenarios: Iterable[str] | None = None, results_dir: Path = RESULTS_DIR,
          roots: dict[str, Any] | None = None, splits_dir: Path | None = None,
          progress: Callable[[str], None] | None = None, candidates: Sequence[str] = CANDIDATES,
          tracks: Sequence[str] | None = None) -> dict[str, Any]:
    """Fit the chosen predictor of every (or the given) scenario and write the shelf folder ``out``
    (its layout: :mod:`shelf`). ``candidates``: a subset of :data:`~shelf.readers.CANDIDATES` to
    choose from (the op-wise ones alone make a shelf that predicts a batch of graphs in one
    vectorised pass, for NAS loops that need speed over accuracy). ``tracks``: the board tracks
    to choose from and fit on instead of :data:`SOURCES` (e.g. ``host-transformer-random`` for a
    shelf of transformer specialists); a scenario several give goes to the lowest MAPE."""
    from leaderboard.baselines import Networks, make_predictor, save_predictor
    from leaderboard.metrics import compute
    from leaderboard.run import available, board_view

    unknown = [c for c in candidates if c not in READERS]
    if unknown or not candidates:
        raise ShelfError(f"candidate {unknown[0] if unknown else '(none)'!r}: the shelf chooses among "
                         f"{', '.join(READERS)}")
    sources = SOURCES if tracks is None else tuple(ShelfSource(t) for t in tracks)
    bad = [t for t in (tracks or ()) if not (Path(results_dir) / t).is_dir()]
    if bad or (tracks is not None and not tracks):
        raise ShelfError(f"track {bad[0] if bad else '(none)'!r}: no board results in {results_dir}")
    chosen = choose(results_dir, sources, candidates=candidates)
    # what the default sources score decides which scenarios are gone from the board
    board = set(chosen) | (set(choose(results_dir, candidates=candidates)) if tracks is not None else set())
    if scenarios is not None:
        want = list(scenarios)
        unknown = [s for s in want if s not in chosen]
        if unknown:
            raise ShelfError(f"scenario {unknown[0]!r}: no board result to choose a predictor from "
                             f"(scenarios with results: {len(chosen)}; see leaderboard/results/)")
        chosen = {s: chosen[s] for s in want}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    index_path = out / INDEX
    index = json.loads(index_path.read_text()) if index_path.is_file() else {"schema": INDEX_SCHEMA, "scenarios": {}}
    # a scenario the board no longer has results for has no data behind it any more (e.g. the
    # host's old per-machine scenarios, now that the host tracks read the release): drop it. Only
    # entries fitted on a track these results speak for go: a calibration's (`latbench
    # calibrate`) and another track's entries in a user's shelf stay.
    considered = {s.track for s in sources} | set(SHELF_TRACKS)
    for sid in sorted(set(index["scenarios"]) - board):
        e = index["scenarios"][sid]
        if e.get("origin") == "calibration" or (e.get("training") or {}).get("track") not in considered:
            continue
        shutil.rmtree(out / index["scenarios"].pop(sid)["folder"], ignore_errors=True)
        if progress:
            progress(f"{sid}: dropped (no board result for it any more)")
    tracks = sorted({c["track"] for c in chosen.values()})
    ok, skipped = available(tracks, roots, splits_dir, write_splits=False)
    commit = _git_commit()
    for track in tracks:
        if track not in ok:
            raise ShelfError(f"track {track}: no data to fit on ({skipped.get(track, 'unknown track')})")
        data, split = ok[track]
        for sid in sorted(s for s, c in chosen.items() if c["track"] == track):
            c = chosen[sid]
            fold, train, test, by_name = _first_fold(track, data, split, sid)
            # the board's own view of the data: the test networks hidden, and on a track that
            # trains on e2e only every op time of the scenario blanked too (the host's op rows
            # come from the builtin kernels, not the XNNPACK path its e2e times measure)
            train_ids, test_ids = tuple(by_name[n] for n in train), tuple(by_name[n] for n in test)
            view = board_view(data, sid, train_ids, test_ids)
            X = Networks(view, train_ids, sid)
            params = fit_params(c["predictor"], c["params"], view, sid)
            est = make_predictor(c["predictor"], **params).fit(X, X.y())
            T = Networks(view, test_ids, sid)
            measured = Networks(data.dataset, test_ids, sid).y()  # the answer, from outside the view
            predicted = np.asarray(est.predict(T), dtype="float64")
            folder = out / _slug(sid)
            save_predictor(est, folder)
            (folder / HELD_OUT).write_text(json.dumps({"scenario_id": sid, "names": test,
                                                       "measured_ms": measured.tolist(),
                                                       "predicted_ms": predicted.tolist()}) + "\n")
            ids = sorted(X.model_ids)
            index["scenarios"][sid] = {
                "folder": folder.name, "predictor": c["predictor"], "params": params,
                "accuracy": {**{k: _finite(v) for k, v in compute(measured, predicted, ACCURACY).items()},
                             "held_out_networks": len(test), "protocol": f"{track} fold {fold.fold}"},
                "board": c["accuracy"],
                "training": {"track": track, "track_version": c["track_version"], "dataset": str(data.track.data),
                             "fold": fold.fold, "networks": len(ids),
                             "networks_sha256": _networks_digest(ids),
                             "sources": sorted(set(data.networks[data.networks["model_id"].isin(ids)]["dataset"])),
                             **_provenance(data.dataset, ids)},
                "built": {"date": _dt.date.today().isoformat(), "commit": commit}}
            if progress:
                a = index["scenarios"][sid]["accuracy"]
                progress(f"{sid}: {c['predictor']} on {len(ids)} networks, held-out MAPE {a['mape']:.1f}% "
                         f"on {len(test)} (board: {c['accuracy']['mape']:.1f}%)")
    index["scenarios"] = dict(sorted(index["scenarios"].items()))
    index_path.write_text(json.dumps(index, indent=1) + "\n")
    return index


__all__ = ["ACCURACY", "RESULTS_DIR", "SOURCES", "ShelfSource", "build", "choose", "describe"]
