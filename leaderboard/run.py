"""Training the registered predictors on the tracks, and scoring entries.

An *entry* is a folder ``<entries>/<entry>/`` holding ``predictions.parquet`` and
``metadata.yaml``: exactly what a submitter sends (see :mod:`leaderboard.submission`). The
baselines become entries the same way (:func:`train_entry`), so the board treats them and
outside submissions alike, and never executes a submission.

Training on a track (:func:`predict_track`): for every scenario and every fold of the frozen
split, the predictor is built from its name and parameters, fitted on the fold's training
networks measured in that scenario and asked for the fold's test networks. It sees the track's
dataset with the test networks' measurements hidden in every scenario (:func:`mask`): their e2e
rows removed and their op/kernel times blanked (and the training networks' op and/or kernel
times in the scenario, as the track's ``uses`` says: ``tracks.BLANKED``), so nothing of the answer
leaks through ``Networks.dataset``, even to a predictor that learns from the training networks'
other scenarios.

Scoring (:func:`evaluate_entry`): validate the entry, then the track's :class:`Evaluator`;
one ``<results>/<track>/<entry>.json`` per track with the metrics and the data of the plots.
"""
from __future__ import annotations

import json
import math
import re
import shutil
import sys
import time
import traceback
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import yaml

from foundation.atomic import atomic_path

from .evaluator import SCENARIO_COLUMNS, Evaluator, scenario_groups
from .protocols import InsufficientData, training_view
from .tracks import BLANKED, TARGETS, TRACKS, Split, TrackData, Unavailable, ensure_split, resolve

FOLDS = ".folds"  # <entry>/.partial/.folds: FoldCache (a track's slug never starts with a dot)
PLOT_POINTS = 1500  # predicted-vs-measured points kept per entry and track (deterministic thinning)
CDF_POINTS = 101


def log(msg: str) -> None:
    print(f"leaderboard: {msg}", file=sys.stderr, flush=True)


def slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", s).strip("-").lower() or "entry"


# ---------------------------------------------------------------- training
def board_view(data: TrackData, scenario_id: str, train_ids: Sequence[str], test_ids: Sequence[str]) -> Any:
    """What a predictor sees when it trains on ``train_ids`` of a track's scenario: the
    protocol's own view (transfer tracks: the sources whole + the draw), else :func:`mask`.
    The board and the predictor shelf both fit through it, so a shelf model is the board's."""
    view = training_view(data.track, data.dataset, scenario_id, list(train_ids))
    if view is None:
        view = mask(data.dataset, scenario_id, test_ids, all_ops=BLANKED[data.track.uses])
    return view


def mask(dataset: Any, scenario_id: str, test_ids: Iterable[str], all_ops: bool | Iterable[str]) -> Any:
    """A view of ``dataset`` without the test networks' measurements: their e2e rows are removed
    and their op/kernel times blanked in *every* scenario (a network held out in one scenario is
    not measured anywhere as far as the predictor can tell: its time on the same phone with other
    cores would give most of the answer away). ``all_ops`` also blanks every time of
    ``scenario_id`` in the tables it names ("ops", "kernels"; True: both, for tracks that train on
    e2e only). Op configurations stay visible."""
    from pipelines.dataset.load import Dataset

    test = set(test_ids)
    t = dataset.tables()
    e = t["e2e"]
    t["e2e"] = e[~e["model_id"].isin(test)].reset_index(drop=True)
    blank = {"ops", "kernels"} if all_ops is True else set() if all_ops is False else set(all_ops)
    for name in ("ops", "kernels"):
        df = t[name]
        hit = df["model_id"].isin(test)
        if name in blank:
            hit |= df["scenario_id"] == scenario_id
        if hit.any():
            df = df.copy()
            df.loc[hit, "latency_ms"] = np.nan
            t[name] = df
    view = Dataset(t, path=dataset.path, check=False)
    view._graphs = dataset._graphs  # share the IR cache: rebuilding graphs is the slow part
    return view


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    """Write ``path`` whole or not at all: a reader (another track's run of the entry, a resumed
    run) never sees half a file, and twin tracks in a Hydra multirun may write the same fold at
    once (each through its own temporary file)."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


class FoldCache:
    """The test predictions of folds already fitted, shared by the tracks of one entry, for a
    predictor that reads only its training networks' graphs and e2e labels
    (``Predictor.e2e_only``). Such a fold's predictions are a function of the predictor and its
    parameters, the dataset, the scenario, the training networks with their labels and the test
    networks, whatever the track: host-fewshot-900 has host-random's split, and each ``-kernels``
    track its twin's folds. A fold is keyed by all of those (the labels' bytes included), so a
    different release, split or label never hits. Files live in ``<entry>/.partial/.folds/``
    beside the resume folders and go with them."""

    def __init__(self, folder: Path, key: Mapping[str, Any]):
        self.folder = folder
        self.key = json.dumps(key, sort_keys=True, default=str)

    def _path(self, dataset: Any, sid: str, train: Sequence[str], y: np.ndarray, test: Sequence[str]) -> Path:
        import hashlib

        h = hashlib.sha256(json.dumps([self.key, str(getattr(dataset, "path", "")), sid, list(train), list(test)]).encode())
        h.update(np.ascontiguousarray(y, dtype="float64").tobytes())
        return self.folder / f"{h.hexdigest()[:32]}.parquet"

    def get(self, dataset: Any, sid: str, train: Sequence[str], y: np.ndarray, test: Sequence[str]) -> np.ndarray | None:
        path = self._path(dataset, sid, train, y, test)
        if not path.is_file():
            return None
        try:
            got = pd.read_parquet(path)
        except OSError:  # removed meanwhile by another track's run of the entry finishing
            return None
        if got["model_id"].tolist() != list(test):  # a hash collision is all but impossible; a torn file is not
            return None
        return got["predicted_ms"].to_numpy(dtype="float64")

    def put(self, dataset: Any, sid: str, train: Sequence[str], y: np.ndarray, test: Sequence[str], pred: np.ndarray) -> None:
        path = self._path(dataset, sid, train, y, test)
        try:  # _write_parquet creates the folder
            _write_parquet(pd.DataFrame({"model_id": list(test), "predicted_ms": pred}), path)
        except OSError as e:  # another track's run of this entry finished and removed the folder
            log(f"{sid}: fold not kept for other tracks ({e}); they fit it again")


def _folds_of(data: TrackData, split: Split, sid: str) -> Iterator[tuple[Any, list[str], list[str]]]:
    """(fold, training ids, test ids) of each fold of scenario ``sid`` with test networks measured."""
    e = data.measured(sid)
    by_name = dict(zip(e["name"], e["model_id"]))
    for f in split.for_scenario(sid):
        train = [by_name[n] for n in f.train if n in by_name]
        test = [by_name[n] for n in f.test if n in by_name]
        if not test:
            continue
        if not train:
            raise InsufficientData(f"{data.track.name}: {sid} fold {f.fold}: no training network measured")
        yield f, train, test


def _share_resumed(data: TrackData, split: Split, sid: str, part: pd.DataFrame, folds: FoldCache) -> None:
    """A scenario read back from the resume folder shares its folds as if it had just been fitted:
    a run stopped part-way, or one from before the folds were shared, leaves the twin tracks
    nothing to fit again."""
    from .baselines import Networks

    for f, train, test in _folds_of(data, split, sid):
        rows = part[part["fold"] == f.fold] if "fold" in part.columns else part
        pred = rows.set_index("model_id")["predicted_ms"].reindex(test).to_numpy(dtype="float64")
        # the training labels as the fold's view has them (it hides the test networks only): no
        # view is built, as nothing is fitted
        y = Networks(data.dataset, tuple(train), sid).y()
        if not np.isnan(pred).any() and folds.get(data.dataset, sid, train, y, test) is None:
            folds.put(data.dataset, sid, train, y, test, pred)


def predict_track(data: TrackData, split: Split, make: Callable[[], Any],
                  progress: Callable[[str], None] | None = None, resume: Path | None = None,
                  only: Iterable[str] | None = None, folds: FoldCache | None = None) -> pd.DataFrame:
    """Predictions of one predictor on one track (columns of a submission). With ``resume`` (a
    folder), each scenario's predictions are written there as it finishes and a scenario found
    there is not fitted again, so a run stopped part-way (a long run on the USC 5-fold track) goes on
    where it stopped; the caller keys the folder to the predictor, its parameters and the split.
    ``only``: these scenarios of the track and no other (a partial retrain); every scenario is
    fitted on its own, so a scenario's predictions do not depend on which others ran.
    ``folds``: a fold another track of the entry already fitted is read from it (:class:`FoldCache`)."""
    from .baselines import Networks

    parts = []
    keep = None if only is None else set(only)
    for sid in data.scenario_ids:
        if keep is not None and sid not in keep:
            continue
        done = resume / f"{slug(sid)}.parquet" if resume is not None else None
        if done is not None and done.is_file():
            parts.append(pd.read_parquet(done))
            if folds is not None:
                _share_resumed(data, split, sid, parts[-1], folds)
            if progress:
                progress(sid)
            continue
        rows = []
        for f, train, test in _folds_of(data, split, sid):
            view = board_view(data, sid, train, test)
            X = Networks(view, tuple(train), sid)
            y = X.y()
            pred = folds.get(view, sid, train, y, test) if folds is not None else None
            if pred is None:
                est = make().fit(X, y)
                pred = np.asarray(est.predict(Networks(view, tuple(test), sid)), dtype="float64")
                if pred.shape != (len(test),):
                    raise ValueError(f"{type(est).__name__}.predict returned shape {pred.shape} for {len(test)} networks")
                if folds is not None:
                    folds.put(view, sid, train, y, test, pred)
            part = pd.DataFrame({"track": data.track.name, "scenario_id": sid, "model_id": test, "predicted_ms": pred})
            if split.repeated:  # repeated draws (seeds) predict the same networks once per fold
                part["fold"] = pd.array([f.fold] * len(test), dtype="Int64")
            rows.append(part)
        part = pd.concat(rows, ignore_index=True) if rows else _no_predictions()
        if done is not None:
            _write_parquet(part, done)
        parts.append(part)
        if progress:
            progress(sid)
    return pd.concat(parts, ignore_index=True) if parts else _no_predictions()


def _no_predictions() -> pd.DataFrame:
    return pd.DataFrame({"track": pd.Series(dtype="string"), "scenario_id": pd.Series(dtype="string"),
                         "model_id": pd.Series(dtype="string"), "predicted_ms": pd.Series(dtype="float64")})


def _resume_folder(out: Path, track: str, key: dict[str, Any]) -> Path:
    """``<entry>/.partial/<track>/``: the finished scenarios of an interrupted run, kept only while
    ``key`` (predictor, parameters, split) is the same."""
    folder = out / ".partial" / slug(track)
    stamp = folder / "key.json"
    text = json.dumps(key, sort_keys=True, default=str)
    if folder.is_dir() and (not stamp.is_file() or stamp.read_text() != text):
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stamp.write_text(text)
    return folder


def available(tracks: Iterable[str], roots: Mapping[str, Any] | None, splits_dir: Path | None = None,
              write_splits: bool = True) -> tuple[dict[str, tuple[TrackData, Split]], dict[str, str]]:
    """Tracks with data and their frozen splits; the others with the reason they are skipped."""
    ok, skipped = {}, {}
    for name in tracks:
        track = TRACKS.get(name)
        data = resolve(track, roots)
        if isinstance(data, Unavailable):
            skipped[name] = data.reason
            continue
        try:
            split, new = ensure_split(data, splits_dir, write=write_splits)
        except InsufficientData as e:
            skipped[name] = str(e)
            continue
        if new and write_splits:
            log(f"{name}: froze a new split {track.split_file.name} (commit it)" if track.packaged and splits_dir is None
                else f"{name}: froze a new split {track.split_path(splits_dir)}")
        ok[name] = (data, split)
    return ok, skipped


def scenario_patterns(scenarios: str | Iterable[str] | None) -> list[str] | None:
    """``scenarios=`` of a partial retrain as a list of glob patterns (None: every scenario). A
    string may hold several, comma-separated (Hydra's ``scenarios='[a,b]'`` gives a list)."""
    if scenarios is None:
        return None
    items = scenarios.split(",") if isinstance(scenarios, str) else list(scenarios)
    pats = [str(p).strip() for p in items if str(p).strip()]
    if not pats:
        raise ValueError("scenarios: empty pattern list (leave it unset to train every scenario)")
    return pats


def _no_match(patterns: list[str], tracks: Iterable[str], ok: Mapping[str, tuple[TrackData, Split]],
              skipped: Mapping[str, str]) -> str:
    """The one line of a ``scenarios=`` that matches nothing: the glob and a few of the tracks'
    scenario ids (or, without a track with data, why)."""
    glob = ",".join(patterns)
    if not ok:
        why = "; ".join(f"{n}: {r}" for n, r in list(skipped.items())[:2])
        return f"scenarios={glob}: no track of {', '.join(tracks)} has data here ({why})"
    sids = sorted({s for d, _ in ok.values() for s in d.scenario_ids})
    more = f" (+{len(sids) - 5} more)" if len(sids) > 5 else ""
    return (f"scenarios={glob}: matches no scenario of the track(s) {', '.join(ok)}; "
            f"their scenarios: {', '.join(sids[:5])}{more}")


def _check_partial(out: Path, predictor: str, params: Mapping[str, Any], subset: Mapping[str, list[str]],
                   split_of: Mapping[str, Split]) -> set[str]:
    """A ``scenarios=`` run on an entry: the entry's predictor and parameters must be these (a
    mixed entry could not be told apart), and a track the entry already predicts must keep its
    split. Returns the tracks the entry does not predict yet (every track of a new entry): they
    are trained on the matching scenarios only; on the others the matching scenarios are
    retrained and the rest kept."""
    path = out / "predictions.parquet"
    meta_path = out / "metadata.yaml"
    if meta_path.is_file():
        meta = yaml.safe_load(meta_path.read_text()) or {}
        old = {"predictor": meta.get("predictor"), "params": meta.get("params") or {}}
        new = {"predictor": predictor, "params": json.loads(json.dumps(dict(params), default=str))}
        if old != new:
            raise ValueError(f"{meta_path}: entry was trained as {old}, not {new}: a partial retrain would mix them")
    if not path.is_file():
        return {t for t, sids in subset.items() if sids}
    have = pd.read_parquet(path, columns=["track", "scenario_id"])
    runs = json.loads((out / "run.json").read_text()).get("split", {}) if (out / "run.json").is_file() else {}
    fresh = set()
    for track, sids in subset.items():
        if sids and not (have["track"] == track).any():
            fresh.add(track)
            continue
        want = [split_of[track].version, split_of[track].spec_hash]
        if sids and track in runs and runs[track] != want:
            raise ValueError(f"{out / 'run.json'}: track {track} was trained on split {runs[track]}, now {want}")
    return fresh


def _training_data(subset: Mapping[str, Mapping[str, Any]]) -> str:
    """``training_data`` of an entry's metadata, naming the tracks it predicts on some scenarios
    only (run.json's ``subset`` lists them)."""
    base = "each track's training split only"
    if not subset:
        return base
    parts = [f"{t}: only the scenarios matching {', '.join(r['patterns'])} ({len(r['scenarios'])} of {r['of']})"
             for t, r in sorted(subset.items())]
    text = f"{base}; {'; '.join(parts)}"
    if len(text) > 1000:  # within the metadata's text bound (foundation/limits.py text_chars)
        text = f"{base}; some scenarios only on {len(subset)} track(s) (run.json: subset)"
    return text


def train_entry(predictor: str, params: Mapping[str, Any], tracks: Iterable[str], roots: Mapping[str, Any] | None,
                out_dir: str | Path, entry: str | None = None, seeds: list[int] | None = None,
                splits_dir: Path | None = None, scenarios: str | Iterable[str] | None = None) -> Path:
    """Fit ``predictor`` on every given track with data and write the entry folder.

    ``scenarios``: glob patterns over scenario ids (``'*-gpu-*'``). On a track the entry
    predicts, only the matching scenarios are fitted again and replaced; the entry's other
    predictions stay as committed, byte for byte. Each scenario is fitted on its own, so this
    equals a whole retrain on those scenarios. On a track the entry does not predict yet (every
    track of a new entry), the matching scenarios are trained and no other: run.json's ``subset``
    and the metadata's ``training_data`` name them. Patterns that match no scenario are a one-line
    ValueError naming them and a few of the tracks' scenario ids."""
    from fnmatch import fnmatchcase

    from .baselines import PREDICTORS, make_predictor

    cls = PREDICTORS.get(predictor)
    params = dict(params)
    entry = slug(entry or predictor)
    out = Path(out_dir) / entry
    tracks = list(tracks)
    from .tracks import inside_package

    user = [t for t in tracks if t in TRACKS and not TRACKS.get(t).packaged]
    if user and inside_package(Path(out_dir)):  # the board's entries: the packaged tracks only
        raise ValueError(f"out={out_dir}: the board's entries take the packaged tracks only, not the user track "
                         f"{user[0]} ({TRACKS.get(user[0]).path}); train it into a folder of your own")
    ok, skipped = available(tracks, roots, splits_dir)
    patterns = scenario_patterns(scenarios)
    subset: dict[str, list[str]] | None = None
    fresh: set[str] = set()  # tracks the entry does not predict yet: trained on the matching scenarios only
    if patterns is not None:
        subset = {n: [s for s in d.scenario_ids if any(fnmatchcase(s, p) for p in patterns)] for n, (d, _) in ok.items()}
        if not any(subset.values()):
            raise ValueError(_no_match(patterns, tracks, ok, skipped))
        fresh = _check_partial(out, predictor, params, subset, {n: sp for n, (_, sp) in ok.items()})
        ok = {n: v for n, v in ok.items() if subset[n]}  # a track with no match is left as it is
    # the scenarios each track fits: None for all of them (a new track of the entry that the
    # patterns cover whole is trained whole)
    only_of: dict[str, list[str] | None] = {
        n: None if subset is None or (n in fresh and len(subset[n]) == len(d.scenario_ids)) else subset[n]
        for n, (d, _) in ok.items()}
    out.mkdir(parents=True, exist_ok=True)  # after the checks: a refused run leaves no folder behind
    rp = out / "run.json"
    old_subset = (json.loads(rp.read_text()).get("subset") or {}) if rp.is_file() else {}
    subset_run: dict[str, Any] = {}  # run.json's subset: tracks the entry predicts on some scenarios only
    frames, failures, seconds, splits, retrained = [], {}, {}, {}, {}
    whole_done: list[Path] = []
    folds = FoldCache(out / ".partial" / FOLDS, {"predictor": predictor, "params": params}) \
        if getattr(cls, "e2e_only", False) else None
    for name, (data, split) in ok.items():
        t0 = time.perf_counter()
        key = {"predictor": predictor, "params": params, "split": [split.version, split.spec_hash]}
        resume = _resume_folder(out, name, key)
        only = only_of[name]
        before = _spent(resume)  # what interrupted runs of the track spent on its finished scenarios
        try:
            frames.append(predict_track(
                data, split, lambda: make_predictor(predictor, **params), resume=resume,
                progress=lambda sid: _progress(entry, name, resume, before + time.perf_counter() - t0),
                only=only, folds=folds))
        except Exception as e:  # noqa: BLE001 - one track failing must not lose the others; recorded below
            why = f"{type(e).__name__}: {e}"
            if only is None or name in fresh:  # no predictions of the track to keep
                failures[name] = why
                if not any(p.suffix == ".parquet" for p in resume.iterdir()):
                    shutil.rmtree(resume)  # no finished scenario to resume from
            else:  # the track keeps its committed predictions: not a failed track, a failed retrain
                retrained[name] = {"scenarios": patterns, "count": len(only), "failed": why}
            log(f"{entry}: {name}: failed: {why}")
            log("".join(traceback.format_exception(e)[-3:]).rstrip())
            continue
        took = round(before + time.perf_counter() - t0, 2)
        splits[name] = [split.version, split.spec_hash]
        if only is None:
            seconds[name] = took
            # the track is whole: its predictions go into the entry below, and its folder goes
            # only once the entry is written (a run stopped before then resumes from it)
            whole_done.append(resume)
        else:  # other scenarios an interrupted whole run left in the folder stay for its resumption
            if name in fresh:  # a new track of the entry: these scenarios and no other
                subset_run[name] = {"patterns": patterns, "scenarios": sorted(only), "of": len(data.scenario_ids),
                                    "seconds": took}
            else:
                retrained[name] = {"scenarios": patterns, "count": len(only), "seconds": took}
                if name in old_subset:  # a track predicted on some scenarios only: these join them
                    was = old_subset[name]
                    now = set(was["scenarios"]) | set(only)
                    subset_run[name] = None if now >= set(data.scenario_ids) else {  # None: whole now
                        "patterns": list(dict.fromkeys([*was["patterns"], *patterns])), "scenarios": sorted(now),
                        "of": len(data.scenario_ids), "seconds": was.get("seconds")}
            for sid in only:
                (resume / f"{slug(sid)}.parquet").unlink(missing_ok=True)
            if not any(p.suffix == ".parquet" for p in resume.iterdir()):
                shutil.rmtree(resume)
        log(f"{entry}: {name}: {len(frames[-1])} predictions in {took} s"
            + ("" if only is None else f" ({len(only)} of {len(data.scenario_ids)} scenarios "
               + ("only: a new track of the entry)" if name in fresh else "retrained)")))
    preds = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["track", "scenario_id", "model_id", "predicted_ms"])
    doc = (cls.__doc__ or "").strip().splitlines()
    seed = params.get("random_state", 0)
    import inspect

    src = Path(inspect.getsourcefile(cls) or "").resolve()
    root = Path(__file__).resolve().parents[1]
    code = f"repo:{src.relative_to(root).as_posix()}" if root in src.parents else "repo:leaderboard/baselines"
    meta = {"method": entry, "authors": "latbench baselines", "code": code,
            "training_data": "each track's training split only", "seeds": list(seeds or [seed if isinstance(seed, int) else 0]),
            "kind": "baseline", "predictor": predictor, "params": json.loads(json.dumps(params, default=str)),
            "description": doc[0] if doc else predictor}
    # a track refitted whole replaces its predictions, and so does one that failed whole: the
    # code can no longer make the old ones, and the board says why instead (run.json's failed)
    replace = {n: (None if only_of[n] is None else set(only_of[n])) for n in ok if "failed" not in retrained.get(n, {})}
    # subset and retrained: always given, so a track trained whole again leaves them (_merge_entry)
    run = {"failed": failures, "skipped": skipped, "seconds": seconds, "split": splits, "subset": subset_run,
           "retrained": retrained}
    _merge_entry(out, preds, meta, run, replace=replace)
    for resume in whole_done:
        shutil.rmtree(resume)
    partial = out / ".partial"
    if partial.is_dir() and not any(p.name != FOLDS for p in partial.iterdir()):
        # no track of the entry is left to resume; a concurrent run (a Hydra multirun over
        # tracks) that has not made its folder yet loses only the folds it could have reused
        shutil.rmtree(partial / FOLDS, ignore_errors=True)
        with suppress(OSError):
            partial.rmdir()
    return out


SPENT = "spent.json"  # <entry>/.partial/<track>/spent.json: seconds spent on the finished scenarios


def _spent(resume: Path) -> float:
    """The seconds earlier runs spent on the finished scenarios kept in ``resume`` (0 for none):
    a resumed track's run.json ``seconds`` is its whole fitting time, not the last run's."""
    try:
        return float(json.loads((resume / SPENT).read_text())["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def _progress(entry: str, track: str, resume: Path, spent: float) -> None:
    (resume / SPENT).write_text(json.dumps({"seconds": round(spent, 2)}) + "\n")
    n = sum(1 for _ in resume.glob("*.parquet"))
    if n % 10 == 0:
        log(f"{entry}: {track}: {n} scenarios done (kept in {resume}; a stopped run resumes from there)")


@contextmanager
def _locked(folder: Path):
    """An exclusive lock on an entry folder: sweep jobs of one predictor on different tracks
    (Hydra's joblib launcher runs them in parallel) merge into the same entry."""
    import fcntl

    with open(folder / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _merge_entry(out: Path, preds: pd.DataFrame, meta: dict[str, Any], run: dict[str, Any],
                 replace: Mapping[str, set[str] | None] | list[str]) -> None:
    """Write the entry, keeping predictions of tracks this run did not touch. ``replace`` maps a
    track to None (retrained whole) or to the scenarios retrained (the track's others are kept)."""
    if not isinstance(replace, Mapping):
        replace = {t: None for t in replace}
    whole = [t for t, sids in replace.items() if sids is None]
    with _locked(out):
        path = out / "predictions.parquet"
        if path.is_file():
            old = pd.read_parquet(path)
            drop = old["track"].isin(whole)
            for t, sids in replace.items():
                if sids is not None:
                    drop |= (old["track"] == t) & old["scenario_id"].isin(sids)
            preds = pd.concat([old[~drop], preds], ignore_index=True)
        preds = preds.astype({"track": "string", "scenario_id": "string", "model_id": "string", "predicted_ms": "float64"})
        if "fold" in preds.columns:  # set on tracks of repeated draws only (seeds), NA elsewhere
            preds["fold"] = preds["fold"].astype("Int64")
            if preds["fold"].isna().all():
                preds = preds.drop(columns="fold")
        order = ["track", "scenario_id"] + (["fold"] if "fold" in preds.columns else []) + ["model_id"]
        preds.sort_values(order, kind="stable").to_parquet(path, index=False)
        rp = out / "run.json"
        old_run = json.loads(rp.read_text()) if rp.is_file() else {}
        for k, v in run.items():  # per track; a partial retrain keeps the track's whole-run record
            merged = {t: x for t, x in old_run.get(k, {}).items() if t not in whole and t not in v}
            merged.update({t: x for t, x in v.items() if x is not None})  # None: the track's record goes
            old_run[k] = merged
        for k in ("subset", "retrained"):  # only where a track has one
            if not old_run.get(k):
                old_run.pop(k, None)
        rp.write_text(json.dumps(old_run, indent=1, sort_keys=True) + "\n")
        # the metadata names the tracks predicted on some scenarios only (run.json's subset)
        meta = {**meta, "training_data": _training_data(old_run.get("subset") or {})}
        (out / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))


# ---------------------------------------------------------------- scoring
def _plot_data(df: pd.DataFrame) -> dict[str, Any]:
    rel = (df["predicted_ms"] - df["latency_ms"]) / df["latency_ms"]
    q = np.linspace(0, 100, CDF_POINTS)
    cdf = np.percentile(np.abs(rel.to_numpy()) * 100.0, q)
    d = df
    if len(d) > PLOT_POINTS:
        step = len(d) / PLOT_POINTS
        d = d.iloc[(np.arange(PLOT_POINTS) * step).astype(int)]
    return {"measured": [round(float(x), 5) for x in d["latency_ms"]],
            "predicted": [round(float(x), 5) for x in d["predicted_ms"]],
            "scenario": d["scenario_id"].astype(str).tolist(),
            "abs_pct_error_quantiles": [round(float(x), 4) for x in cdf]}


def _clean(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def evaluate_entry(entry_dir: str | Path, roots: Mapping[str, Any] | None, results_dir: str | Path,
                   splits_dir: Path | None = None, checked: Any = None) -> dict[str, dict[str, Any]]:
    """Validate one entry folder and write one result file per track it covers; a track without
    data on this machine is left out (the board lists such a track with its reason)."""
    from .submission import validate

    entry_dir = Path(entry_dir)
    pred = next((p for p in (entry_dir / "predictions.parquet", entry_dir / "predictions.csv") if p.is_file()),
                entry_dir / "predictions.parquet")
    meta = next((p for p in (entry_dir / "metadata.yaml", entry_dir / "metadata.yml", entry_dir / "metadata.json")
                 if p.is_file()), entry_dir / "metadata.yaml")
    from .submission import SubmissionError

    if checked is None:  # (a caller that caught a partial rejection passes the valid part)
        try:
            checked = validate(pred, meta, roots, splits_dir, skip_unavailable=True)
        except SubmissionError as whole:
            _valid_tracks(pred, meta, roots, splits_dir, whole)  # raises, with the valid tracks attached
    out = {}
    for name, df in checked.tracks.items():
        track = TRACKS.get(name)
        data = resolve(track, roots)
        groups = scenario_groups(data.dataset, data.scenario_ids, tuple(dict.fromkeys((*track.group_by, *SCENARIO_COLUMNS))))
        given = {"scenario_id": df["scenario_id"].tolist(), "y_true": df["latency_ms"].to_numpy(),
                 "y_pred": df["predicted_ms"].to_numpy()}
        if "fold" in df.columns:  # repeated draws (seeds): scored per fold, mean and spread
            given["fold"] = [int(x) for x in df["fold"]]
        res = Evaluator(track, groups).eval(given)
        doc = {"entry": entry_dir.name, "track": name, "track_version": track.version, "meta": checked.meta,
               "result": res, "plot": _plot_data(df), "networks": int(len(df))}
        path = Path(results_dir) / name / f"{entry_dir.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_clean(doc), indent=1, default=str) + "\n")
        out[name] = doc
    return out


def _valid_tracks(pred: Path, meta: Path, roots: Mapping[str, Any] | None, splits_dir: Path | None, whole: Exception) -> Any:
    """An entry with faults: validate each track's rows on their own, so a fault on one track
    rejects that track only. Raises SubmissionError (with the rejected tracks' problems in
    ``.problems`` and the valid ones in ``.partial``) when anything was rejected."""
    import tempfile

    from .submission import Checked, SubmissionError, read_predictions, validate

    df = read_predictions(pred, [])  # bounded (rows, bytes) like the validator
    if df is None:  # the file itself is unreadable: the whole entry's problems stand
        raise whole from None
    tracks = sorted(set(df["track"].dropna().astype(str)))
    good, problems, on = Checked(meta={}), [], []
    with tempfile.TemporaryDirectory() as tmp:
        for t in tracks:
            part = Path(tmp) / f"{slug(t)}{pred.suffix}"
            rows = df[df["track"].astype(str) == t]
            rows.to_parquet(part, index=False) if pred.suffix == ".parquet" else rows.to_csv(part, index=False)
            try:
                c = validate(part, meta, roots, splits_dir, skip_unavailable=True)
            except SubmissionError as e:
                problems += [p.replace(str(part), pred.name) for p in e.problems]
                on += [t] * len(e.problems)
                continue
            good.meta = c.meta
            good.tracks.update(c.tracks)
            good.unavailable.update(c.unavailable)
    if not problems:
        raise whole
    err = SubmissionError(problems, tracks=on)
    err.partial = good
    raise err


def write_status(roots: Mapping[str, Any] | None, results_dir: str | Path, splits_dir: Path | None = None) -> dict[str, Any]:
    """``<results>/status.json``: every registered track, available or why not (for the board)."""
    ok, skipped = available(TRACKS.names(), roots, splits_dir, write_splits=False)
    status = {}
    for name in TRACKS.names():
        t = TRACKS.get(name)
        base = {"title": t.title, "description": t.description, "reference": t.reference, "primary": t.primary,
                "metrics": list(t.metrics), "group_by": list(t.group_by), "version": t.version, "data": t.data,
                "target": t.target, "unit": TARGETS[t.target][1]}
        if name in ok:
            data, split = ok[name]
            base.update(available=True, scenarios=len(data.scenario_ids), networks=int(len(data.networks)),
                        folds=len({f.fold for f in split.folds}))
        else:
            base.update(available=False, reason=skipped[name])
        status[name] = base
    p = Path(results_dir) / "status.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(status, indent=1) + "\n")
    return status


# the committed entries of the project's baselines, one folder per data root (made by
# `leaderboard-train predictor=all track=<root> out=<folder>`, spread over sessions)
ENTRIES = {"public": "leaderboard/entries/public", "host": "leaderboard/entries/host"}


def note_absent_predictors(results_dir: str | Path, entry_dirs: Iterable[str | Path]) -> dict[str, Any]:
    """Adds to ``<results>/status.json``, per available track, every registered predictor that
    has no result there and why (``not_entered``): the reason its training run recorded
    (``run.json``: failed or skipped), else the evaluator's reason when it rejected the entry's
    predictions for the track (``<results>/rejected.json``: e.g. a predicted 0 ms), else the
    predictor's own ``board_tracks`` (track patterns it is entered on, and why not on the others)
    when the track is outside them, else that it has not been trained on the track. The board
    shows these, so a predictor missing from a track is never silent."""
    from fnmatch import fnmatch

    from .baselines import PREDICTORS

    results = Path(results_dir)
    status = json.loads((results / "status.json").read_text())
    recorded: dict[tuple[str, str], str] = {}
    for folder in entry_dirs:
        for run_file in sorted(Path(folder).glob("*/run.json")):
            run = json.loads(run_file.read_text())
            for kind in ("failed", "skipped"):
                for track, why in (run.get(kind) or {}).items():
                    recorded[(run_file.parent.name, track)] = f"{kind}: {why}"
    rejected_file = results / "rejected.json"
    rejected = json.loads(rejected_file.read_text()) if rejected_file.is_file() else {}
    for name, problems in rejected.items():
        for p in problems:  # a whole-entry refusal names no track: the board lists it apart
            if p.get("track") is not None:
                recorded.setdefault((name, p["track"]), f"rejected by the evaluator: {p['problem']}")
    for track, st in status.items():
        if not isinstance(st, dict) or not st.get("available"):
            continue
        absent = {}
        for name in PREDICTORS.names():
            if (results / track / f"{name}.json").is_file():
                continue
            scope = getattr(PREDICTORS.get(name), "board_tracks", None)
            if (name, track) in recorded:
                absent[name] = recorded[(name, track)]
            elif scope and not any(fnmatch(track, pat) for pat in scope[0]):
                absent[name] = f"not entered on this track: {scope[1]}"
            else:
                absent[name] = (f"not trained on this track yet: `leaderboard-train predictor={name} track={track} "
                                f"out={ENTRIES[st['data']]}`")
        st["not_entered"] = absent
    (results / "status.json").write_text(json.dumps(status, indent=1) + "\n")
    return status


__all__ = ["FoldCache", "board_view", "mask", "predict_track", "available", "train_entry", "evaluate_entry", "write_status", "slug",
           "note_absent_predictors", "ENTRIES"]
