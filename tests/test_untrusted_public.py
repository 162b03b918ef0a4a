"""Bad cells in public data files (issue 15, defect 7): each becomes a recorded problem naming the
file, line and column, and the import goes on (docs/dataset.md's promise)."""
from __future__ import annotations

from pathlib import Path

from pipelines.dataset import HelpConfig, UscConfig, import_help, import_usc
from pipelines.dataset import help as help_mod

USC_FILES = ("cnn_real_e2e_tflite.csv", "cnn_real_e2e_torch.csv", "cnn_real_ops_gpu_tflite.csv", "cnn_real_ops_gpu_torch.csv")


def small_usc(src: Path, dst: Path, lines: int = 6) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for f in USC_FILES:
        text = (src / f).read_text().splitlines(keepends=True)
        (dst / f).write_text("".join(text[: lines if "e2e" in f else lines * 6]))
    return dst


def replace_feature(path: Path, line: int, old: str, new: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    assert old in lines[line - 1], lines[line - 1][:200]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    path.write_text("".join(lines))


def test_bad_usc_cells_are_problems_and_the_import_goes_on(tmp_path, usc_dir):
    d = small_usc(usc_dir, tmp_path / "usc")
    clean = import_usc(UscConfig(path=str(d), rebuild_ir=False))
    assert not clean.problems
    ops = d / "cnn_real_ops_gpu_tflite.csv"
    replace_feature(ops, 2, "{'Input_shape'", "{5: 1, 'Input_shape'")  # a key that is not a name
    replace_feature(ops, 3, "'Input_channel': 64", "'Input_channel': -64")  # negative channels
    replace_feature(ops, 4, "'Filter': '64'", "'Filter': '99999999999999999999999'")  # past int64
    lines = ops.read_text().splitlines()
    assert "'FLOPS': '" in lines[4]
    replace_feature(ops, 5, lines[4].split("'FLOPS': '")[1].split("'")[0], "1" + "0" * 30)  # FLOPS 1e30
    e2e = d / "cnn_real_e2e_tflite.csv"
    rows = e2e.read_text().splitlines(keepends=True)
    f = rows[2].split(",")
    f[1] = "1e30"  # the FLOPS column
    rows[2] = ",".join(f)
    e2e.write_text("".join(rows))
    r = import_usc(UscConfig(path=str(d), rebuild_ir=False))
    msgs = [str(p) for p in r.problems]
    assert any(m.startswith("cnn_real_ops_gpu_tflite.csv line 2, column 'feature': not a Python dict literal")
               and "key 5 is not a name" in m for m in msgs), msgs
    assert any(m.startswith("cnn_real_ops_gpu_tflite.csv line 3, column 'feature': in_channels = -64 out of range")
               for m in msgs), msgs
    assert any(m.startswith("cnn_real_ops_gpu_tflite.csv line 4, column 'feature': out_channels = 99999999999999999999999")
               for m in msgs), msgs
    assert any(m.startswith("cnn_real_ops_gpu_tflite.csv line 5, column 'feature': reported_flops = 1000000000000000000000000000000")
               for m in msgs), msgs
    assert any(m.startswith("cnn_real_e2e_tflite.csv line 3, column 'FLOPS': integer out of range") for m in msgs), msgs
    assert all("\n" not in m for m in msgs)
    # only the bad row / cells are lost
    tfl = r["ops"][r["ops"]["source_file"] == "cnn_real_ops_gpu_tflite.csv"]
    n_dev = tfl["scenario_id"].nunique()
    assert 2 not in set(tfl["source_row"]) and len(tfl) == len(clean["ops"][clean["ops"]["source_file"] ==
                                                                           "cnn_real_ops_gpu_tflite.csv"]) - n_dev
    row3 = tfl[tfl["source_row"] == 3]
    assert row3["in_channels"].isna().all() and row3["out_hw"].notna().all()
    assert len(r["e2e"]) == len(clean["e2e"])  # a bad FLOPS cell costs no latency
    assert r["models"]["reported_flops"].isna().sum() == clean["models"]["reported_flops"].isna().sum() + 1


def test_help_batch_past_int64_is_an_unknown_device(tmp_path, help_dir):
    lines = (help_dir / "latency.csv").read_text().splitlines(keepends=True)[:12]
    head = lines[0].rstrip("\n").split(",")
    head[-1] = "titanxp_" + "9" * 25 + "_ms"
    d = tmp_path / "help"
    d.mkdir()
    (d / "latency.csv").write_text(",".join(head) + "\n" + "".join(lines[1:]))
    r = import_help(HelpConfig(path=str(d), rebuild_ir=False))
    msgs = [str(p) for p in r.problems]
    assert len(msgs) == 1 and msgs[0].startswith(f"latency.csv line 1, column '{head[-1]}': unknown device"), msgs
    assert len(r["models"]) == 11 and len(r["scenarios"]) == len(head) - 3
    assert help_mod.help_device("titanxp_" + "9" * 25) is None and help_mod.help_device("titanxp_0") is None
    assert help_mod.help_device("titanxp_256").batch == 256
