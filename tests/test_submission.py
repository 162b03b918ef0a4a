"""Submissions are data: the validator's errors, and a real submission scored end to end
(a predictor trained on a track, written as files, validated, evaluated, via the CLI)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from leaderboard.cli import main
from support.fixtures import register_test_predictors
from leaderboard.run import train_entry
from leaderboard.submission import SubmissionError, validate

TRACK = "usc-gpu-oplevel"


@pytest.fixture(scope="session")
def entry(public, tmp_path_factory):
    register_test_predictors()
    return train_entry("test-reported-flops", {}, [TRACK], public, tmp_path_factory.mktemp("entries"))


META = {"method": "mine", "authors": ["A. Person"], "code": "https://example.org/code",
        "training_data": "track training split only", "seeds": [0, 1]}


def _write(tmp_path, df, meta=META, suffix=".csv"):
    p, m = tmp_path / f"pred{suffix}", tmp_path / "meta.yaml"
    df.to_parquet(p, index=False) if suffix == ".parquet" else df.to_csv(p, index=False)
    m.write_text(yaml.safe_dump(meta))
    return p, m


def _problems(p, m, public):
    with pytest.raises(SubmissionError) as e:
        validate(p, m, public)
    return e.value.problems


def test_a_good_submission_validates_and_scores(entry, public, tmp_path, capsys):
    df = pd.read_parquet(entry / "predictions.parquet")
    assert set(df["track"]) == {TRACK} and len(df) > 150
    p, m = _write(tmp_path, df, suffix=".parquet")
    checked = validate(p, m, public)
    assert len(checked.tracks[TRACK]) == len(df)
    assert main(["--public", public["public"], "--host", public["host"], "validate", str(p), str(m)]) == 0
    assert f"{TRACK}: {len(df)} predictions" in capsys.readouterr().out
    assert main(["--public", public["public"], "--host", public["host"], "evaluate", str(p), str(m)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert 0.8 < res[TRACK]["aggregate"]["spearman"] <= 1.0 and res[TRACK]["aggregate"]["mape"] > 0


def test_every_fault_is_reported(entry, public, tmp_path):
    df = pd.read_parquet(entry / "predictions.parquet")
    sid = df["scenario_id"].iloc[0]
    bad = df.copy()
    bad.loc[0, "predicted_ms"] = float("nan")
    bad.loc[1, "predicted_ms"] = 0.0
    bad.loc[2, "predicted_ms"] = -3.0
    bad.loc[3, "predicted_ms"] = float("inf")
    bad = pd.concat([bad, bad.iloc[[10]]], ignore_index=True)  # a duplicate
    probs = _problems(*_write(tmp_path, bad), public)
    text = "\n".join(probs)
    for what in ("NaN (missing), first at line 2", "zero, first at line 3", "negative, first at line 4",
                 "infinite, first at line 5", "1 duplicate (track, scenario_id, model_id) row(s)"):
        assert what in text, text
    missing = df.iloc[5:]
    probs = _problems(*_write(tmp_path, missing), public)
    assert any(f"{sid}: 5 test network(s) not predicted" in p for p in probs), probs
    extra = pd.concat([df, pd.DataFrame({"track": [TRACK, "no-such-track", TRACK], "scenario_id": [sid, sid, "usc-mars-gpu"],
                                         "model_id": ["pytorch:not-a-model", "x", "y"], "predicted_ms": [1.0, 1.0, 1.0]})])
    text = "\n".join(_problems(*_write(tmp_path, extra), public))
    assert "unknown track 'no-such-track'" in text
    assert "unknown scenario(s) usc-mars-gpu" in text
    assert "1 prediction(s) for networks not in the test split: pytorch:not-a-model" in text


def test_predictions_for_training_networks_are_refused(public, tmp_path):
    from leaderboard.tracks import TRACKS, read_split, resolve

    track = TRACKS.get("help-nb201-n100")  # one draw (n10 repeats its draws: tests/test_seeds.py)
    data = resolve(track, public)
    sid = data.scenario_ids[0]
    (fold,) = read_split(track).for_scenario(sid)
    ids = data.ids(fold.test) + data.ids(fold.train[:1])  # every test network, plus one it trained on
    df = pd.DataFrame({"track": track.name, "scenario_id": sid, "model_id": ids, "predicted_ms": 1.0})
    text = "\n".join(_problems(*_write(tmp_path, df), public))
    assert f"{sid}: 1 prediction(s) for training networks: {data.ids(fold.train[:1])[0]}" in text
    assert f"{data.scenario_ids[1]}: 800 test network(s) not predicted" in text


def test_metadata_faults(entry, public, tmp_path):
    df = pd.read_parquet(entry / "predictions.parquet")
    meta = dict(META)
    del meta["seeds"]
    meta["code"] = "ftp://x"
    meta["exec"] = "rm -rf /"
    text = "\n".join(_problems(*_write(tmp_path, df, meta=meta), public))
    assert "seeds: missing" in text and "code: expected a link" in text and "exec: unknown key" in text


def test_file_level_faults(public, tmp_path):
    p = tmp_path / "pred.txt"
    p.write_text("x")
    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump(META))
    assert "unsupported predictions format .txt" in _problems(p, m, public)[0]
    p = tmp_path / "pred.csv"
    p.write_text("track,scenario,model_id,predicted_ms,extra\n")
    text = "\n".join(_problems(p, m, public))
    assert "missing column(s) scenario_id" in text and "unexpected column(s) scenario, extra" in text
    m.write_text("!!python/object/apply:os.system ['echo hi']")
    assert any("unreadable" in x for x in _problems(p, m, public))  # safe_load: tags never execute


def test_csv_shape_is_bounded_before_parsing(public, tmp_path):
    """Columns, line length, cell length and fields per row of a CSV file are checked in one
    streaming pass before pandas parses it (foundation/limits.py SUBMISSION); each refusal is one
    line naming the file, the line and the bound."""
    from leaderboard.submission import LIMITS

    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump(META))
    p = tmp_path / "pred.csv"
    head = "track,scenario_id,model_id,predicted_ms\n"
    good = f"{TRACK},s,m,1.0\n"
    cases = {
        "x" * 5000 + "\n": f"line 3: more than {LIMITS['line_chars']} characters (at most {LIMITS['line_chars']}: line_chars",
        "y" * 10_000: f"line 3: more than {LIMITS['line_chars']} characters",  # no line break at all
        f"{TRACK},s,{'m' * 300},1.0\n": f"line 3: a cell of 300 characters (at most {LIMITS['cell_chars']}: cell_chars",
        f'{TRACK},s,"{"m" * 80 + chr(10)}' + ("m" * 80 + "\n") * 5 + '",1.0\n': "line 3: a cell of 486 characters",
        f'{TRACK},s,"' + ("m" * 100 + "\n") * 2000 + '",1.0\n': f"line 3: a cell of more than {LIMITS['cell_chars']} characters",
        f"{TRACK},s,m,1.0,extra\n": "line 3: 5 fields, the header has 4",
    }
    for body, want in cases.items():
        p.write_text(head + good + body)
        (problem,) = _problems(p, m, public)
        assert problem.startswith(f"{p}: ") and want in problem and problem.endswith("not read"), (want, problem)
    p.write_text("track,scenario_id,model_id,model_id,predicted_ms\n" + good)
    assert _problems(p, m, public) == [f"{p}: line 1: duplicate column(s) 'model_id'; not read"]
    p.write_text("")
    assert "empty (expected a header line" in _problems(p, m, public)[0]
    p.write_text(head + good + "\n" + f"{TRACK},s\n")  # a blank line, a row short of fields: pandas reads them
    text = "\n".join(_problems(p, m, public))
    assert "not read" not in text and "model_id: 1 empty value(s)" in text, text


def test_parquet_shape_is_bounded_before_decoding(public, tmp_path):
    """Parquet: columns and unpacked size from the footer; then only the used columns, text kept
    dictionary-encoded until every cell's length is known (a small file of one long string
    repeated in every row never expands)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from leaderboard.submission import LIMITS

    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump(META))
    p = tmp_path / "pred.parquet"
    n = 100_000
    zeros = pa.array(np.zeros(n, dtype=np.int32))
    table = pa.table({"track": pa.DictionaryArray.from_arrays(zeros, [TRACK]), "scenario_id": pa.DictionaryArray.from_arrays(zeros, ["s"]),
                      "model_id": pa.DictionaryArray.from_arrays(zeros, ["m" * 100_000]), "predicted_ms": pa.array(np.ones(n))})
    pq.write_table(table, p, compression="zstd")
    assert p.stat().st_size < 1_000_000  # 10 GB of text when decoded
    (problem,) = _problems(p, m, public)
    assert problem == (f"{p}: row 0: model_id: a cell of 100000 characters (at most {LIMITS['cell_chars']}: "
                       "cell_chars in foundation/limits.py); not read")
    wide = {c: ["x"] for c in ("track", "scenario_id", "model_id")} | {"predicted_ms": [1.0]} | {f"c{i}": [0] for i in range(20)}
    pd.DataFrame(wide).to_parquet(p, index=False)
    (problem,) = _problems(p, m, public)
    assert f"{p}: 24 columns (at most {LIMITS['predictions_columns']}" in problem
    pd.DataFrame({"track": [TRACK], "scenario_id": ["s"], "model_id": [["a", "b"]], "predicted_ms": [1.0]}).to_parquet(p, index=False)
    assert "model_id: nested values" in _problems(p, m, public)[0]
