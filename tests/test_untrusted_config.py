"""Untrusted configuration and output folders (issue 15, defects 1, 4 and 9): `generate --out DIR`
removes only its own IR files; params.yaml is read within bounds; counts and data_dir are checked."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from pipelines.cli import main
from pipelines.config import ConfigError, load_params, validate

ROOT = Path(__file__).resolve().parents[1]


def small_params(tmp_path: Path, **changes) -> Path:
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["generator"] = {"seed": 0, "synthetic": {**raw["generator"]["synthetic"], "n": 2}}
    raw["data_dir"] = str(tmp_path / "data")
    raw.update(changes)
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p


def test_generate_out_removes_only_its_own_ir_files(tmp_path, capsys):
    out = tmp_path / "leaderboard"
    foreign = {
        "splits/usc-real-kfold.json": json.dumps({"folds": [1, 2]}),
        "results/track/flops.json": json.dumps({"entry": "flops"}),
        "synthetic/notes.json": "{}",  # in a source's folder, but not named by a model id
        "synthetic/0123456789abcdef.json": json.dumps({"format": "something-else"}),  # a model-id name, not IR
        "zoo/fedcba9876543210.json": json.dumps({"format": "latbench-ir", "source": "synthetic",
                                                 "model_id": "fedcba9876543210"}),  # IR of another source
    }
    for rel, text in foreign.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    params = small_params(tmp_path)
    assert main(["generate", "--params", str(params), "--out", str(out), "-q"]) == 0
    for rel, text in foreign.items():
        assert (out / rel).read_text() == text, rel
    ours = sorted(p.name for p in (out / "synthetic").glob("*.json") if p.name not in ("notes.json", "0123456789abcdef.json"))
    assert len(ours) == 2
    # a smaller run removes its own stale file, still nothing else
    params = small_params(tmp_path, generator={"seed": 0, "synthetic": {**yaml.safe_load(params.read_text())["generator"]["synthetic"], "n": 1}})
    assert main(["generate", "--params", str(params), "--out", str(out), "-q"]) == 0
    left = sorted(p.name for p in (out / "synthetic").glob("*.json") if p.name not in ("notes.json", "0123456789abcdef.json"))
    assert len(left) == 1 and left[0] in ours
    for rel, text in foreign.items():
        assert (out / rel).read_text() == text, rel


def test_generate_refuses_to_overwrite_a_foreign_index(tmp_path, capsys):
    out = tmp_path / "somewhere"
    out.mkdir()
    (out / "index.csv").write_text("name,value\nimportant,1\n")
    assert main(["generate", "--params", str(small_params(tmp_path)), "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "index.csv: exists and is not an index written by `latbench generate`" in err
    assert (out / "index.csv").read_text() == "name,value\nimportant,1\n"


BOMB = "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
               for p, c in zip([None, "a", "b", "c", "d", "e", "f", "g"], "abcdefgh"))


def test_params_alias_bomb_is_refused_quickly(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text(BOMB + small_params(tmp_path).read_text())
    assert len(p.read_bytes()) < 10_000
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="more than 20 YAML aliases|more than 20000 values") as exc:
        load_params(p)
    assert time.perf_counter() - t0 < 5
    assert "\n" not in str(exc.value) and str(exc.value).startswith(str(p))


@pytest.mark.parametrize("text,message", [
    ("generator: " + "[" * 10_000, "nested deeper than 64 levels"),
    ("generator: !!python/object/apply:os.system [echo hi]", "malformed YAML"),
    ("data_dir: " + "9" * 5000, "unreadable YAML|integer"),
])
def test_hostile_params_files(tmp_path, text, message):
    p = tmp_path / "params.yaml"
    p.write_text(text + "\n")
    with pytest.raises(ConfigError, match=message) as exc:
        load_params(p)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("key,value,message", [
    ("generator.synthetic.n", 1_000_000_000, "generator.synthetic.n: 1000000000 is out of range"),
    ("generator.synthetic.num_blocks", 10**6, "generator.synthetic.num_blocks: 1000000 is out of range"),
    ("generator.zoo.variants", 10**9, "generator.zoo.variants: 1000000000 is out of range"),
    ("data_dir", "", "data_dir: expected a folder path"),
    ("data_dir", 123, "data_dir: expected a folder path"),
])
def test_counts_and_data_dir_are_bounded(tmp_path, key, value, message):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    node = raw
    *head, last = key.split(".")
    for k in head:
        node = node.setdefault(k, {})
    node[last] = value
    with pytest.raises(ConfigError, match=message):
        validate(raw, "params.yaml")


def test_bad_data_dir_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for value in ("", 123):
        assert main(["generate", "--params", str(small_params(tmp_path, data_dir=value)), "-q"]) == 2
        assert "data_dir: expected a folder path" in capsys.readouterr().err
    assert not (tmp_path / "models").exists() and not (tmp_path / "123").exists()


def test_an_interrupted_stage_says_so_in_one_line(monkeypatch, capsys):
    """Ctrl-C, or the release sweep's budget (timeout --signal=INT), ends a stage with one line
    and exit code 130, not a traceback."""
    import pipelines.cli as cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_cmd_measure", interrupted)  # main builds its parser from the module's commands
    assert main(["measure", "--framework", "tflite", "--precision", "fp32", "--cores", "1large"]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("latbench measure: interrupted after ") and "rerun" in err[0]
