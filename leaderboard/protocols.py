"""Split protocols: how a track divides its networks into training and test sets.

A protocol registers in :data:`PROTOCOLS` with ``check(params)`` (raise ValueError naming the
parameter) and ``folds(params, data) -> list[Fold]``. Folds list network names; every protocol
is a pure function of its parameters and the data (numpy's PCG64 seeded with ``seed``; the
networks are taken in name order first), and :mod:`leaderboard.tracks` freezes its output
into a split file the first time, so later code changes cannot move a split silently.

- ``kfold``: k folds over the networks (USC study, Sec. 5: cross-validation over the real CNNs);
  one set of folds for every scenario.
- ``holdout``: one random test share (USC study, Sec. 5: 900 train / 100 test of 1,000 synthetic
  networks); with ``n_train`` only that many of the remaining networks train (few-shot), the
  test set being the same as without it.
- ``shift``: train on one part of the slice, test on another (USC study, Sec. 6: synthetic ->
  real-world networks).
- ``leave-one-out``: one fold per value of a models column (nn-Meter, Sec. 7.3: leave one model
  family out, train on the others).
- ``help-nb201``: HELP's NAS-Bench-201 protocol per device (HELP's loader): test = architectures
  with NAS-Bench-201 index in [900, 1900) without the 10% fastest and 10% slowest on that device
  (800 networks); training = ``n_train`` architectures drawn from indices [0, 900). With
  ``seeds: [s0, s1, ...]`` instead of ``seed``, one fold per seed (fold i draws with seed si)
  and every fold tests the same architectures: repeated draws, scored per seed by the evaluator.
- ``help-transfer``: help-nb201's folds plus the source devices' full data (HELP's setting).
- ``framework-transfer``: a holdout test share per target runtime's scenario, ``n_train``
  networks drawn per draw, plus the same network's latency on another runtime of the same device
  (the cross-framework track).
- ``device-transfer``: a holdout test share per target scenario, ``n_train`` networks drawn per
  draw, plus every other device's measurements (HELP's setting on a source of many devices).
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np
import pandas as pd

from foundation.registry import Registry

if TYPE_CHECKING:
    from .tracks import TrackData


class ProtocolError(ValueError):
    """The data does not fit the protocol (a wrong column, a badly named network)."""


class InsufficientData(ProtocolError):
    """The data has too few networks for the protocol (the track is reported unavailable)."""


@dataclass(frozen=True)
class Fold:
    """One train/test split: ``scenario_id`` is a scenario or ``"*"`` (every scenario of the
    track, each using the networks measured there); ``train``/``test`` are network names."""

    fold: int
    scenario_id: str
    train: tuple[str, ...]
    test: tuple[str, ...]


@dataclass(frozen=True)
class Protocol:
    name: str
    check: Callable[[Mapping[str, Any]], None]
    folds: Callable[[Mapping[str, Any], TrackData], list[Fold]]
    # whether, with these params, the folds partition the slice's networks (no draw from a larger
    # pool): a frozen track that does keeps the networks its split names (tracks.resolve)
    partitions: Callable[[Mapping[str, Any]], bool] = lambda params: False


PROTOCOLS: Registry[Protocol] = Registry("split protocol")


def _int(params: Mapping[str, Any], key: str, lo: int = 0, default: Any = ...) -> int:
    v = params.get(key, default)
    if v is ...:
        raise ValueError(f"{key}: missing")
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{key}: expected an int >= {lo}, got {v!r}")
    return v


def _fraction(params: Mapping[str, Any], key: str) -> float:
    v = params.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
        raise ValueError(f"{key}: expected a fraction in (0, 1), got {v!r}")
    return float(v)


def _only(params: Mapping[str, Any], *known: str) -> None:
    extra = sorted(set(params) - set(known))
    if extra:
        raise ValueError(f"{extra[0]}: unknown parameter (known: {', '.join(known)})")


def _permuted(names: list[str], seed: int) -> list[str]:
    names = sorted(names)
    return [names[i] for i in np.random.default_rng(seed).permutation(len(names))]


# ---------------------------------------------------------------- kfold
def _check_kfold(p: Mapping[str, Any]) -> None:
    _only(p, "k", "seed")
    _int(p, "k", 2)
    _int(p, "seed")


def _kfold(p: Mapping[str, Any], data: TrackData) -> list[Fold]:
    k = p["k"]
    names = _permuted(data.networks["name"].tolist(), p["seed"])
    if len(names) < k:
        raise InsufficientData(f"{data.track.name}: {len(names)} networks for {k} folds")
    out = []
    for i in range(k):
        test = sorted(names[i::k])
        train = sorted(set(names) - set(test))
        out.append(Fold(i, "*", tuple(train), tuple(test)))
    return out


PROTOCOLS.register("kfold")(Protocol("kfold", _check_kfold, _kfold, partitions=lambda params: True))


# ---------------------------------------------------------------- holdout / few-shot
def _check_holdout(p: Mapping[str, Any]) -> None:
    _only(p, "test_fraction", "seed", "n_train")
    _fraction(p, "test_fraction")
    _int(p, "seed")
    if "n_train" in p:
        _int(p, "n_train", 1)


def _holdout(p: Mapping[str, Any], data: TrackData) -> list[Fold]:
    names = _permuted(data.networks["name"].tolist(), p["seed"])
    n_test = int(round(p["test_fraction"] * len(names)))
    if n_test < 1 or n_test >= len(names):
        raise InsufficientData(f"{data.track.name}: {len(names)} networks are too few for a {p['test_fraction']:.0%} test share")
    test, rest = names[:n_test], names[n_test:]
    n_train = p.get("n_train", len(rest))
    if n_train > len(rest):
        raise InsufficientData(f"{data.track.name}: needs {n_train} training networks, the data leaves {len(rest)}")
    return [Fold(0, "*", tuple(sorted(rest[:n_train])), tuple(sorted(test)))]


PROTOCOLS.register("holdout")(Protocol("holdout", _check_holdout, _holdout, partitions=lambda params: "n_train" not in params))


# ---------------------------------------------------------------- shift
def _check_shift(p: Mapping[str, Any]) -> None:
    _only(p, "train", "test")
    for k in ("train", "test"):
        if not isinstance(p.get(k), Mapping) or not p[k]:
            raise ValueError(f"{k}: expected a mapping of models-table column filters")


def _select(df: pd.DataFrame, where: Mapping[str, Any]) -> pd.DataFrame:
    for col, val in where.items():
        if col not in df.columns:
            raise ProtocolError(f"shift filter: no column {col!r} among {', '.join(df.columns)}")
        df = df[df[col].isin(list(val) if isinstance(val, (list, tuple)) else [val])]
    return df


def _shift(p: Mapping[str, Any], data: TrackData) -> list[Fold]:
    nets = data.networks
    train = sorted(_select(nets, p["train"])["name"])
    test = sorted(set(_select(nets, p["test"])["name"]) - set(train))
    if not train or not test:
        raise InsufficientData(f"{data.track.name}: {len(train)} training and {len(test)} test networks in the data")
    return [Fold(0, "*", tuple(train), tuple(test))]


PROTOCOLS.register("shift")(Protocol("shift", _check_shift, _shift, partitions=lambda params: True))


# ---------------------------------------------------------------- leave one group out
def _check_loo(p: Mapping[str, Any]) -> None:
    _only(p, "column", "min_group", "groups")
    if not isinstance(p.get("column"), str):
        raise ValueError("column: expected the models-table column that names the groups (e.g. family)")
    _int(p, "min_group", 1, default=1)
    g = p.get("groups")
    if g is not None and (not isinstance(g, list) or not g or not all(isinstance(x, str) for x in g)):
        raise ValueError(f"groups: expected a list of the column's values to leave out in turn, got {g!r}")


def _loo(p: Mapping[str, Any], data: TrackData) -> list[Fold]:
    nets = data.networks
    col = p["column"]
    if col not in nets.columns:
        raise ProtocolError(f"{data.track.path}: params.column: {col!r} is not one of {', '.join(nets.columns)}")
    groups = nets.dropna(subset=[col]).groupby(col)["name"].apply(sorted)
    groups = groups[groups.map(len) >= p.get("min_group", 1)]
    if len(groups) < 2:
        raise InsufficientData(f"{data.track.name}: {len(groups)} {col} group(s) in the data; leave-one-out needs 2")
    if p.get("groups") is not None:  # only these are left out in turn; the other groups always train
        missing = [g for g in p["groups"] if g not in groups.index]
        if missing:
            raise InsufficientData(f"{data.track.name}: params.groups: {', '.join(missing)} not in the data's {col} groups")
        groups = groups[[g for g in groups.index if g in set(p["groups"])]]
    everyone = set(nets["name"])
    return [Fold(i, "*", tuple(sorted(everyone - set(g))), tuple(g)) for i, (_, g) in enumerate(groups.items())]


PROTOCOLS.register("leave-one-out")(Protocol("leave-one-out", _check_loo, _loo, partitions=lambda params: True))


# ---------------------------------------------------------------- HELP on NAS-Bench-201
_NB201_NAME = re.compile(r"nb201-(\d+)")


def _help_seeds(p: Mapping[str, Any]) -> list[int]:
    """The draws of a help-nb201 track: ``seeds`` (several, one fold each) or the one ``seed``."""
    return list(p["seeds"]) if "seeds" in p else [p["seed"]]


def _check_help(p: Mapping[str, Any]) -> None:
    _only(p, "n_train", "seed", "seeds", "pool", "test", "trim")
    _int(p, "n_train", 1)
    if ("seed" in p) == ("seeds" in p):
        raise ValueError("seed/seeds: give exactly one (an int seed, or a list of seeds for repeated draws)")
    if "seed" in p:
        _int(p, "seed")
    else:
        s = p["seeds"]
        if not (isinstance(s, (list, tuple)) and s and len(set(s)) == len(s)
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in s)):
            raise ValueError(f"seeds: expected a non-empty list of distinct ints >= 0, got {s!r}")
    for k in ("pool", "test"):
        v = p.get(k)
        if not (isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, int) for x in v) and v[0] < v[1]):
            raise ValueError(f"{k}: expected [first, end) NAS-Bench-201 indices, got {v!r}")
    t = p.get("trim")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < 0.5:
        raise ValueError(f"trim: expected the share cut at each end, in [0, 0.5), got {t!r}")
    if p["n_train"] > p["pool"][1] - p["pool"][0]:
        raise ValueError(f"n_train: {p['n_train']} is more than the pool {p['pool']} holds")


def _help(p: Mapping[str, Any], data: TrackData) -> list[Fold]:
    out = []
    for sid in data.scenario_ids:
        e = data.measured(sid)
        idx = e["name"].str.fullmatch(_NB201_NAME.pattern)
        if not idx.all():
            raise ProtocolError(f"{data.track.path}: network {e['name'][~idx].iloc[0]!r} is not named nb201-<index>")
        e = e.assign(index=e["name"].str.slice(6).astype(int))
        pool = e[(e["index"] >= p["pool"][0]) & (e["index"] < p["pool"][1])]
        test = e[(e["index"] >= p["test"][0]) & (e["index"] < p["test"][1])]
        if len(pool) < p["n_train"] or test.empty:
            raise InsufficientData(f"{data.track.name}: {sid}: {len(pool)} pool and {len(test)} test architectures measured")
        # HELP's remove_outlier: sort the test range by latency on this device, keep [10%, 90%).
        # A stable sort on (latency, index) fixes the order of ties (pixel2 has whole ms).
        test = test.sort_values(["latency_ms", "index"], kind="stable")
        n = len(test)
        test = test.iloc[int(n * p["trim"]): int(n * (1 - p["trim"]))]
        ordered = pool.sort_values("index")["name"].to_numpy()
        for fold, seed in enumerate(_help_seeds(p)):
            rng = np.random.default_rng([seed, zlib.crc32(sid.encode())])  # per device, whatever else is loaded
            pick = ordered[np.sort(rng.choice(len(pool), p["n_train"], replace=False))]
            out.append(Fold(fold, sid, tuple(pick), tuple(sorted(test["name"]))))
    return out


PROTOCOLS.register("help-nb201")(Protocol("help-nb201", _check_help, _help))



# ---------------------------------------------------------------- cross-device transfer (HELP's setting)
# ``help-transfer``: HELP's test set and few-shot draw on each target device (the help-nb201
# protocol, one fold per seed, every fold testing the same architectures), plus the *full* data of
# the ``sources`` devices. What a predictor may read is not a list of names but a view of the
# dataset (:func:`training_view`): the source devices' scenarios whole, the target scenario's
# training rows, nothing else measured (not the target's other architectures, not the other
# target devices). The view names its sources in ``dataset.transfer_sources`` so a predictor
# knows it may learn from them; on every other track that attribute is absent.

def _check_transfer(p: Mapping[str, Any]) -> None:
    _only(p, "n_train", "seeds", "pool", "test", "trim", "sources")
    s = p.get("seeds")
    if not (isinstance(s, (list, tuple)) and s and len(set(s)) == len(s)
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in s)):
        raise ValueError(f"seeds: expected a non-empty list of distinct ints >= 0, got {s!r}")
    src = p.get("sources")
    if not (isinstance(src, (list, tuple)) and src and all(isinstance(x, str) and x for x in src)):
        raise ValueError(f"sources: expected a non-empty list of device names, got {src!r}")
    base = {k: v for k, v in p.items() if k not in ("seeds", "sources")}
    _check_help({**base, "seed": s[0]})


def _transfer(p: Mapping[str, Any], data: TrackData) -> list[Fold]:
    targets = set(data.dataset.scenarios.set_index("scenario_id").loc[data.scenario_ids, "device"])
    overlap = sorted(targets & set(p["sources"]))
    if overlap:
        raise ProtocolError(f"{data.track.path}: params.sources: {overlap[0]!r} is also a target device of the track")
    base = {k: v for k, v in p.items() if k not in ("seeds", "sources")}
    out = []
    for fold, seed in enumerate(p["seeds"]):  # one draw per seed; the test set is the same in each
        out += [Fold(fold, f.scenario_id, f.train, f.test) for f in _help({**base, "seed": seed}, data)]
    return sorted(out, key=lambda f: (f.scenario_id, f.fold))


def source_scenarios(dataset: Any, devices: Any) -> list[str]:
    """The scenario ids of the source devices in ``dataset`` (ProtocolError if one has none)."""
    sc = dataset.scenarios
    out = []
    for d in devices:
        hit = sorted(sc.loc[sc["device"] == d, "scenario_id"])
        if not hit:
            raise ProtocolError(f"sources: device {d!r} has no scenario in the data (devices: "
                                f"{', '.join(sorted(set(sc['device'].dropna())))})")
        out += hit
    return out


def _transfer_view(p: Mapping[str, Any], dataset: Any, scenario_id: str, train_ids: Any) -> Any:
    """The data a predictor of a help-transfer track sees for one target scenario and fold."""
    sources = source_scenarios(dataset, p["sources"])
    if scenario_id in sources:
        raise ProtocolError(f"sources: {scenario_id} is the target itself")
    return _sources_view(dataset, sources, scenario_id, train_ids)


def _sources_view(dataset: Any, sources: list[str], scenario_id: str, train_ids: Any) -> Any:
    """``dataset`` with the ``sources`` scenarios whole and the target's ``train_ids`` only, the
    sources named in ``transfer_sources``. Whole means every network a predictor can read: a
    public source's networks without IR (AI Hub's detectors, LLMs) are left out."""
    from pipelines.dataset.load import Dataset

    keep, train = set(sources), set(train_ids)
    t = dataset.tables()
    e = t["e2e"]
    t["e2e"] = e[(e["scenario_id"].isin(keep) & e["model_id"].isin(dataset.buildable()))
                 | ((e["scenario_id"] == scenario_id) & e["model_id"].isin(train))].reset_index(drop=True)
    for name in ("ops", "kernels"):  # op/kernel times only where the e2e row is visible
        df = t[name]
        hidden = ~(df["scenario_id"].isin(keep) | ((df["scenario_id"] == scenario_id) & df["model_id"].isin(train)))
        if hidden.any():
            df = df.copy()
            df.loc[hidden, "latency_ms"] = np.nan
            t[name] = df
    view = Dataset(t, path=dataset.path, check=False)
    view._graphs = dataset._graphs  # share the IR cache
    view.transfer_sources = tuple(sources)
    return view


PROTOCOLS.register("help-transfer")(Protocol("help-transfer", _check_transfer, _transfer))


# ---------------------------------------------------------------- cross-framework transfer
# ``framework-transfer`` (issue 53): predict a network's latency on one runtime from its latency
# on another (``source_framework``, e.g. LiteRT) on the same device, cores, threads, precision and
# batch (the target's *counterpart*), plus ``n_train`` networks measured on the target runtime.
# The test set is a holdout share (``test_fraction``, ``seed``: with the host-random parameters,
# host-random's test networks) of the networks both scenarios measured; each of ``draws`` picks
# the training networks from the rest (one fold per draw, the same test set). The view is
# help-transfer's: the counterpart whole (the test networks' source latencies are the input the
# track is about), the target's draw only.
COUNTERPART = ("device", "accelerator", "cores", "threads", "precision", "batch")


def _text(df: pd.DataFrame) -> pd.DataFrame:
    """The columns as text, a missing value as the empty string (missing values compare equal)."""
    return df.astype(object).where(df.notna(), "").astype(str)


def counterpart(dataset: Any, scenario_id: str, framework: str) -> str:
    """The scenario of ``framework`` that equals ``scenario_id`` in every :data:`COUNTERPART`
    column (ProtocolError if there is none, or several)."""
    sc = dataset.scenarios.set_index("scenario_id")
    if scenario_id not in sc.index:
        raise ProtocolError(f"{scenario_id}: no such scenario in the data")
    keys = _text(sc[list(COUNTERPART)])  # a column the source leaves blank (cores) matches blank
    hit = sc[(sc["framework"] == framework) & (keys == keys.loc[scenario_id]).all(axis=1)].index
    if len(hit) != 1:
        raise ProtocolError(f"source_framework: {scenario_id} has {len(hit)} {framework} counterpart(s) "
                            f"(same {', '.join(COUNTERPART)}); expected one")
    if hit[0] == scenario_id:
        raise ProtocolError(f"source_framework: {scenario_id} is itself a {framework} scenario")
    return str(hit[0])


def _check_draws(p: Mapping[str, Any]) -> None:
    """``test_fraction``, ``seed``, ``n_train`` and ``draws`` of a holdout with drawn training networks."""
    _fraction(p, "test_fraction")
    _int(p, "seed")
    _int(p, "n_train", 1)
    d = p.get("draws")
    if not (isinstance(d, (list, tuple)) and d and len(set(d)) == len(d)
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in d)):
        raise ValueError(f"draws: expected a non-empty list of distinct ints >= 0, got {d!r}")


def _check_framework_transfer(p: Mapping[str, Any]) -> None:
    _only(p, "test_fraction", "seed", "n_train", "draws", "source_framework")
    _check_draws(p)
    if not isinstance(p.get("source_framework"), str) or not p["source_framework"]:
        raise ValueError(f"source_framework: expected a framework name, got {p.get('source_framework')!r}")


def _framework_transfer(p: Mapping[str, Any], data: TrackData) -> list[Fold]:
    out = []
    for sid in data.scenario_ids:
        src = counterpart(data.dataset, sid, p["source_framework"])
        both = set(data.measured(sid)["name"])
        e = data.dataset.e2e_for(src)
        both &= set(data.names(e["model_id"]))
        out += _holdout_draws(p, data, sid, both, f"measured there and on {src}")
    return out


def _holdout_draws(p: Mapping[str, Any], data: TrackData, sid: str, measured: set[str], where: str) -> list[Fold]:
    """One fold per draw of a target scenario: the ``test_fraction`` share of the ``measured``
    networks (permuted with ``seed``) tests, ``n_train`` of the rest drawn per draw train."""
    names = [n for n in _permuted(data.networks["name"].tolist(), p["seed"]) if n in measured]
    n_test = int(round(p["test_fraction"] * len(names)))
    if n_test < 1 or len(names) - n_test < p["n_train"]:
        raise InsufficientData(f"{data.track.name}: {sid}: {len(names)} networks {where}; a {p['test_fraction']:.0%} "
                               f"test share and {p['n_train']} training networks need more")
    test, pool = tuple(sorted(names[:n_test])), sorted(names[n_test:])
    out = []
    for fold, draw in enumerate(p["draws"]):
        rng = np.random.default_rng([draw, zlib.crc32(sid.encode())])
        pick = [pool[i] for i in np.sort(rng.choice(len(pool), p["n_train"], replace=False))]
        out.append(Fold(fold, sid, tuple(pick), test))
    return out


def _framework_view(p: Mapping[str, Any], dataset: Any, scenario_id: str, train_ids: Any) -> Any:
    """The data a predictor of a framework-transfer track sees for one target scenario and fold."""
    return _sources_view(dataset, [counterpart(dataset, scenario_id, p["source_framework"])], scenario_id, train_ids)


PROTOCOLS.register("framework-transfer")(Protocol("framework-transfer", _check_framework_transfer, _framework_transfer))

# ---------------------------------------------------------------- a new device from few measurements
# ``device-transfer`` (issue 57): HELP's setting on a public source of many devices. Each target
# scenario (one device x runtime x precision x compute unit) keeps a holdout share of the networks
# measured there as its test set (``test_fraction``, ``seed``); each of ``draws`` picks ``n_train``
# of the rest (one fold per draw, the same test set). The view is help-transfer's with every
# scenario of every *other* device of the same public source as a source, whole (the test
# networks' latencies there included: another device's measurements are what the setting gives),
# and the target's draw only.

def _check_device_transfer(p: Mapping[str, Any]) -> None:
    _only(p, "test_fraction", "seed", "n_train", "draws")
    _check_draws(p)


def _device_transfer(p: Mapping[str, Any], data: TrackData) -> list[Fold]:
    out = []
    for sid in data.scenario_ids:
        out += _holdout_draws(p, data, sid, set(data.measured(sid)["name"]),
                              "measured there (min_networks in the track file keeps such scenarios out)")
    return out


def other_devices(dataset: Any, scenario_id: str, at_least: int = 1) -> list[str]:
    """Every scenario of ``scenario_id``'s public source (its ``dataset`` column) on another
    device that measured at least ``at_least`` networks a predictor can read, sorted."""
    sc = dataset.scenarios.set_index("scenario_id")
    if scenario_id not in sc.index:
        raise ProtocolError(f"{scenario_id}: no such scenario in the data")
    me = sc.loc[scenario_id, ["device", "dataset"]].astype(str)
    hit = (sc["device"].astype(str) != me["device"]) & (sc["dataset"].astype(str) == me["dataset"])
    e = dataset.e2e
    count = e[e["model_id"].isin(dataset.buildable())].groupby("scenario_id")["model_id"].nunique()
    return sorted(str(s) for s in sc.index[hit] if count.get(s, 0) >= at_least)


def _device_view(p: Mapping[str, Any], dataset: Any, scenario_id: str, train_ids: Any) -> Any:
    """The data a predictor of a device-transfer track sees for one target scenario and fold: the
    other devices' scenarios that measured at least as many readable networks as the target's draw
    (a thinner one tells a predictor less than the draw itself)."""
    return _sources_view(dataset, other_devices(dataset, scenario_id, p["n_train"]), scenario_id, train_ids)


PROTOCOLS.register("device-transfer")(Protocol("device-transfer", _check_device_transfer, _device_transfer))

# protocol -> view(params, dataset, scenario_id, train_ids): what a predictor of the track may read,
# built from the whole dataset (it replaces the run's mask: the sources keep the test networks'
# rows, as HELP's source devices are known on the whole space; the target keeps the draw only)
VIEWS: dict[str, Callable[..., Any]] = {"help-transfer": _transfer_view, "framework-transfer": _framework_view,
                                        "device-transfer": _device_view}


def training_view(track: Any, dataset: Any, scenario_id: str, train_ids: Any) -> Any:
    """What the track's protocol lets a predictor read of ``dataset`` for one target scenario and
    fold, or None where the protocol has no view of its own (the run's mask applies)."""
    view = VIEWS.get(track.protocol)
    return None if view is None else view(track.params, dataset, scenario_id, train_ids)

__all__ = ["PROTOCOLS", "Protocol", "Fold", "ProtocolError", "InsufficientData", "VIEWS", "source_scenarios",
           "counterpart", "training_view"]
