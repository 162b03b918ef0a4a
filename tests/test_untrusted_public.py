"""Bad cells in public data files (issue 15, defect 7): each becomes a recorded problem naming the
file, line and column, and the import goes on (docs/dataset.md's promise)."""
from __future__ import annotations

from pathlib import Path

from pipelines.dataset import HelpConfig, UscConfig, import_help, import_usc
from pipelines.dataset import help as help_mod

USC_FILES = ("cnn_real_e2e_tflite.csv", "cnn_real_e2e_torch.csv", "cnn_real_ops_gpu_tflite.csv", "cnn_real_ops_gpu_torch.csv")


def _faults(result) -> list[str]:
    """The problem lines but the assumptions (a copy in a test folder states no set-up: the
    assumptions are tests/test_public_user_data.py's)."""
    return [str(p) for p in result.problems if p.kind != "assumption"]


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
    assert not _faults(clean)
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
    msgs = _faults(r)
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
    msgs = _faults(r)
    assert len(msgs) == 1 and msgs[0].startswith(f"latency.csv line 1, column '{head[-1]}': unknown device"), msgs
    assert len(r["models"]) == 11 and len(r["scenarios"]) == len(head) - 3
    assert help_mod.help_device("titanxp_" + "9" * 25) is None and help_mod.help_device("titanxp_0") is None
    assert help_mod.help_device("titanxp_256").batch == 256


# ---------------------------------------------------------------- latencies beyond limits.LATENCY_MS
def _set_cell(path: Path, line: int, column: str, value: str) -> None:
    """The cell of ``column`` on ``line`` (1 = header) set to ``value``; the other lines as they were."""
    import csv
    import io

    rows = path.read_text().splitlines(keepends=True)
    head = next(csv.reader([rows[0]]))
    f = next(csv.reader([rows[line - 1]]))
    f[head.index(column)] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(f)
    rows[line - 1] = out.getvalue()
    path.write_text("".join(rows))


def test_usc_latencies_above_the_bound_are_problems(tmp_path, usc_dir):
    """1e308 us is no latency: a problem naming file, line and column, the cell skipped (a std
    left empty), the rest imported; strict mode refuses the import."""
    import pytest

    from foundation import limits
    from pipelines.dataset import PublicDataError

    d = small_usc(usc_dir, tmp_path / "usc")
    clean = import_usc(UscConfig(path=str(d), rebuild_ir=False))
    e2e, ops = d / "cnn_real_e2e_tflite.csv", d / "cnn_real_ops_gpu_tflite.csv"
    _set_cell(e2e, 3, "pixel4|1large|float|mean", "1e308")
    _set_cell(e2e, 4, "pixel4|1large|float|std", "1e308")
    bound_us = limits.LATENCY_MS * 1000
    _set_cell(e2e, 5, "pixel4|1med|float|mean", repr(bound_us))  # exactly the bound: a latency
    _set_cell(e2e, 6, "pixel4|1med|float|mean", repr(bound_us * 1.0001))
    _set_cell(ops, 2, "pixel4|gpu|float", "1e308")
    r = import_usc(UscConfig(path=str(d), rebuild_ir=False))
    msgs = _faults(r)
    tail = f"is above {limits.LATENCY_MS:g} ms (limits.LATENCY_MS: one inference takes less than an hour)"
    assert msgs == [
        f"cnn_real_e2e_tflite.csv line 3, column 'pixel4|1large|float|mean': latency 1e+308 us = 1e+305 ms {tail}; cell skipped",
        f"cnn_real_e2e_tflite.csv line 4, column 'pixel4|1large|float|std': standard deviation: latency 1e+308 us = "
        f"1e+305 ms {tail}; std left empty",
        f"cnn_real_e2e_tflite.csv line 6, column 'pixel4|1med|float|mean': latency 3.60036e+09 us = 3.60036e+06 ms "
        f"{tail}; cell skipped",
        f"cnn_real_ops_gpu_tflite.csv line 2, column 'pixel4|gpu|float': latency 1e+308 us = 1e+305 ms {tail}; cell skipped",
    ], msgs
    assert r["e2e"]["latency_ms"].max() <= limits.LATENCY_MS and r["e2e"]["std_ms"].max() <= limits.LATENCY_MS
    assert len(r["e2e"]) == len(clean["e2e"]) - 2  # the two refused means; the std's row stays, std empty
    assert r["ops"]["latency_ms"].max() <= limits.LATENCY_MS
    assert len(r["ops"]) == len(clean["ops"]) - 1
    with pytest.raises(PublicDataError, match=r"usc-mobile-ml-benchmark: 4 problem\(s\) in the input \(strict mode\)"):
        import_usc(UscConfig(path=str(d), rebuild_ir=False, strict=True))


def test_help_latencies_above_the_bound_are_problems(tmp_path, help_dir):
    import pytest

    torch = pytest.importorskip("torch")
    lines = (help_dir / "latency.csv").read_text().splitlines(keepends=True)[:12]
    d = tmp_path / "help"
    d.mkdir()
    (d / "latency.csv").write_text("".join(lines))
    column = lines[0].rstrip("\n").split(",")[-1]
    _set_cell(d / "latency.csv", 4, column, "1e300")
    r = import_help(HelpConfig(path=str(d), rebuild_ir=False))
    assert _faults(r) == [
        f"latency.csv line 4, column '{column}': latency 1e+300 ms is above 3.6e+06 ms (limits.LATENCY_MS: one "
        "inference takes less than an hour); cell skipped"]
    assert len(r["e2e"]) == 11 * (len(lines[0].split(",")) - 2) - 1
    # HELP's own .pt lists: a value above the bound is a problem, the others import
    lat = tmp_path / "pt" / "latency"
    lat.mkdir(parents=True)
    torch.save([1.5] * 15624 + [1e300], lat / "pixel2.pt")
    r = import_help(HelpConfig(path=str(tmp_path / "pt"), rebuild_ir=False))
    assert _faults(r) == [
        "latency/pixel2.pt, column '[15624]': latency 1e+300 ms is above 3.6e+06 ms (limits.LATENCY_MS: one inference "
        "takes less than an hour); value skipped"]
    assert len(r["e2e"]) == 15624


def test_help_pt_zip_bomb_is_refused_before_torch_inflates_it(tmp_path):
    """A HELP .pt latency list whose data.pkl is 64 MiB of deflated zeros: a problem naming the
    file and the bound, the file skipped, the other file imported."""
    import io
    import zipfile

    import pytest

    torch = pytest.importorskip("torch")
    lat = tmp_path / "help" / "latency"
    lat.mkdir(parents=True)
    torch.save([2.5] * 15625, lat / "pixel3.pt")
    torch.save([1.5] * 15625, lat / "pixel2.pt")
    src = zipfile.ZipFile(io.BytesIO((lat / "pixel2.pt").read_bytes()))
    with zipfile.ZipFile(lat / "pixel2.pt", "w") as z:
        for info in src.infolist():
            if info.filename.endswith("data.pkl"):
                zi = zipfile.ZipInfo(info.filename)
                zi.compress_type = zipfile.ZIP_DEFLATED
                with z.open(zi, "w") as f:
                    for _ in range(16):
                        f.write(bytes(1 << 22))
            else:
                z.writestr(info, src.read(info.filename))
    r = import_help(HelpConfig(path=str(tmp_path / "help"), rebuild_ir=False))
    msgs = _faults(r)
    assert len(msgs) == 1 and msgs[0].startswith("latency/pixel2.pt: zip archive: member 'pixel2/data.pkl' inflates ")
    assert msgs[0].endswith("more than 200x (limits.ARCHIVE_RATIO); not unpacked; file skipped"), msgs
    assert list(r["scenarios"]["device"]) == ["pixel3"] and len(r["e2e"]) == 15625
