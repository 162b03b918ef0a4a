"""The assemble stage (issue 5): measurement records + IR -> the dataset tables, card, failures.

One small measured dataset per session: two NAS-Bench-201 cells generated and exported, then
measured on this host with a short protocol (2 processes, 6 runs; op and kernel processes of
3 runs) in tflite fp32 and int8 on one core, fp32 on two cores when the machine has them, and
PyTorch fp32 for one cell; a PyTorch fp16 grid point (not offered) and an int8 pair whose
artifact was removed before measuring (a recorded failure). Every test reads that dataset.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from pipelines.assemble import AssembleError, LATENCY_STAT, assemble, run_assemble
from pipelines.cli import main
from pipelines.config import compose, validate, write_params
from pipelines.dataset import SCHEMAS, TABLES, check_table, load_dataset
from pipelines.dataset.opfeatures import OP_TYPES, xnnpack_kernel_type
from pipelines.measure import run_measure

ROOT = Path(__file__).resolve().parents[1]
# on the shared test machine the load is recorded, not refused (tests/test_measure.py tests refusing)
QUICK = ["measure.processes=2", "measure.warmup=2", "measure.stopping.policy=fixed", "measure.stopping.runs=6",
         "measure.op_runs=3", "measure.overhead_pairs=2", "measure.load.check=false",
         "release.folder="]  # a committed release would hold these cells: measure them here
TWO_CPUS = len(os.sched_getaffinity(0)) >= 2
FP32, INT8, FP32_2 = "host-tflite-cpu-1large-fp32", "host-tflite-cpu-1large-int8", "host-tflite-cpu-2large-fp32"
TORCH = "host-pytorch-cpu-1large-fp32"
XNN_NAME = re.compile(r"^[A-Z][A-Za-z0-9 ]*? \((?:N[A-Z]*|ND|NC)(?:, [A-Z0-9]+)*\)(?: [A-Za-z0-9 ]+)?$")


def _raw(data: Path) -> dict:
    return compose(["generator=[nasbench201]", "generator.nasbench201.n=2", f"data_dir={data}",
                    "export.formats=[tflite_fp32,tflite_int8,torchscript_fp32]", "export.workers=2", *QUICK])


@pytest.fixture(scope="session")
def measured(tmp_path_factory) -> Path:
    """A data dir with models, artifacts and measurements (see the module doc)."""
    from pipelines.export import run_export
    from pipelines.generate import run_generate

    data = tmp_path_factory.mktemp("assemble") / "data"
    cfg = validate(_raw(data))
    run_generate(cfg, progress=False)
    assert run_export(cfg, progress=False)["failed"] == 0
    ids = sorted(p.stem for p in (data / "models").glob("*/*.json"))
    (data / "artifacts" / ids[1] / "tflite_int8.tflite").unlink()  # the injected failure
    for fw, prec, cores in [("tflite", "fp32", "1large"), ("tflite", "int8", "1large"), ("tflite", "fp32", "2large"),
                            ("pytorch", "fp16", "1large")]:
        run_measure(cfg, fw, prec, cores, progress=False)
    cfg.measure.models = ids[:1]
    assert run_measure(cfg, "pytorch", "fp32", "1large", progress=False)["ok"] == 1
    return data


@pytest.fixture(scope="session")
def built(measured, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("dataset")
    return out, run_assemble(data_dir=measured, out_dir=out, progress=False)


@pytest.fixture(scope="session")
def ds(built):
    return load_dataset(built[0])


def _ids(data: Path) -> list[str]:
    return sorted(p.stem for p in (data / "models").glob("*/*.json"))


def _record(data: Path, sid: str, mid: str) -> dict:
    return json.loads((data / "measurements" / "host" / sid / f"{mid}.json").read_text())


def test_tables_follow_the_schema_with_provenance(measured, built, ds):
    out, r = built
    a, b = _ids(measured)
    sids = [FP32, INT8, TORCH] + ([FP32_2] if TWO_CPUS else [])
    assert sorted(ds.scenarios["scenario_id"]) == sorted(sids)
    assert r["e2e"] == len(ds.e2e) == 2 + 1 + 1 + (2 if TWO_CPUS else 0)  # b has no int8 record, one torch pair
    assert r["failures"] == 1 and r["not_offered"] == 1
    assert sorted(ds.models["model_id"]) == [a, b]
    for name in TABLES:
        df = ds.tables()[name]
        check_table(name, df)
        assert not df.duplicated(list(SCHEMAS[name].key)).any()
        assert (df["dataset"] == "latbench").all() and df["source_file"].notna().all()
        assert all((measured / f).is_file() for f in df["source_file"].unique()), name
        if name != "models":
            assert df["source_column"].notna().all()
    assert set(ds.ops["source_column"].str.extract(r"^(op)\.ops\[\d+\]$")[0]) == {"op"}
    assert set(ds.kernels["source_column"].str.extract(r"^(kernel)\.kernels\[\d+\]$")[0]) == {"kernel"}
    m = ds.model(a)
    assert m["family"] == "nasbench201" and m["source"] == "nasbench201" and m["input_shape"] == "1x3x32x32"
    assert m["arch"].startswith("|") and m["flops"] > 0 and m["source_file"] == f"models/nasbench201/{a}.json"
    assert ds.graph(a).model_id == a  # the stored IR rebuilds the network
    s = ds.scenario(FP32)
    assert (s.device, s.framework, s.cores, s.core_count, s.threads, s.precision, s.batch) == \
        ("host", "tflite", "1large", 1, 1, "fp32", 1)
    assert s.framework_version.startswith("litert ") and s.heterogeneous is False and "1 large core" in s.description
    assert s.source_file == f"measurements/host/{FP32}/SCENARIO.json"
    assert ds.scenario(TORCH).framework_version.startswith("torch ")


def test_rows_carry_the_machine_load_and_host(measured, ds):
    """Each e2e row: the host that measured it and the load its processes saw (the record's
    `load` summary), and the card states them per scenario."""
    import socket

    e = ds.e2e
    assert (e["host"] == socket.gethostname()).all() and e["load_observed"].all()
    for _, row in e.iterrows():
        load = _record(measured, row["scenario_id"], row["model_id"])["load"]
        assert row["foreign_busy_frac"] == load["max_foreign_busy_frac"] and row["remeasured"] == 0
        assert row["steal_frac"] == load["max_steal_frac"] and row["loadavg_max"] == load["max_loadavg"]
        f = load["cpu_freq_khz"]
        assert row["cpu_freq_khz"] == ("unknown" if f == "unknown" else f"{f['min']}-{f['max']}")
    card = (ds.path / "DATASET.md").read_text()
    assert "### Machine load while measuring" in card and "noise floor" in card
    assert all(sid in card.split("### Machine load while measuring")[1] for sid in e["scenario_id"].unique())


def test_e2e_statistics_are_the_records_in_milliseconds(measured, ds):
    for row in ds.e2e.itertuples():
        rec = _record(measured, row.scenario_id, row.model_id)
        samples = [np.asarray(p, dtype=float) / 1e6 for p in rec["e2e"]["samples_ns"]]  # ns -> ms
        assert row.latency_stat == LATENCY_STAT
        assert row.latency_ms == pytest.approx(np.median([np.median(p) for p in samples]))
        pooled = np.concatenate(samples)
        assert row.median_ms == pytest.approx(np.median(pooled)) and row.mean_ms == pytest.approx(pooled.mean())
        assert row.min_ms == pytest.approx(pooled.min()) and row.max_ms == pytest.approx(pooled.max())
        assert row.p10_ms <= row.median_ms <= row.p90_ms and row.cv >= 0 and row.between_cv >= 0
        assert (row.repeats, row.processes, row.warmup) == (6, 2, 2)
        assert (row.stopping, row.stop_reason) == ("fixed", "fixed_runs")
        assert row.source_file == f"measurements/host/{row.scenario_id}/{row.model_id}.json"
        assert row.end_ns > row.start_ns and row.runtime_version
        assert row.op_run_ms == pytest.approx(rec["op"]["summary"]["median_ms"])
        if row.scenario_id == TORCH:
            assert pd.isna(row.kernel_run_ms)
        else:
            assert row.kernel_run_ms == pytest.approx(rec["kernel"]["summary"]["median_ms"])
    assert ds.e2e["ci_level"].dropna().eq(0.95).all()


def test_tflite_ops_carry_the_artifact_configuration(measured, ds):
    """Op rows of a TFLite scenario, checked against the interpreter's own view of the file."""
    from ai_edge_litert.interpreter import Interpreter

    a = _ids(measured)[0]
    ops = ds.ops_for(INT8, a)
    rec = _record(measured, INT8, a)
    it = Interpreter(model_path=str(measured / "artifacts" / a / "tflite_int8.tflite"))
    nodes = {d["index"]: d for d in it._get_ops_details()}
    tensors = {t["index"]: list(t["shape"]) for t in it.get_tensor_details()}
    assert len(ops) == len(rec["op"]["ops"]) == len(nodes)
    assert list(ops["op_index"]) == sorted(o["order"] for o in rec["op"]["ops"])
    convs = 0
    for row in ops.itertuples():
        cfg = json.loads(row.config)
        node = nodes[cfg["tflite_node"]]
        assert row.framework_op == node["op_name"] and row.op_type == OP_TYPES.get(node["op_name"], row.op_type)
        out = tensors[node["outputs"][0]]
        if node["op_name"] in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            convs += 1
            x, w = tensors[node["inputs"][0]], tensors[node["inputs"][1]]
            assert (row.in_channels, row.in_hw, row.out_channels, row.out_hw) == (x[3], x[1], out[3], out[1])
            assert row.kernel == w[1] and row.stride >= 1 and row.padding >= 0 and row.groups >= 1
            assert cfg["options"]["padding"] in ("SAME", "VALID")
        # a time where the profiler saw one; otherwise the config says why
        if pd.isna(row.latency_ms):
            assert cfg["latency_stat"] is None and "resolution" in cfg["latency_missing"]
        else:
            assert row.latency_ms > 0 and cfg["latency_stat"] in ("median", "mean")
            stat = cfg["median_ms"] if cfg["latency_stat"] == "median" else cfg["mean_ms"]
            assert row.latency_ms == pytest.approx(stat)
    assert convs >= 5 and not ops["fused"].any()
    assert set(ds.ops.loc[ds.ops["framework_op"] == "MEAN", "op_type"]) == {"global_avgpool"}
    assert ds.ops["op_type"].notna().all() and (ds.ops["latency_ms"].dropna() > 0).all()


def test_torch_ops_and_xnnpack_kernels(measured, ds):
    from generators.ir import Graph

    a = _ids(measured)[0]
    ops = ds.ops_for(TORCH, a)
    g = Graph.load(measured / "models" / "nasbench201" / f"{a}.json")
    ir_convs = [n for n in g.nodes.values() if n.op == "conv2d"]
    convs = ops[ops["op_type"] == "conv2d"]
    assert len(convs) == len(ir_convs)  # one aten convolution per IR conv
    assert sorted(convs["out_channels"]) == sorted(n.attrs["out_channels"] for n in ir_convs)
    assert sorted(convs["kernel"]) == sorted(n.attrs["kernel"][0] for n in ir_convs)
    assert set(ops.loc[ops["framework_op"] == "aten::linear", "op_type"]) == {"fc"}

    k = ds.kernels_for(FP32, a)
    rec = _record(measured, FP32, a)
    assert len(k) == len(rec["kernel"]["kernels"]) and list(k["kernel_index"]) == list(range(len(k)))
    for row in k.itertuples():
        cfg = json.loads(row.config)
        assert cfg["source"] in ("xnnpack", "builtin")
        if cfg["source"] == "xnnpack":
            assert XNN_NAME.match(row.kernel_name) and row.kernel_type == xnnpack_kernel_type(row.kernel_name)
            assert "(" not in row.kernel_type and row.kernel_type == row.kernel_type.lower()
        assert pd.isna(row.latency_ms) == (cfg["latency_stat"] is None)
    assert "convolution" in set(k["kernel_type"])


def test_joins_through_the_loading_api(ds):
    e = ds.e2e_with_features()
    assert len(e) == len(ds.e2e) and e["flops"].gt(0).all() and set(e["family"]) == {"nasbench201"}
    assert set(e["device"]) == {"host"} and e["core_count"].notna().all()
    o = ds.ops_with_features(FP32)
    assert o["flops"].gt(0).all() and (o["framework"] == "tflite").all()
    share = o.groupby("model_id")["share"].sum()
    assert np.allclose(share, 1.0)
    gap = ds.op_sum()
    assert len(gap) == len(ds.e2e) and gap["sum_ms"].gt(0).all()
    c = ds.compare(INT8, FP32)
    assert len(c) == 1 and c["ratio"].gt(0).all()  # only the model whose int8 pair did not fail
    assert len(ds.by_family()["nasbench201"]) == len(ds.e2e)
    if TWO_CPUS:
        assert len(ds.compare(FP32_2, FP32)) == 2 and ds.scenario(FP32_2).core_count == 2


def test_card_failures_and_not_offered(measured, built, ds):
    out, _ = built
    text = (out / "DATASET.md").read_text()
    figs = ["latency_distribution.png", "op_breakdown.png", "int8_speedup.png", "op_gap.png"]
    figs += ["multicore_speedup.png"] if TWO_CPUS else []
    for fig in figs:
        assert f"]({fig})" in text and (out / fig).stat().st_size > 1000, fig
    assert "| `e2e` | %d | %d |" % (len(ds.e2e), len(ds.e2e)) in text
    assert "median_of_process_medians" in text and "builtin TFLite kernels" in text
    assert "| fixed: runs=6 |" in text and "fixed_runs" in text
    assert "no CPU op records" not in text and "### `kernels`" in text
    assert "host-pytorch-cpu-1large-fp16" in text and "pytorch fp16 is not offered" in text
    fails = pd.read_csv(out / "failures.csv")
    assert list(fails.columns) == ["model_id", "scenario_id", "kind", "error", "processes_done", "source_file"]
    b = _ids(measured)[1]
    assert fails.to_dict("records")[0] | {"error": ""} == {
        "model_id": b, "scenario_id": INT8, "kind": "artifact_missing", "error": "", "processes_done": 0,
        "source_file": f"measurements/host/{INT8}/{b}.error.json"}
    assert "tflite_int8.tflite" in fails["error"][0]
    assert "1 pair(s) failed (artifact_missing 1)" in text


def test_reassembly_is_byte_identical(measured, built, tmp_path):
    out, _ = built
    again = tmp_path / "again"
    run_assemble(data_dir=measured, out_dir=again, progress=False)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in again.iterdir())
    for name in names:
        assert (out / name).read_bytes() == (again / name).read_bytes(), name


def test_cli_stage_and_bad_records(measured, tmp_path, capsys):
    raw = _raw(measured)
    p = tmp_path / "params.yaml"
    write_params(raw, p)
    # the DVC stage runs this command with what it reads as dependencies and the folder as output
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["assemble"]
    assert stage["cmd"] == "python -m pipelines.cli assemble" and stage["outs"] == ["${data_dir}/dataset"]
    assert {"${data_dir}/models", "${data_dir}/measurements", "pipelines/assemble.py"} <= set(stage["deps"])
    # a private copy of the measurements: the CLI writes <data_dir>/dataset
    data = tmp_path / "data"
    data.mkdir()
    for name in ("models", "artifacts"):
        (data / name).symlink_to(measured / name)
    shutil.copytree(measured / "measurements", data / "measurements")
    raw["data_dir"] = str(data)
    write_params(raw, p)
    assert main(["assemble", "--params", str(p), "-q"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("assemble: models 2, scenarios ") and "1 failed pairs" in printed
    records = [f for f in data.glob("measurements/host/*/*.json") if re.fullmatch(r"[0-9a-f]{16}\.json", f.name)]
    assert len(load_dataset(data / "dataset").e2e) == len(records)

    a = _ids(measured)[0]
    rec_path = data / "measurements" / "host" / FP32 / f"{a}.json"
    rec = json.loads(rec_path.read_text())
    rec["scenario"]["scenario_id"] = INT8
    rec_path.write_text(json.dumps(rec))
    assert main(["assemble", "--params", str(p), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(rec_path) in err and f"SCENARIO.json says '{FP32}'" in err
    rec["scenario"]["scenario_id"] = FP32
    rec["model_id"] = "f" * 16
    rec_path.unlink()
    (rec_path.parent / f"{'f' * 16}.json").write_text(json.dumps(rec))
    with pytest.raises(AssembleError, match=f"model {'f' * 16} has no IR file"):
        assemble(data)


def test_the_cards_time_resolution_counts_come_from_the_table():
    """DATASET.md's 'from the mean' / 'without time' figures are read from the rows' config, so a
    pair taken from the release (pruned, never walked as a record) counts like one assembled now;
    public rows (no latency_stat) count as neither."""
    import pandas as pd

    from pipelines.assemble import _resolution_counts

    t = pd.DataFrame({"config": ['{"latency_stat":"median"}', '{"latency_stat":"mean"}',
                                 '{"latency_stat": "mean"}',
                                 '{"latency_stat":null,"latency_missing":"median and mean 0"}',
                                 '{"source":"usc"}', None]})
    assert _resolution_counts(t) == (2, 1)
    assert _resolution_counts(t.iloc[:0]) == (0, 0)


def test_pytorch_rows_record_their_page_faults(measured, ds):
    """A PyTorch row carries its runs' page faults (the worker runs on jemalloc and counts them:
    pipelines/runners/allocator.py); a TFLite row, whose runner does not count them, has none."""
    a = _ids(measured)[0]
    e = ds.e2e.set_index(["scenario_id", "model_id"])
    assert e.loc[(TORCH, a), "page_faults_per_run"] >= 0
    assert pd.isna(e.loc[(FP32, a), "page_faults_per_run"])
    rec = _record(measured, TORCH, a)
    assert rec["runtime"]["allocator"]["name"] == "jemalloc"
    assert rec["e2e"]["page_faults_per_run"] == e.loc[(TORCH, a), "page_faults_per_run"]


def _record_files(data: Path) -> list[Path]:
    return sorted(p for p in data.glob("measurements/host/*/*.json") if re.fullmatch(r"[0-9a-f]{16}\.json", p.name))


def test_records_written_by_the_sweep_round_trip_through_their_type(measured):
    """The measure stage writes a Record and assemble reads it back through the same type: every
    record of the sweep parses, and its to_json is the file again (same keys, nesting, values)."""
    from pipelines.measure.records import Record, json_default

    modes = set()
    for p in _record_files(measured):
        text = p.read_text()
        d = json.loads(text)
        rec = Record.from_json(d, p)
        assert rec.to_json() == d
        assert json.dumps(rec.to_json(), indent=1, sort_keys=True, default=json_default) + "\n" == text
        assert (rec.model_id, rec.scenario_id) == (p.stem, p.parent.name)
        assert rec.e2e.latency_ms == d["e2e"]["latency_ms"] and rec.e2e.pooled.n == d["e2e"]["pooled"]["n"]
        assert rec.protocol.stopping.stop_reason == d["protocol"]["stopping"]["stop_reason"]
        assert rec.load is not None and rec.load.observed == d["load"]["observed"]
        modes |= {m for m in ("op", "kernel") if rec.profiled(m) is not None}
    assert modes == {"op", "kernel"}


def test_an_unobserved_load_keeps_its_layout():
    """The load part of a record whose processes' load was not read (a phone) is written as
    load_summary gives it: observed, reason, remeasured (and the thresholds)."""
    from pipelines.measure.records import LoadSummary, load_summary

    d = {**load_summary([None, {"observed": False, "reason": "load is read on the host only"}], 1), "check": {}}
    s = LoadSummary(**d)
    assert s.to_json() == d == {"observed": False, "reason": "load is read on the host only", "remeasured": 1,
                                "check": {}}


@pytest.mark.parametrize("keys", [("e2e", "pooled"), ("e2e", "latency_ms"), ("scenario", "scenario_id"),
                                  ("protocol",), ("model_id",)])
def test_a_record_missing_a_key_is_one_line_naming_the_file_and_the_key(measured, tmp_path, keys):
    from pipelines.measure.records import Record, RecordError

    a = _ids(measured)[0]
    d = _record(measured, FP32, a)
    part = d
    for k in keys[:-1]:
        part = part[k]
    del part[keys[-1]]
    # read by the type
    path = tmp_path / f"{a}.json"
    with pytest.raises(RecordError) as e:
        Record.from_json(d, path)
    assert str(e.value) == f"{path}: missing key {'.'.join(keys)!r}"
    # and by the stage, reading a scenario folder holding it
    data = tmp_path / "data"
    for name in ("models", "artifacts"):
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).symlink_to(measured / name)
    folder = data / "measurements" / "host" / FP32
    folder.mkdir(parents=True)
    shutil.copy(measured / "measurements" / "host" / FP32 / "SCENARIO.json", folder)
    (folder / f"{a}.json").write_text(json.dumps(d))
    with pytest.raises(AssembleError) as e:
        assemble(data)
    assert str(e.value) == f"{folder / f'{a}.json'}: missing key {'.'.join(keys)!r}" and "\n" not in str(e.value)


def test_a_record_of_another_shape_is_one_line_naming_the_key(measured, tmp_path):
    from pipelines.measure.records import Record, RecordError

    d = _record(measured, FP32, _ids(measured)[0])
    path = tmp_path / "r.json"
    with pytest.raises(RecordError, match=r"r\.json: bad key 'e2e\.pooled' \(expected an object, got a list\)$"):
        Record.from_json({**d, "e2e": {**d["e2e"], "pooled": []}}, path)
    with pytest.raises(RecordError, match=r"r\.json: bad key 'op\.ops' \(expected a list, got an object\)$"):
        Record.from_json({**d, "op": {**d["op"], "ops": {}}}, path)
    with pytest.raises(RecordError, match=r"r\.json: schema 'other/1', expected 'latbench\.measurement/1'$"):
        Record.from_json({**d, "schema": "other/1"}, path)
