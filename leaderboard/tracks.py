"""Tracks: the leaderboard's tasks, one YAML file each under ``leaderboard/tracks/``.

A track is a dataset slice (which models, which scenarios), a split protocol with its
parameters (:mod:`leaderboard.protocols`), the metrics and the primary metric the board sorts
by. ``TRACKS`` holds every track of the registry folder (loaded on import, checked: a wrong key
is one line naming the file and the key). Like lm-evaluation-harness's YAML tasks, adding a
track is adding one file.

User tracks. A folder of track files of one's own (``--tracks DIR`` on the ``leaderboard``
command, ``tracks:`` of ``leaderboard-train``, or ``LATBENCH_TRACKS``, folders separated by
``os.pathsep``) joins the registry through :func:`use_track_folders`, checked like the packaged
files; a user track may not take a packaged track's name (one line naming both files). Its split
files go to the user's splits folder (``--splits`` / ``splits:`` / ``LATBENCH_SPLITS``, default
:data:`USER_SPLITS`), never into the package; a packaged track's split stays in
``leaderboard/splits/``.

Data. A track reads one of two data roots: ``public`` (the imported public measurements,
default ``data/public``) or ``host`` (the suite's own measurements, default the committed
release ``datasets/host-v1``, so every machine scores the host tracks on the same data and their
entries are committed like the public ones; point it at a dataset of your own, e.g. the main
job's ``data/dataset``, with ``--host`` / ``LATBENCH_HOST_DATA`` / ``host=``: :func:`data_roots`).
:func:`resolve` gives :class:`TrackData` (the slice: dataset, scenarios, networks) or
:class:`Unavailable` with the reason (no data folder, no matching scenario, too few networks):
a track without data is reported and skipped, it never fails the board.

Splits. OGB's rule: a split is fixed once and read from a file, never recomputed differently.
The first time a track has data, :func:`ensure_split` runs the protocol and writes
``leaderboard/splits/<data>/<track>.v<version>.json`` (committed; a user track's:
``<user splits>/<data>/<track>.v<version>.json``); from then on that file is the split.
Changing a track's protocol or parameters without bumping ``version`` is an error (the file no
longer matches the spec); a bump writes a new file beside the old one. Split files list network
*names* (unique within a track's slice), so they survive a re-import that rebuilds model ids.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from foundation.registry import Registry

from .metrics import DEFAULT_METRICS, METRICS
from .protocols import PROTOCOLS, Fold

HERE = Path(__file__).resolve().parent
TRACKS_DIR = HERE / "tracks"
SPLITS_DIR = HERE / "splits"
# The one place the data roots' defaults are set (relative to the checkout); the command line,
# leaderboard/conf/train.yaml and leaderboard/dvc.yaml follow it (data_roots). The host tracks
# read one release (a release holds one processor, so the board reads one of them): host-v1
# (AMD EPYC), which holds every scenario the suite's release protocol measures (TFLite fp32 and
# int8 1-large, fp32 2-large, PyTorch, the software GPU) and the lower noise floor (the board
# shows it; why the board moved here: datasets/host-v1/CHANGES.md). host-xeon-v1 stays a release
# of its own.
DATA_ROOTS = {"public": "data/public", "host": "datasets/host-v1"}
ROOT_ENV = {"public": "LATBENCH_PUBLIC_DATA", "host": "LATBENCH_HOST_DATA"}
# the user's own track folders and splits folder (use_track_folders): the environment's names and
# the splits folder's default (relative to the working directory, beside leaderboard-train's
# data/leaderboard/entries)
TRACKS_ENV, SPLITS_ENV = "LATBENCH_TRACKS", "LATBENCH_SPLITS"
USER_SPLITS = "data/leaderboard/splits"
# leaderboard-train's track= groups (every track, every track of a data root): never a track's name
RESERVED_NAMES = ("all", *DATA_ROOTS)


def data_roots(public: str | Path | None = None, host: str | Path | None = None) -> dict[str, str]:
    """The data roots to read: a given folder, else the environment (``LATBENCH_PUBLIC_DATA`` /
    ``LATBENCH_HOST_DATA``), else :data:`DATA_ROOTS`."""
    import os

    given = {"public": public, "host": host}
    return {k: str(given[k] or os.environ.get(ROOT_ENV[k]) or DATA_ROOTS[k]) for k in DATA_ROOTS}


class TrackError(ValueError):
    """A track file or split file that is wrong; the message names the file and the key."""


#: ``uses`` -> the tables whose times in the track's scenario a predictor does not see.
BLANKED: dict[str, tuple[str, ...]] = {"e2e": ("ops", "kernels"), "ops": (), "kernels": ("ops",)}

#: ``target`` -> (the e2e column a track's predictors predict, its unit). A track of another target
#: than latency puts that column in ``latency_ms`` of its slice's e2e rows (the one column every
#: predictor learns and the evaluator scores) and leaves out the rows without it; every scenario of
#: the slice reads it, a transfer protocol's sources too. Peak memory is the upper end of the range
#: the source gives (Qualcomm AI Hub: the peak over its runs lies within [min, max] MB).
TARGETS: dict[str, tuple[str, str]] = {"latency": ("latency_ms", "ms"), "peak_memory": ("peak_memory_max_mb", "MB")}


# ---------------------------------------------------------------- the spec
@dataclass(frozen=True)
class Track:
    name: str
    version: int
    title: str
    description: str
    data: str  # "public" | "host"
    models: dict[str, Any]  # column filters on the models table
    scenarios: dict[str, Any]  # column filters on the scenarios table
    protocol: str
    params: dict[str, Any]
    metrics: tuple[str, ...] = DEFAULT_METRICS
    primary: str = "mape"
    group_by: tuple[str, ...] = ()  # scenario columns the board also aggregates by
    # what predictors may read of the training networks in the track's scenario besides e2e:
    # "e2e" nothing, "ops" their op and kernel records, "kernels" their kernel records only (the
    # host's op records are another run's: builtin kernels with XNNPACK off, well over e2e)
    uses: str = "e2e"
    reference: str = ""  # where the track comes from (paper, section)
    # a scenario joins the track when at least this many of the slice's networks are measured in
    # it (the public sources measure some models on a few devices only)
    min_networks: int = 0
    path: str = ""  # the YAML file
    # the folder of a user track's split files (use_track_folders); "" for a packaged track, whose
    # splits are the package's leaderboard/splits
    splits: str = ""
    target: str = "latency"  # what the predictors predict (TARGETS)

    @property
    def packaged(self) -> bool:
        """A track of the package's ``leaderboard/tracks/`` (not a user folder's)."""
        return not self.splits

    @property
    def split_file(self) -> Path:
        return self.split_path()

    def split_path(self, folder: Path | None = None) -> Path:
        """``<splits>/<data>/<track>.v<version>.json``: one folder per data root, so the public
        tracks' training stage depends on the public splits only (a host split frozen on a new
        machine does not invalidate the public board). ``<splits>`` is ``folder`` when given, else
        the track's own: the package's ``leaderboard/splits``, or a user track's splits folder."""
        own = Path(self.splits) if self.splits else SPLITS_DIR
        return (folder or own) / self.data / f"{self.name}.v{self.version}.json"

    def spec_hash(self) -> str:
        """Hash of what determines the split: slice + protocol + parameters."""
        spec = {"models": self.models, "scenarios": self.scenarios, "protocol": self.protocol, "params": self.params}
        if self.min_networks:  # only when set, so the tracks without it keep their hashes
            spec["min_networks"] = self.min_networks
        if self.target != "latency":
            spec["target"] = self.target
        blob = json.dumps(spec, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


_FIELDS = {"name", "version", "title", "description", "data", "models", "scenarios", "protocol", "params",
           "metrics", "primary", "group_by", "uses", "reference", "min_networks", "target"}
_REQUIRED = ("name", "version", "title", "data", "scenarios", "protocol")


def parse_track(d: Any, where: str) -> Track:
    """A YAML mapping -> Track, checked (TrackError "<file>: <key>: ...")."""
    if not isinstance(d, Mapping):
        raise TrackError(f"{where}: expected a mapping at the top level, got {type(d).__name__}")
    unknown = sorted(set(d) - _FIELDS)
    if unknown:
        raise TrackError(f"{where}: {unknown[0]}: unknown key (known: {', '.join(sorted(_FIELDS))})")
    for k in _REQUIRED:
        if k not in d:
            raise TrackError(f"{where}: {k}: missing")
    name = d["name"]
    if not isinstance(name, str) or not name or any(c.isspace() or c in "/\\" for c in name):
        raise TrackError(f"{where}: name: expected a short id without spaces or slashes, got {name!r}")
    if name in RESERVED_NAMES:
        raise TrackError(f"{where}: name: {name!r} is reserved (leaderboard-train's track= groups: {', '.join(RESERVED_NAMES)})")
    if Path(where).suffix and Path(where).stem != name:
        raise TrackError(f"{where}: name: {name!r} differs from the file name {Path(where).stem!r}")
    if isinstance(d["version"], bool) or not isinstance(d["version"], int) or d["version"] < 1:
        raise TrackError(f"{where}: version: expected an int >= 1, got {d['version']!r}")
    if d["data"] not in DATA_ROOTS:
        raise TrackError(f"{where}: data: {d['data']!r} is not a data root (known: {', '.join(DATA_ROOTS)})")
    for k in ("models", "scenarios", "params"):
        if d.get(k) is not None and not isinstance(d[k], Mapping):
            raise TrackError(f"{where}: {k}: expected a mapping, got {type(d[k]).__name__}")
    if d["protocol"] not in PROTOCOLS:
        raise TrackError(f"{where}: protocol: unknown protocol {d['protocol']!r} (known: {', '.join(PROTOCOLS.names())})")
    metrics = tuple(d.get("metrics") or DEFAULT_METRICS)
    for m in metrics:
        if m not in METRICS:
            raise TrackError(f"{where}: metrics: unknown metric {m!r} (known: {', '.join(METRICS.names())})")
    primary = d.get("primary", metrics[0])
    if primary not in metrics:
        raise TrackError(f"{where}: primary: {primary!r} is not one of the track's metrics")
    mn = d.get("min_networks", 0)
    if isinstance(mn, bool) or not isinstance(mn, int) or mn < 0:
        raise TrackError(f"{where}: min_networks: expected an int >= 0, got {mn!r}")
    if d.get("uses", "e2e") not in BLANKED:
        raise TrackError(f"{where}: uses: expected one of {', '.join(BLANKED)}, got {d['uses']!r}")
    if d.get("target", "latency") not in TARGETS:
        raise TrackError(f"{where}: target: expected one of {', '.join(TARGETS)}, got {d['target']!r}")
    track = Track(name=name, version=d["version"], title=str(d["title"]), description=str(d.get("description", "")).strip(),
                  data=d["data"], models=dict(d.get("models") or {}), scenarios=dict(d["scenarios"] or {}),
                  protocol=d["protocol"], params=dict(d.get("params") or {}), metrics=metrics, primary=primary,
                  group_by=tuple(d.get("group_by") or ()), uses=d.get("uses", "e2e"),
                  reference=str(d.get("reference", "")), min_networks=mn, path=where,
                  target=d.get("target", "latency"))
    try:
        PROTOCOLS.get(track.protocol).check(track.params)
    except (TypeError, ValueError) as e:
        raise TrackError(f"{where}: params: {e}") from None
    return track


def read_track(path: Path) -> Track:
    """One track file, checked (TrackError naming the file and the key). The file is named
    relative to the checkout when it is inside it, else as given."""
    path = Path(path)
    rel = path.resolve().relative_to(HERE.parent).as_posix() if HERE.parent in path.resolve().parents else str(path)
    from foundation.safeload import LoadError, load_yaml

    try:  # bounded like every file from outside (a user's track file is one)
        d = load_yaml(path, where=rel)
    except LoadError as e:
        raise TrackError(str(e)) from None
    except OSError as e:
        raise TrackError(f"{rel}: unreadable ({type(e).__name__}: {e.strerror or e})") from None
    return parse_track(d, rel)


def load_tracks(folder: str | Path = TRACKS_DIR) -> Registry[Track]:
    """Every ``*.yaml`` of the folder as a registry of tracks."""
    reg: Registry[Track] = Registry("track")
    for path in sorted(Path(folder).glob("*.yaml")):
        t = read_track(path)
        reg.register(t.name)(t)
    return reg


# ---------------------------------------------------------------- data
@dataclass
class Unavailable:
    """A track that cannot run on the data at hand, and why (shown on the board)."""

    track: str
    reason: str


@dataclass
class TrackData:
    """A track's slice of a dataset: ``dataset`` holds only the rows of the slice's source
    datasets; ``scenario_ids`` the track's scenarios with e2e rows; ``networks`` the models table
    of the slice (name -> model_id via :meth:`ids`)."""

    track: Track
    dataset: Any  # pipelines.dataset.load.Dataset
    scenario_ids: list[str]
    networks: pd.DataFrame  # models rows of the slice, sorted by name

    def ids(self, names: Iterable[str]) -> list[str]:
        m = dict(zip(self.networks["name"], self.networks["model_id"]))
        return [m[n] for n in names if n in m]

    def names(self, ids: Iterable[str]) -> list[str]:
        m = dict(zip(self.networks["model_id"], self.networks["name"]))
        return [m[i] for i in ids if i in m]

    def measured(self, scenario_id: str) -> pd.DataFrame:
        """e2e rows of the slice's networks in one scenario, with the network name."""
        e = self.dataset.e2e_for(scenario_id)
        e = e[e["model_id"].isin(set(self.networks["model_id"]))]
        return e.merge(self.networks[["model_id", "name"]], on="model_id", how="left")


def _match(df: pd.DataFrame, where: Mapping[str, Any], table: str, track: Track) -> pd.DataFrame:
    for col, val in where.items():
        if col not in df.columns:
            raise TrackError(f"{track.path}: {table}.{col}: the {table} table has no such column")
        if isinstance(val, (list, tuple)):
            df = df[df[col].isin(list(val))]
        elif val is None:
            df = df[df[col].isna()]
        else:
            df = df[df[col] == val]
    return df


_DATASETS: dict[Path, Any] = {}


def open_dataset(root: str | Path) -> Any:
    """Load a dataset folder once per process (tracks share it)."""
    from pipelines.dataset.load import load_dataset

    p = Path(root).resolve()
    if p not in _DATASETS:
        _DATASETS[p] = load_dataset(p)
    return _DATASETS[p]


def _frozen_networks(track: Track) -> set[str] | None:
    """The networks the track's committed split names (:func:`read_split`), or None before it has one."""
    s = read_split(track)
    return None if s is None else {n for f in s.folds for n in (*f.train, *f.test)}


def resolve(track: Track, roots: Mapping[str, str | Path] | None = None) -> TrackData | Unavailable:
    """The track's slice of its data root, or why there is none."""
    root = Path((roots or {}).get(track.data) or DATA_ROOTS[track.data])
    if not root.is_absolute() and not root.exists() and (HERE.parent / root).is_dir():
        root = HERE.parent / root  # a committed folder (datasets/host-v1) from outside the checkout
    from pipelines.public import skipped_reasons

    skipped = sorted(skipped_reasons(root))
    skipped = f"import-public skipped {', '.join(skipped)} ({root / 'SKIPPED.json'} says why)" if skipped else ""
    if not root.is_dir() or not any(root.glob("*.parquet")):
        return Unavailable(track.name, f"no {track.data} data: " + (skipped or f"{root} has no dataset tables yet"))
    ds = with_target(open_dataset(root), track.target)
    scen = _match(ds.scenarios, track.scenarios, "scenarios", track)
    models = _match(ds.models, track.models, "models", track)
    e2e = ds.e2e[ds.e2e["scenario_id"].isin(set(scen["scenario_id"])) & ds.e2e["model_id"].isin(set(models["model_id"]))]
    from .protocols import PROTOCOLS

    frozen = _frozen_networks(track) if PROTOCOLS.get(track.protocol).partitions(track.params) else None
    if frozen is not None:  # a frozen track keeps its networks: new ones join with a new version
        models = models[models["name"].isin(frozen)]
        e2e = e2e[e2e["model_id"].isin(set(models["model_id"]))]
    if track.min_networks:  # counted among the track's networks (a frozen track's own)
        count = e2e.groupby("scenario_id")["model_id"].nunique()
        e2e = e2e[e2e["scenario_id"].isin(set(count.index[count >= track.min_networks]))]
    sids = sorted(set(e2e["scenario_id"]))
    if not sids:
        return Unavailable(track.name, f"no measurements in {root} match the track's slice "
                           f"(scenarios {track.scenarios}, models {track.models or 'all'}"
                           + (f", at least {track.min_networks} networks per scenario" if track.min_networks else "") + ")"
                           + (f"; {skipped}" if skipped else ""))
    models = models[models["model_id"].isin(set(e2e["model_id"]))]
    dup = models["name"][models["name"].duplicated()]
    if len(dup):
        raise TrackError(f"{track.path}: the slice has two networks named {dup.iloc[0]!r}; split files key networks by name")
    sources = set(scen["dataset"]) | set(models["dataset"])
    sub = ds.subset(sources) if set(ds.models["dataset"]) - sources else ds
    nets = models[["model_id", "name", "source", "family", "dataset"]].sort_values("name").reset_index(drop=True)
    return TrackData(track, sub, sids, nets)


def with_target(ds: Any, target: str) -> Any:
    """``ds`` with the ``target``'s column as every e2e row's ``latency_ms`` (:data:`TARGETS`); the
    rows without it left out. Latency: ``ds`` itself."""
    column = TARGETS[target][0]
    if column == "latency_ms":
        return ds
    from pipelines.dataset.load import Dataset

    e = ds.e2e
    e = e[e[column].notna() & (e[column] > 0)].copy()
    e["latency_ms"] = e[column].astype("float64")
    return Dataset({**ds.tables(), "e2e": e.reset_index(drop=True)}, path=ds.path, check=False)


# ---------------------------------------------------------------- split files
@dataclass
class Split:
    track: str
    version: int
    spec_hash: str
    folds: list[Fold] = field(default_factory=list)

    def for_scenario(self, scenario_id: str) -> list[Fold]:
        own = [f for f in self.folds if f.scenario_id == scenario_id]
        return own or [f for f in self.folds if f.scenario_id == "*"]

    def test_names(self, scenario_id: str) -> list[str]:
        """The scenario's test networks, each once (repeated folds test the same ones)."""
        return list(dict.fromkeys(n for f in self.for_scenario(scenario_id) for n in f.test))

    @property
    def repeated(self) -> bool:
        """Repeated draws (seeds): some scenario has several folds that test the same networks,
        so predictions carry a ``fold`` column (one prediction per network and fold)."""
        by: dict[str, list[frozenset[str]]] = {}
        for f in self.folds:
            by.setdefault(f.scenario_id, []).append(frozenset(f.test))
        return any(len(v) > 1 and len(set(v)) == 1 for v in by.values())

    def to_json(self) -> str:
        d = {"track": self.track, "version": self.version, "spec_hash": self.spec_hash,
             "folds": [{"fold": f.fold, "scenario_id": f.scenario_id, "train": list(f.train), "test": list(f.test)}
                       for f in self.folds]}
        return json.dumps(d, indent=1) + "\n"

    @classmethod
    def read(cls, path: Path) -> "Split":
        try:
            d = json.loads(path.read_text())
            folds = [Fold(int(f["fold"]), str(f["scenario_id"]), tuple(f["train"]), tuple(f["test"])) for f in d["folds"]]
            return cls(d["track"], int(d["version"]), d["spec_hash"], folds)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise TrackError(f"{path}: unreadable split file ({type(e).__name__}: {e})") from None


def compute_split(data: TrackData) -> Split:
    """Run the track's protocol on its data (what :func:`ensure_split` freezes into a file)."""
    t = data.track
    folds = PROTOCOLS.get(t.protocol).folds(t.params, data)
    split = Split(t.name, t.version, t.spec_hash(), folds)
    if split.repeated:  # repeated draws (seeds): every fold of a scenario tests the same networks
        for f in folds:
            first = split.for_scenario(f.scenario_id)[0]
            if set(f.test) != set(first.test):
                raise TrackError(f"{t.path}: protocol {t.protocol}: fold {f.fold} of {f.scenario_id} tests other "
                                 f"networks than fold {first.fold} (repeated folds must test the same ones)")
        return split
    seen: dict[tuple[str, str], int] = {}
    for f in folds:  # every (scenario, network) is tested once: submissions carry no fold column
        for n in f.test:
            key = (f.scenario_id, n)
            if key in seen:
                raise TrackError(f"{t.path}: protocol {t.protocol} tests {n!r} in folds {seen[key]} and {f.fold}")
            seen[key] = f.fold
    return split


def read_split(track: Track, folder: Path | None = None) -> Split | None:
    path = track.split_path(folder)
    if not path.is_file():
        return None
    s = Split.read(path)
    if s.track != track.name or s.version != track.version:
        raise TrackError(f"{path}: split file is for {s.track} v{s.version}, not {track.name} v{track.version}")
    if s.spec_hash != track.spec_hash():
        raise TrackError(f"{path}: {track.path} changed its slice, protocol or params since this split was "
                         f"written; bump the track's version to freeze a new split")
    return s


def ensure_split(data: TrackData, folder: Path | None = None, write: bool = True) -> tuple[Split, bool]:
    """The track's frozen split; computed and written on first use. Returns (split, new)."""
    path = data.track.split_path(folder)
    s = read_split(data.track, folder)
    if s is not None:
        known = set(data.networks["name"])
        named = {n for f in s.folds for n in (*f.train, *f.test)}
        if not named & known:
            raise TrackError(f"{path}: none of its networks is in the data "
                             f"(first: {sorted(named)[:1]}); is this the data the split was made from?")
        return s, False
    s = compute_split(data)
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(s.to_json())
    return s, True


TRACKS: Registry[Track] = load_tracks()
PACKAGED: dict[str, Track] = {n: TRACKS.get(n) for n in TRACKS.names()}  # leaderboard/tracks/, as loaded on import
_USER: dict[str, Track] = {}  # the user tracks use_track_folders registered last


# ---------------------------------------------------------------- user tracks
def inside_package(p: Path) -> bool:
    """Whether ``p`` is the package's ``leaderboard/`` folder or inside it."""
    here = HERE.resolve()
    q = p.resolve()
    return q == here or here in q.parents


def track_folders(given: str | Path | Iterable[str | Path] | None = None) -> list[Path]:
    """The user's track folders: the given ones, else ``LATBENCH_TRACKS`` (folders separated by
    ``os.pathsep``), else none."""
    items = [] if given is None else [given] if isinstance(given, (str, Path)) else list(given)
    if not items:
        items = [p for p in os.environ.get(TRACKS_ENV, "").split(os.pathsep) if p.strip()]
    return [Path(p) for p in items]


def user_splits(given: str | Path | None = None) -> Path:
    """The folder of the user tracks' split files: the given one, else ``LATBENCH_SPLITS``, else
    :data:`USER_SPLITS` (relative to the working directory)."""
    return Path(given or os.environ.get(SPLITS_ENV) or USER_SPLITS)


def use_track_folders(folders: str | Path | Iterable[str | Path] | None = None,
                      splits: str | Path | None = None) -> list[Track]:
    """Register the tracks of the user's folders (:func:`track_folders`) in :data:`TRACKS`, their
    split files in ``splits`` (:func:`user_splits`), in place of the user tracks registered
    before; the packaged tracks stay. Each file is checked as the packaged ones are; a name that
    a packaged track or another user file has is a TrackError naming both files, and so is a
    tracks or splits folder inside the package. Returns the user tracks."""
    dirs = track_folders(folders)
    split_dir = user_splits(splits)
    if dirs and inside_package(split_dir):
        raise TrackError(f"{split_dir}: splits folder: inside the package ({HERE}); "
                         f"user tracks' splits go to a folder of the user's (--splits / {SPLITS_ENV})")
    new: dict[str, Track] = {}
    for d in dirs:
        if not d.is_dir():
            raise TrackError(f"{d}: tracks folder: no such folder (--tracks / {TRACKS_ENV})")
        if inside_package(d):
            raise TrackError(f"{d}: tracks folder: inside the package ({HERE}); give a folder of your own")
        for path in sorted(d.glob("*.yaml")):
            t = read_track(path)
            if t.name in PACKAGED:
                raise TrackError(f"{t.path}: name: {t.name!r} is the packaged track {PACKAGED[t.name].path}; choose another name")
            if t.name in new:
                raise TrackError(f"{t.path}: name: {t.name!r} is also the track {new[t.name].path}; choose another name")
            new[t.name] = dataclasses.replace(t, splits=str(split_dir))
    # the user tracks of the previous call leave (the packaged tracks and whatever else was registered stay)
    for name in list(_USER):
        TRACKS.unregister(name, _USER.pop(name))
    for name, t in new.items():
        TRACKS.register(name)(t)
        _USER[name] = t
    return list(new.values())


_GLOB = set("*?[")


def derive_track(template: Track, target: str, name: str, data: str | None = None,
                 roots: Mapping[str, str | Path] | None = None) -> dict[str, Any]:
    """A track file's mapping for a new target from ``template`` (``leaderboard track new``): the
    template's protocol, parameters, models, metrics and scenario filters, with the scenarios the
    protocol predicts (its targets; the sources of a transfer protocol stay the template's)
    replaced by ``target``: a device of the data root (the scenarios' ``device`` column), or a
    scenario id or a glob over scenario ids. ``data``: the data root the track reads (default the
    template's). The target is looked up in that root's scenarios table; what cannot be found is
    a TrackError naming ``--target`` and a few of what is there."""
    from fnmatch import fnmatchcase

    data = data or template.data
    if data not in DATA_ROOTS:
        raise TrackError(f"--data: {data!r} is not a data root (known: {', '.join(DATA_ROOTS)})")
    root = Path((roots or {}).get(data) or data_roots()[data])
    if not root.is_absolute() and not root.exists() and (HERE.parent / root).is_dir():
        root = HERE.parent / root
    if not root.is_dir() or not any(root.glob("*.parquet")):
        raise TrackError(f"--target: {root} ({data} data) has no dataset tables to find {target!r} in")
    sc = open_dataset(root).scenarios
    devices = sorted(set(sc["device"].dropna().astype(str)))
    ids = sorted(set(sc["scenario_id"].astype(str)))
    keep = {k: v for k, v in template.scenarios.items() if k not in ("device", "scenario_id")}
    if target in devices:
        scenarios, hit, what = {**keep, "device": [target]}, {target}, f"the device {target}"
    else:
        matched = [i for i in ids if fnmatchcase(i, target)] if _GLOB & set(target) else [i for i in ids if i == target]
        if not matched:
            few = lambda xs: ", ".join(xs[:5]) + (f" (+{len(xs) - 5} more)" if len(xs) > 5 else "")
            raise TrackError(f"--target: {target!r} is no device and matches no scenario id in {root} "
                             f"(devices: {few(devices)}; scenarios: {few(ids)})")
        scenarios = {**keep, "scenario_id": matched}
        hit = set(sc.loc[sc["scenario_id"].isin(matched), "device"].dropna().astype(str))
        what = f"the scenarios {target} ({len(matched)})"
    sources = template.params.get("sources")
    if isinstance(sources, (list, tuple)) and hit & set(sources):
        raise TrackError(f"--target: {sorted(hit & set(sources))[0]!r} is a source device of {template.name} "
                         f"(params.sources: {', '.join(sources)}); a target cannot be its own source")
    spec: dict[str, Any] = {
        "name": name, "version": 1, "title": f"{template.title} (target: {target})",
        "reference": template.reference,
        "description": (f"{template.name}'s protocol ({template.protocol}), parameters, networks and metrics with "
                        f"{what} as the target; made from {template.path} by `leaderboard track new`."),
        "data": data, "models": dict(template.models), "scenarios": scenarios}
    if template.min_networks:
        spec["min_networks"] = template.min_networks
    spec.update({"protocol": template.protocol, "params": dict(template.params), "metrics": list(template.metrics),
                 "primary": template.primary})
    if template.group_by:
        spec["group_by"] = list(template.group_by)
    if template.uses != "e2e":
        spec["uses"] = template.uses
    if template.target != "latency":
        spec["target"] = template.target
    return spec


def user_tracks() -> list[Track]:
    """The user tracks registered now (:func:`use_track_folders`), by name."""
    return [_USER[n] for n in sorted(_USER)]


__all__ = ["BLANKED", "TARGETS", "TRACKS", "with_target", "PACKAGED", "Track", "TrackData", "TrackError", "Unavailable", "Fold", "Split", "DATA_ROOTS",
           "ROOT_ENV", "TRACKS_ENV", "SPLITS_ENV", "USER_SPLITS", "RESERVED_NAMES", "data_roots", "load_tracks",
           "read_track", "parse_track", "derive_track", "inside_package", "track_folders", "user_splits", "use_track_folders", "user_tracks", "resolve",
           "compute_split", "read_split", "ensure_split", "open_dataset"]
