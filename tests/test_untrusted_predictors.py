"""Tampered saved predictors (issue 15, defect 6): every fault is one PersistError line naming
the file, never an abort inside LightGBM, a traversal that never ends, NaN weights or a raw
TypeError/KeyError."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from leaderboard.baselines import Networks, load_predictor, make_predictor, save_predictor
from leaderboard.baselines.persist import PersistError
from pipelines.dataset.load import load_dataset

GPU = "usc-pixel4-tflite-gpu-fp16"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def saved(public, tmp_path_factory):
    """Fitted and saved: a LightGBM op-wise predictor, an array forest, a linear cost model."""
    ds = load_dataset(public["public"])
    gpu = Networks.of_scenario(ds, GPU)[:12]  # op times: the op-wise models fit on them
    # the public subset's USC models carry no IR costs (each would be rebuilt from pytorchcv, ~1 s):
    # the network-level baseline fits on NAS-Bench-201 networks, whose graphs build in milliseconds
    help_sid = next(s for s in ds.scenarios["scenario_id"] if s.startswith("help-"))
    nb201 = Networks.of_scenario(ds, help_sid)[:20]
    base = tmp_path_factory.mktemp("saved")
    out = {}
    for name, params, X in (("usc_gbdt", {"n_estimators": 5}, gpu), ("usc_rf", {"n_estimators": 3}, gpu),
                            ("flops", {}, nb201)):
        p = make_predictor(name, **params).fit(X, X.y())
        out[name] = (save_predictor(p, base / name), X, p.predict(X))
    return out


def copy(saved, name, tmp_path) -> Path:
    return Path(shutil.copytree(saved[name][0], tmp_path / name))


def meta_of(folder: Path) -> dict:
    return json.loads((folder / "predictor.json").read_text())


def refused(folder: Path, match: str) -> str:
    with pytest.raises(PersistError, match=match) as exc:
        load_predictor(folder)
    msg = str(exc.value)
    assert "\n" not in msg and str(folder) in msg, msg
    return msg


def test_round_trip_still_predicts_the_same(saved):
    for name, (folder, X, pred) in saved.items():
        np.testing.assert_array_equal(load_predictor(folder).predict(X), pred, err_msg=name)


LOADER = """
import sys
from leaderboard.baselines import load_predictor
from leaderboard.baselines.persist import PersistError
try:
    load_predictor(sys.argv[1])
except PersistError as e:
    print(e, file=sys.stderr)
    sys.exit(2)
"""


def test_lightgbm_split_feature_out_of_range_is_refused_not_aborted(saved, tmp_path):
    folder = copy(saved, "usc_gbdt", tmp_path)
    txt = next(f for f in folder.iterdir() if f.name.endswith(".lightgbm.txt"))
    text = txt.read_text()
    assert "split_feature=" in text
    txt.write_text(re.sub(r"split_feature=(\d+)", "split_feature=9999", text, count=1))
    # in a child process: before the fix LightGBM aborted the whole interpreter
    proc = subprocess.run([sys.executable, "-c", LOADER, str(folder)], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-500:])
    assert "split_feature 9999 outside" in proc.stderr and txt.name in proc.stderr
    assert proc.stderr.strip().count("\n") == 0


@pytest.mark.parametrize("edit,match", [
    (lambda t: re.sub(r"left_child=(-?\d+)", "left_child=0", t, count=1), "left_child 0 must be a later node"),
    (lambda t: re.sub(r"num_leaves=\d+", "num_leaves=9", t, count=1), r"leaf_value: expected 9 finite numbers"),
    (lambda t: re.sub(r"threshold=(\S+)", "threshold=nan", t, count=1), "threshold: expected"),
    (lambda t: re.sub(r"decision_type=(\d+)", "decision_type=1", t, count=1), "only numerical splits"),
    (lambda t: t.replace("end of trees", "end of nothing"), "not a LightGBM model text"),
    (lambda t: re.sub(r"max_feature_idx=\d+", "max_feature_idx=-1", t), "max_feature_idx -1 out of range"),
])
def test_other_lightgbm_tampering(saved, tmp_path, edit, match):
    folder = copy(saved, "usc_gbdt", tmp_path)
    txt = next(f for f in folder.iterdir() if f.name.endswith(".lightgbm.txt"))
    txt.write_text(edit(txt.read_text()))
    refused(folder, match)


def _forest(meta: dict) -> dict:
    return next(m for m in meta["state"]["models"].values() if m["kind"] == "forest" and len(m["left"]) > 1)


def test_a_forest_node_pointing_to_itself_is_refused(saved, tmp_path):
    folder = copy(saved, "usc_rf", tmp_path)
    meta = meta_of(folder)
    f = _forest(meta)
    i = next(k for k, v in enumerate(f["left"]) if v != -1)
    f["left"][i] = i  # before the fix: predict looped forever
    (folder / "predictor.json").write_text(json.dumps(meta))
    refused(folder, rf"state\.models\..*: node {i}: children {i}, .* must come after it")


@pytest.mark.parametrize("edit,match", [
    (lambda f: f.update(left=f["left"][:-1]), r"right: \d+ values, expected"),
    (lambda f: f["left"].__setitem__(0, len(f["left"]) + 5), "must come after it, within"),
    (lambda f: f["feature"].__setitem__(0, -4), "feature: values below 0"),
    (lambda f: f["value"].__setitem__(0, "x"), "value: expected a 1-D list of numbers"),
    (lambda f: f.update(roots=[]), "roots: no trees"),
])
def test_other_forest_tampering(saved, tmp_path, edit, match):
    folder = copy(saved, "usc_rf", tmp_path)
    meta = meta_of(folder)
    edit(_forest(meta))
    (folder / "predictor.json").write_text(json.dumps(meta))
    refused(folder, match)


@pytest.mark.parametrize("text_edit,match", [
    (lambda t: re.sub(r'"coef": \[\s*[-0-9.e]+', '"coef": [NaN', t, count=1), "NaN is not a JSON number"),
    (lambda t: t.replace('"intercept": ', '"intercept": "1" , "x": ', 1), "state.intercept: expected a finite number"),
])
def test_nan_and_wrong_type_coefficients_are_refused(saved, tmp_path, text_edit, match):
    folder = copy(saved, "flops", tmp_path)
    text = (folder / "predictor.json").read_text()
    edited = text_edit(text)
    assert edited != text
    (folder / "predictor.json").write_text(edited)
    refused(folder, match)


@pytest.mark.parametrize("edit,match", [
    (lambda m: m.pop("state"), "state: missing or not an object"),
    (lambda m: m["state"].pop("coef"), "state.coef: missing"),
    (lambda m: m["state"].update(coef={"a": 1}), "state.coef: expected a 1-D list"),
    (lambda m: m["state"].update(coef=[1.0, 2.0, 3.0]), r"state.coef: 3 values, expected 1"),
    (lambda m: m.update(params={"no_such_param": 1}), "params: unknown parameter"),
    (lambda m: m.update(params=[1]), "params: expected an object"),
    (lambda m: m.update(libraries="lightgbm"), "libraries: expected a list"),
    (lambda m: m.update(predictor=["flops"]), "unknown predictor"),
])
def test_malformed_predictor_json_is_one_line(saved, tmp_path, edit, match):
    folder = copy(saved, "flops", tmp_path)
    meta = meta_of(folder)
    edit(meta)
    (folder / "predictor.json").write_text(json.dumps(meta))
    refused(folder, match)


def test_what_the_file_names_reaches_the_message_escaped(saved, tmp_path):
    """A key of the saved state holding a line separator, an escape sequence or a bidi control
    is named in the one-line refusal with those characters escaped."""
    folder = copy(saved, "usc_gbdt", tmp_path)
    meta = meta_of(folder)
    meta["state"]["models"]["a\u2028b\x1b[2J\u202e"] = {"kind": "lightgbm"}
    (folder / "predictor.json").write_text(json.dumps(meta))
    msg = refused(folder, "state.models")
    assert "\u2028" not in msg and "\x1b" not in msg and "\u202e" not in msg, repr(msg)
    assert len(msg.splitlines()) == 1


def test_predictor_json_not_an_object_or_hostile(saved, tmp_path):
    folder = copy(saved, "flops", tmp_path)
    (folder / "predictor.json").write_text("[1, 2]")
    refused(folder, "expected a JSON object, got list")
    (folder / "predictor.json").write_text('{"format": ' + "[" * 100_000)
    refused(folder, "nested deeper than")


def test_side_file_names_cannot_leave_the_folder(saved, tmp_path):
    folder = copy(saved, "usc_gbdt", tmp_path)
    meta = meta_of(folder)
    m = next(v for v in meta["state"]["models"].values() if v["kind"] == "lightgbm")
    m["model_file"] = "../../etc/passwd"
    (folder / "predictor.json").write_text(json.dumps(meta))
    refused(folder, "bad side file name")


# additive_mlp's weights are numpy arrays (member<i>.npz): a committed shelf entry, tampered
SHELF_ENTRY = ROOT / "shelf" / "data" / "usc-pixel4-tflite-cpu-1large-fp32"


def _object_array(w):
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    return buf.getvalue()


@pytest.mark.parametrize("edit, match", [
    (lambda w: {**w, "mlp.2.bias": np.full_like(w["mlp.2.bias"], np.nan)}, r"mlp\.2\.bias: NaN or infinite values"),
    (lambda w: {**w, "mlp.0.weight": w["mlp.0.weight"][:, :-1]}, "does not fit the saved network"),
    (lambda w: {k: v for k, v in w.items() if k != "overhead"}, "does not fit the saved network"),
    (lambda w: {**w, "overhead": np.array(3)}, "overhead: expected floats, got int64"),
    (lambda w: _object_array(w), r"unreadable arrays \(ValueError: Object arrays cannot be loaded"),
    (lambda w: b"not a zip", r"unreadable arrays \(BadZipFile"),
    (lambda w: "member0.pt", "weights saved as torch tensors by an earlier latbench; refit"),
])
def test_tampered_additive_mlp_weights_are_refused(tmp_path, edit, match):
    import zipfile

    from leaderboard.baselines.persist import Store

    folder = Path(shutil.copytree(SHELF_ENTRY, tmp_path / "entry"))
    store = Store(folder)
    new = edit(store.get_arrays("member0.npz"))
    if isinstance(new, dict):
        store.put_arrays("member0.npz", new)
    elif isinstance(new, bytes) and new.startswith(b"\x93NUMPY"):
        with zipfile.ZipFile(folder / "member0.npz", "w") as z:
            z.writestr("overhead.npy", new)
    elif isinstance(new, bytes):
        (folder / "member0.npz").write_bytes(new)
    else:  # a member file name of the torch format additive_mlp saved before
        meta = meta_of(folder)
        meta["state"]["member_files"] = [new]
        (folder / "predictor.json").write_text(json.dumps(meta))
    refused(folder, match)
