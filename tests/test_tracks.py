"""Tracks: the YAML registry, the split protocols, frozen split files (regenerated from the
public data they were made from, they must come out identical), tracks without data, and the
host tracks on the committed dataset release."""
from __future__ import annotations

import json

import pytest

from leaderboard.protocols import InsufficientData
from leaderboard.run import available
from leaderboard.tracks import (TRACKS, TrackError, Unavailable, compute_split, ensure_split, parse_track,
                                read_split, resolve)


def test_registry_has_the_tracks():
    names = set(TRACKS.names())
    assert {"usc-real-kfold", "usc-gpu-oplevel", "help-nb201-n10", "help-nb201-n100", "help-nb201-n900",
            "host-random", "host-shift-real", "host-shift-zoo", "host-fewshot-30", "host-fewshot-100",
            "host-fewshot-900", "host-per-scenario", "host-unseen-family"} <= names
    assert TRACKS.get("help-nb201-n10").primary == "spearman"


BASE = {"name": "t", "version": 1, "title": "x", "data": "public", "scenarios": {"dataset": "d"},
        "protocol": "kfold", "params": {"k": 5, "seed": 0}}


@pytest.mark.parametrize("change, message", [
    ({"protocol": "bogus"}, "t.yaml: protocol: unknown protocol 'bogus'"),
    ({"params": {"k": 1, "seed": 0}}, "t.yaml: params: k: expected an int >= 2"),
    ({"params": {"k": 5, "seed": 0, "x": 1}}, "t.yaml: params: x: unknown parameter"),
    ({"metrics": ["mape", "r2"]}, "t.yaml: metrics: unknown metric 'r2'"),
    ({"data": "cloud"}, "t.yaml: data: 'cloud' is not a data root"),
    ({"primary": "kendall", "metrics": ["mape"]}, "t.yaml: primary: 'kendall' is not one of"),
    ({"colour": "red"}, "t.yaml: colour: unknown key"),
    ({"version": 0}, "t.yaml: version: expected an int >= 1"),
    ({"uses": "kernel"}, "t.yaml: uses: expected one of e2e, ops, kernels, got 'kernel'"),
    ({"target": "energy"}, "t.yaml: target: expected one of latency, peak_memory, got 'energy'"),
    ({"protocol": "leave-one-out", "params": {"column": "family", "groups": "vit"}},
     "t.yaml: params: groups: expected a list of the column's values"),
])
def test_bad_track_files_name_file_and_key(change, message):
    with pytest.raises(TrackError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_track({**BASE, **change}, "t.yaml")


def test_host_tracks_without_data_are_skipped_with_a_reason(public):
    ok, skipped = available(TRACKS.names(), public, write_splits=False)
    assert {"usc-real-kfold", "usc-gpu-oplevel", "help-nb201-n10"} <= set(ok)
    assert skipped["host-random"].startswith("no host data:") and "no-host-data" in skipped["host-random"]


@pytest.mark.parametrize("name", ["help-nb201-n10", "help-nb201-n100", "help-nb201-n900", "usc-real-kfold",
                                  "usc-gpu-oplevel"])
def test_committed_split_is_what_the_protocol_gives(public, name):
    track = TRACKS.get(name)
    frozen = read_split(track)
    assert frozen is not None, f"{track.split_file} is not committed"
    data = resolve(track, public)
    again = compute_split(data)
    assert again.folds == frozen.folds


@pytest.mark.parametrize("name", ["host-random", "host-fewshot-30", "host-fewshot-100", "host-fewshot-900",
                                  "host-per-scenario", "host-shift-real", "host-shift-zoo", "host-unseen-family",
                                  "host-transformer-random", "host-shift-cnn-transformer",
                                  "host-shift-transformer-hybrid", "host-unseen-family-transformers"])
def test_committed_host_split_is_what_the_protocol_gives_on_the_release(name):
    """The host splits are frozen on the committed release (DATA_ROOTS["host"]); the protocol
    run again on it gives the same folds, so every machine scores the same test networks."""
    track = TRACKS.get(name)
    frozen = read_split(track)
    assert frozen is not None, f"{track.split_file} is not committed"
    again = compute_split(resolve(track))
    assert again.folds == frozen.folds


def test_help_split_follows_helps_protocol(public):
    data = resolve(TRACKS.get("help-nb201-n100"), public)
    split = read_split(data.track)
    for sid in data.scenario_ids:
        (fold,) = split.for_scenario(sid)
        test_idx = sorted(int(n[6:]) for n in fold.test)
        train_idx = [int(n[6:]) for n in fold.train]
        assert len(test_idx) == 800 and all(900 <= i < 1900 for i in test_idx)
        assert len(train_idx) == 100 and all(0 <= i < 900 for i in train_idx)
        lat = data.measured(sid).set_index("name")["latency_ms"]
        rng = lat[[f"nb201-{i:05d}" for i in range(900, 1900)]]
        kept = lat[list(fold.test)]
        # HELP's remove_outlier: nothing kept is faster than the cut 10% or slower than the cut 10%
        assert kept.min() >= rng.quantile(0.099) and kept.max() <= rng.quantile(0.901)
    # the few-shot tracks share the test set; N=10 draws from the same pool
    # (every one of its repeated draws, one fold per seed)
    small = read_split(TRACKS.get("help-nb201-n10"))
    assert {f.scenario_id for f in small.folds} == {f.scenario_id for f in split.folds}
    assert all(f.test == split.for_scenario(f.scenario_id)[0].test for f in small.folds)


def test_kfold_tests_every_network_once(public):
    split = read_split(TRACKS.get("usc-real-kfold"))
    tested = [n for f in split.folds for n in f.test]
    assert len(tested) == len(set(tested)) == 102
    for f in split.folds:
        assert not set(f.train) & set(f.test)


def _track(**kw):
    d = {"name": "tmp", "version": 1, "title": "tmp", "data": "public",
         "models": {"dataset": "usc-mobile-ml-benchmark"}, "scenarios": {"scenario_id": "usc-pixel4-tflite-cpu-1large-fp32"}}
    d.update(kw)
    return parse_track(d, "tmp.yaml")


def test_protocols_on_real_networks(public, tmp_path):
    loo = resolve(_track(protocol="leave-one-out", params={"column": "family", "min_group": 4}), public)
    split, new = ensure_split(loo, tmp_path)
    assert new and (tmp_path / "public" / "tmp.v1.json").is_file()
    fams = loo.networks.set_index("name")["family"]
    for f in split.folds:
        assert len({fams[n] for n in f.test}) == 1 and fams[f.test[0]] not in {fams[n] for n in f.train}
    # groups: only those are left out in turn; the other families train in every fold
    some = resolve(_track(protocol="leave-one-out", params={"column": "family", "groups": ["resnet", "regnetx"]}), public)
    folds = compute_split(some).folds
    assert [{fams[n] for n in f.test} for f in folds] == [{"regnetx"}, {"resnet"}]
    assert all("mobilenet" in {fams[n] for n in f.train} for f in folds)
    with pytest.raises(InsufficientData, match="params.groups: nosuch not in the data's family groups"):
        compute_split(resolve(_track(protocol="leave-one-out", params={"column": "family", "groups": ["nosuch"]}), public))
    few = resolve(_track(protocol="holdout", params={"test_fraction": 0.2, "seed": 3, "n_train": 30}), public)
    full = resolve(_track(protocol="holdout", params={"test_fraction": 0.2, "seed": 3}), public)
    (a,), (b,) = compute_split(few).folds, compute_split(full).folds
    assert a.test == b.test and len(a.train) == 30 and set(a.train) < set(b.train)
    with pytest.raises(InsufficientData, match="needs 900 training networks"):
        compute_split(resolve(_track(protocol="holdout", params={"test_fraction": 0.1, "seed": 0, "n_train": 900}), public))
    shift = resolve(_track(protocol="shift", params={"train": {"family": ["resnet", "vgg"]}, "test": {"family": "mobilenet"}}), public)
    (s,) = compute_split(shift).folds
    assert all(fams[n] == "mobilenet" for n in s.test) and {fams[n] for n in s.train} <= {"resnet", "vgg"}
    assert "resnet" in {fams[n] for n in s.train}


def test_a_changed_track_needs_a_new_version(public, tmp_path):
    data = resolve(_track(protocol="kfold", params={"k": 5, "seed": 0}), public)
    ensure_split(data, tmp_path)
    changed = _track(protocol="kfold", params={"k": 5, "seed": 1})
    with pytest.raises(TrackError, match="bump the track's version"):
        read_split(changed, tmp_path)
    path = tmp_path / "public" / "tmp.v1.json"
    doc = json.loads(path.read_text())
    doc["folds"][0]["test"] = ["not-a-network"]
    doc["folds"] = doc["folds"][:1]
    doc["folds"][0]["train"] = []
    path.write_text(json.dumps(doc))
    with pytest.raises(TrackError, match="none of its networks is in the data"):
        ensure_split(data, tmp_path)


def test_host_tracks_read_the_committed_release(monkeypatch, tmp_path):
    """The host data root is the committed release (the same on every machine), from any working
    directory; --host / LATBENCH_HOST_DATA / host= still point the host tracks at other data."""
    from leaderboard.cli import _roots, build_parser
    from leaderboard.tracks import DATA_ROOTS, data_roots

    monkeypatch.delenv("LATBENCH_HOST_DATA", raising=False)
    monkeypatch.delenv("LATBENCH_PUBLIC_DATA", raising=False)
    assert DATA_ROOTS["host"] == "datasets/host-v1"
    assert data_roots() == DATA_ROOTS == _roots(build_parser().parse_args(["tracks"]))
    assert _roots(build_parser().parse_args(["--host", "data/dataset", "tracks"]))["host"] == "data/dataset"
    monkeypatch.setenv("LATBENCH_HOST_DATA", "mine")
    assert data_roots()["host"] == "mine" and data_roots(host="given")["host"] == "given"
    monkeypatch.delenv("LATBENCH_HOST_DATA")

    monkeypatch.chdir(tmp_path)  # a committed folder resolves from outside the checkout too
    data = resolve(TRACKS.get("host-random"), data_roots())
    assert not isinstance(data, Unavailable), data.reason
    assert "host-tflite-cpu-1large-fp32" in data.scenario_ids
    (fold,) = compute_split(data).folds
    assert len(fold.train) >= 900 and len(fold.test) >= 100 and not set(fold.train) & set(fold.test)
    real = resolve(TRACKS.get("host-shift-real"), data_roots())
    (shift,) = compute_split(real).folds
    src = real.networks.set_index("name")["source"]
    assert len(shift.test) >= 100 and {src[n] for n in shift.test} == {"pytorch"}
    assert len(shift.train) >= 1000 and {src[n] for n in shift.train} == {"synthetic"}
    # without the override's folder the host tracks wait for data, saying where they looked
    missing = resolve(TRACKS.get("host-random"), data_roots(host=str(tmp_path / "none")))
    assert isinstance(missing, Unavailable) and str(tmp_path / "none") in missing.reason


def test_a_peak_memory_track_scores_the_upper_end_of_the_range(public):
    """target: peak_memory puts each row's peak_memory_max_mb in latency_ms (what every predictor
    learns and the evaluator scores) and leaves out rows without it; the spec hash says so."""
    from leaderboard.tracks import with_target
    from pipelines.dataset.load import Dataset, load_dataset

    ds = load_dataset(public["public"])
    e = ds.e2e.head(3).copy()
    e["peak_memory_max_mb"] = [12.0, None, 40.0]
    mem = with_target(Dataset({**ds.tables(), "e2e": e}, check=False), "peak_memory")
    assert mem.e2e["latency_ms"].tolist() == [12.0, 40.0] and with_target(ds, "latency") is ds
    lat, memt = _track(protocol="kfold", params={"k": 5, "seed": 0}), _track(protocol="kfold", params={"k": 5, "seed": 0},
                                                                             target="peak_memory")
    assert lat.spec_hash() != memt.spec_hash() and memt.target == "peak_memory"
    out = resolve(memt, public)  # the USC study states no memory: nothing to score
    assert isinstance(out, Unavailable) and "no measurements" in out.reason
