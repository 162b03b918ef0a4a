"""Property-based tests (Hypothesis) of the contract with untrusted input (issue 15): generated
malformed IR files, configurations, submissions, public CSV rows and saved predictors, thrown at
the public entry points. For every input:

- the entry point answers with its exit status (0, or 1/2 for refused input) and a message whose
  lines name the file (and key/node), never a traceback;
- nothing is written outside the target folder and no other entry changes;
- time and memory stay bounded: the entry points run in a child process (tests/support/bounded.py)
  under resource limits (RLIMIT_AS 3 GiB, RLIMIT_FSIZE 64 MiB, RLIMIT_CPU) and a wall-clock
  timeout; past the submission bounds, each job's wall time and the child's peak resident memory
  are asserted too. That peak is the child's own high-water mark (VmHWM, which starts afresh at
  exec), or a descendant's when larger; not ``ru_maxrss``, which keeps the resident size the child
  was forked with, the test process's, from before exec.

Each Hypothesis example is a *batch* of inputs run by one child process (importing the suite
once), so the whole module stays within a few tens of seconds.
"""
from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from support.bounded import run_jobs

ROOT = Path(__file__).resolve().parents[1]
MEMORY = 3 * 1024**3
FILE_SIZE = 64 * 1024**2
CPU_SECONDS = 240
WALL_SECONDS = 300
_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]
# Each example is a batch run by one child process (~1-4 s to import the suite); no shrinking
# (a failing batch is reported whole, each input with its own file), no example database on disk.
BATCHES = settings(max_examples=2, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
                   suppress_health_check=_HEALTH)
ONE_BATCH = settings(BATCHES, max_examples=1)

# ---------------------------------------------------------------- the bounded child process
def run_bounded(jobs: list[dict], work: Path, cwd: Path) -> list[dict]:
    """Run the jobs in one child process (support/bounded.py, in ``cwd``, its files in ``work``)
    under the resource limits; every job must end in its entry point's own answer (no traceback,
    no MemoryError, no kill)."""
    return run_jobs(jobs, work, cwd=cwd, address_space=MEMORY, file_size=FILE_SIZE, cpu_seconds=CPU_SECONDS,
                    wall=WALL_SECONDS)["results"]


def digest(folder: Path, skip: tuple[Path, ...] = ()) -> dict[str, str]:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not any(p == s or s in p.parents for s in skip):
            out[p.relative_to(folder).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def one_line_errors(r: dict, prefix: str, names: list[str]) -> None:
    """A refused input: stderr is one line with the tool's prefix, naming one of the files."""
    lines = r["err"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), r["err"][-2000:]
    assert any(n in lines[0] for n in names), (names, lines[0])


# ---------------------------------------------------------------- strategies
HOSTILE_INTS = st.sampled_from([-1, 0, 1, 2, 3, 2**31, 2**63, -(2**63) - 1, 10**30, 10**400])
SCALARS = (st.none() | st.booleans() | HOSTILE_INTS | st.integers(-5, 50)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8))
JSONISH = st.recursive(SCALARS, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                       max_leaves=6)
NAMES = st.sampled_from(["name", "op", "inputs", "block", "shape", "out_channels", "kernel", "stride", "padding",
                         "groups", "bias", "alpha", "num_parameters", "axis", "sections", "pads", "value", "factor"]) \
    | st.text(max_size=6)


def base_ir() -> dict:
    from generators.ir import Graph

    g = Graph("base", source="test", meta={"k": 1})
    x = g.input([1, 4, 8, 8])
    c = g.add("conv2d", x, out_channels=4, kernel=3, padding=1)
    p = g.add("prelu", c, num_parameters=4)
    y = g.add("add", [x, p])
    l = g.add("leaky_relu", y, alpha=0.1)
    s = g.add_multi("split", l, sections=[2, 2])
    g.set_outputs(g.add("concat", s))
    return json.loads(g.to_json())


@st.composite
def malformed_ir(draw) -> bytes:
    d = base_ir()
    kind = draw(st.integers(0, 5))
    if kind == 0:  # a top-level key
        d[draw(st.sampled_from(["format", "version", "name", "source", "meta", "outputs", "nodes", "model_id"]) | st.text(max_size=5))] = draw(JSONISH)
    elif kind == 1:  # a key of a node
        n = draw(st.sampled_from(d["nodes"]))
        n[draw(st.sampled_from(["name", "op", "inputs", "attrs", "block", "shapes"]))] = draw(JSONISH)
    elif kind == 2:  # an attribute of a node (existing names, add()'s argument names, anything)
        n = draw(st.sampled_from(d["nodes"]))
        n.setdefault("attrs", {})[draw(NAMES)] = draw(JSONISH)
        n.pop("shapes", None)
        d.pop("model_id", None)
    elif kind == 3:  # an output reference
        d["outputs"] = draw(st.lists(JSONISH | st.sampled_from(["conv2d_0", "split_0:7", "nope"]), max_size=3))
    elif kind == 4:  # hostile text: cut, deeply nested, a huge integer, latin-1
        text = json.dumps(d)
        how = draw(st.integers(0, 3))
        if how == 0:
            return text[: draw(st.integers(0, len(text)))].encode()
        if how == 1:
            return (text[:-1] + ',"meta2":' + "[" * draw(st.integers(60, 50_000)) + "}").encode()
        if how == 2:
            return text.replace('"shape":[1,4,8,8]', '"shape":[1,' + "7" * draw(st.integers(19, 6000)) + ",8,8]").encode()
        return text.replace('"base"', '"b\xe4se"').encode("latin-1")
    else:  # drop a node (dangling inputs) or duplicate one
        i = draw(st.integers(0, len(d["nodes"]) - 1))
        if draw(st.booleans()):
            d["nodes"].pop(i)
        else:
            d["nodes"].append(copy.deepcopy(d["nodes"][i]))
    return json.dumps(d).encode()


@given(st.lists(malformed_ir(), min_size=12, max_size=12))
@BATCHES
def test_malformed_ir_files(tmp_path_factory, files):
    work = tmp_path_factory.mktemp("ir")
    paths = []
    for i, data in enumerate(files):
        p = work / f"m{i}.json"
        p.write_bytes(data)
        paths.append(str(p))
    before = digest(work)
    (r,) = run_bounded([{"kind": "latbench", "argv": ["validate", *paths]}], tmp_path_factory.mktemp("jobs"), work)
    lines = r["out"].strip().splitlines()
    assert r["rc"] in (0, 1) and len(lines) == len(paths), r
    for p, line in zip(paths, lines):  # in order, one line each, naming the file
        assert line.startswith((f"ok {p} ", f"invalid {p}: ")), line
    assert r["rc"] == (1 if any(x.startswith("invalid") for x in lines) else 0)
    assert digest(work) == before


# ---------------------------------------------------------------- configurations
def base_params(data_dir: Path) -> dict:
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["generator"] = {"seed": 0, "synthetic": {**raw["generator"]["synthetic"], "n": 1}}
    raw["data_dir"] = str(data_dir)
    return raw


CONFIG_KEYS = ["data_dir", "generator", "generator.seed", "generator.synthetic", "generator.synthetic.n",
               "generator.synthetic.num_blocks", "generator.synthetic.input_size", "generator.synthetic.strides",
               "generator.synthetic.channel_ranges", "generator.synthetic.block_types", "generator.zoo",
               "generator.zoo.variants", "generator.nasbench201.n", "device.name", "public", "nope"]
BOMB = "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['x'] * 9)}]\n"
               for p, c in zip([None, "a", "b", "c", "d", "e", "f"], "abcdefg"))


@st.composite
def malformed_params(draw, data_dir: Path) -> str:
    raw = base_params(data_dir)
    kind = draw(st.integers(0, 3))
    if kind <= 1:  # replace values at dotted keys
        for _ in range(draw(st.integers(1, 3))):
            key = draw(st.sampled_from(CONFIG_KEYS))
            node = raw
            *head, last = key.split(".")
            for k in head:
                if not isinstance(node.get(k), dict):
                    node[k] = {}
                node = node[k]
            node[last] = draw(JSONISH | HOSTILE_INTS)
        return yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
    if kind == 2:  # aliases: a bomb, or a small legitimate reuse
        return (BOMB if draw(st.booleans()) else "") + yaml.safe_dump(raw, sort_keys=False)
    text = yaml.safe_dump(raw, sort_keys=False)
    return text[: draw(st.integers(0, len(text)))] + draw(st.sampled_from(["", "[" * 5000, ": :", "\t- x", "!!python/name:os.system"]))


@given(st.data())
@BATCHES
def test_malformed_configurations(tmp_path_factory, data):
    work = tmp_path_factory.mktemp("cfg")
    sandbox = work / "sandbox"
    sandbox.mkdir()
    (sandbox / "keep.json").write_text('{"mine": true}')
    jobs, params = [], []
    for i in range(8):
        p = work / f"params{i}.yaml"
        p.write_text(data.draw(malformed_params(work / f"data{i}")))
        params.append(p)
        jobs.append({"kind": "latbench", "argv": ["generate", "--params", str(p), "--out", str(work / f"out{i}"), "-q"]})
    before = digest(work, skip=tuple(work / f"out{i}" for i in range(8)))
    results = run_bounded(jobs, tmp_path_factory.mktemp("jobs"), sandbox)
    for p, r in zip(params, results):
        assert r["rc"] in (0, 2), r
        if r["rc"] == 2:
            one_line_errors(r, "latbench: error: ", [p.name])
    # written: only the out folders of the runs that succeeded; nothing in the sandbox (cwd)
    assert digest(work, skip=tuple(work / f"out{i}" for i in range(8))) == before
    assert sorted(x.name for x in sandbox.iterdir()) == ["keep.json"]
    for i, r in enumerate(results):
        assert (work / f"out{i}").exists() == (r["rc"] == 0)


# ---------------------------------------------------------------- submissions
META = {"method": "mine", "authors": ["A. Person"], "code": "https://example.org/code",
        "training_data": "track training split only", "seeds": [0]}
TRACK = "usc-gpu-oplevel"


@pytest.fixture(scope="module")
def good_predictions(public, tmp_path_factory):
    from support.fixtures import register_test_predictors
    from leaderboard.run import evaluate_entry, train_entry, write_status

    register_test_predictors()
    base = tmp_path_factory.mktemp("subs-board")
    write_status(public, base / "results")
    entry = train_entry("test-reported-flops", {}, [TRACK], public, base / "entries", entry="flops")
    evaluate_entry(entry, public, base / "results")
    return pd.read_parquet(entry / "predictions.parquet"), base / "results"


CELLS = st.sampled_from(["", "nan", "inf", "-1", "0", "1e308", "1e-300", "abc", "1,5", '"', "\n", "<!--<script>",
                         "[x](http://e)", "9" * 400]) | st.text(max_size=12)


@st.composite
def malformed_submission(draw, preds: pd.DataFrame) -> tuple[pd.DataFrame, str, str]:
    df = preds.copy()
    n = draw(st.integers(0, 4))
    for _ in range(n):
        i = draw(st.integers(0, len(df) - 1))
        col = draw(st.sampled_from(list(df.columns)))
        df[col] = df[col].astype(object)
        df.iloc[i, df.columns.get_loc(col)] = draw(CELLS)
    if draw(st.booleans()):
        df = df.iloc[: draw(st.integers(0, len(df)))]
    meta = dict(META)
    for _ in range(draw(st.integers(0, 3))):
        meta[draw(st.sampled_from(list(META) + ["kind", "description", "params", "predictor", "evil"]))] = draw(JSONISH | CELLS)
    how = draw(st.integers(0, 3))
    meta_text = (json.dumps(meta) if how == 0 else yaml.safe_dump(meta, allow_unicode=True) if how == 1
                 else BOMB + yaml.safe_dump(meta) if how == 2 else yaml.safe_dump(meta)[: draw(st.integers(0, 40))])
    name = draw(st.sampled_from(["mine", "flops", "usc_lasso", "..", ".x", "a/b", "../../x", "ok-name", "UPPER", "-"])
                | st.text(max_size=10))
    return df, meta_text, name


@given(st.data())
@ONE_BATCH
def test_malformed_submissions(public, good_predictions, tmp_path_factory, data):
    preds, baseline_results = good_predictions
    work = tmp_path_factory.mktemp("sub")
    results = work / "results"
    import shutil

    shutil.copytree(baseline_results, results)
    subs = work / "board" / "submissions"
    subs.mkdir(parents=True)
    jobs, files = [], []
    for i in range(10):
        df, meta_text, name = data.draw(malformed_submission(preds))
        suffix = data.draw(st.sampled_from([".csv", ".parquet"]))
        p, m = work / f"pred{i}{suffix}", work / f"meta{i}{'.json' if meta_text.startswith('{') else '.yaml'}"
        if suffix == ".csv":
            df.to_csv(p, index=False)
        else:
            try:
                df.to_parquet(p, index=False)
            except (ValueError, TypeError, OverflowError):  # mixed columns pyarrow cannot store (ArrowInvalid is a ValueError)
                df.astype(str).to_parquet(p, index=False)
        m.write_text(meta_text)
        files.append((p, m, name))
        roots = ["--public", public["public"], "--host", public["host"]]
        jobs.append({"kind": "leaderboard", "argv": [*roots, "validate", str(p), str(m)]})
        jobs.append({"kind": "leaderboard", "argv": [*roots, "submit", str(p), str(m), f"--name={name}",
                                                      "--submissions", str(subs), "--results", str(results)]})
    baseline = (results / TRACK / "flops.json").read_bytes()
    before = digest(work, skip=(results, subs))
    out = run_bounded(jobs, tmp_path_factory.mktemp("jobs"), work)
    filed = set()
    for k, (p, m, name) in enumerate(files):
        for r in out[2 * k: 2 * k + 2]:
            assert r["rc"] in (0, 1, 2), r
            lines = r["err"].strip().splitlines()
            if r["rc"] == 1:  # invalid submission: a header, then one line per problem naming a file
                assert lines[0].startswith("leaderboard: invalid submission: "), lines
                assert all(str(p) in x or str(m) in x or "track " in x for x in lines[1:]), lines
            elif r["rc"] == 2:
                one_line_errors(r, "leaderboard: error: ", ["--name", str(subs), str(p), str(m), name or "''"])
        if out[2 * k + 1]["rc"] == 0:
            filed.add(name.strip().lower())
    assert (results / TRACK / "flops.json").read_bytes() == baseline  # the baseline's result is its own
    assert digest(work, skip=(results, subs)) == before  # nothing written beside the board
    assert {x.name for x in subs.iterdir()} == filed  # entries only under their own (policy-checked) names
    assert all(x.name.endswith(".json") and (x.stem == "flops" or x.stem in filed)
               for x in (results / TRACK).iterdir())


# ---------------------------------------------------------------- submissions past the bounds
# Shapes that used to stall or flood the reviewer: wide CSVs (duplicate names made pandas quadratic),
# long lines, huge cells (also one long string dictionary-encoded in every parquet row), terminal
# escapes and bidi characters in submitted text, and `kind: baseline` (validate must refuse what
# submit refuses). One child process under 2 GiB of address space; the driver times every job and
# reads the process's peak resident memory after it.
JOB_MEMORY = 2 * 1024**3
JOB_SECONDS = 10


def run_timed(jobs: list[dict], work: Path, cwd: Path) -> list[dict]:
    """run_bounded under 2 GiB: every job ends in its entry point's own answer, each within
    JOB_SECONDS of wall time, the process's peak resident memory (its own VmHWM, or a
    descendant's) under 2 GB."""
    results = run_jobs(jobs, work, cwd=cwd, address_space=JOB_MEMORY, file_size=FILE_SIZE, cpu_seconds=CPU_SECONDS,
                       wall=WALL_SECONDS)["results"]
    for job, r in zip(jobs, results):
        assert r["seconds"] < JOB_SECONDS, (job["argv"][-2:], r["seconds"])
        assert r["peak_bytes"] < 2 * 10**9, (job["argv"][-2:], r["peak_bytes"])
    return results


HOSTILE_TEXT = st.lists(st.sampled_from(["\x1b]0;title\x07", "\x1b[2J", "\x1b[31m", "\u202e", "\u2066", "\u200f", "\x9b", "\u2028",
                                         "\r", "\x00", "\ufeff", "ok", "é", "\\x1b"]), min_size=1, max_size=6).map("".join)


def _raw_controls(text: str) -> list[str]:
    import unicodedata

    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


@st.composite
def hostile_shapes(draw, preds: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(name, predictions file content, the text the one refusal line must hold) per case."""
    from foundation.limits import SUBMISSION as LIMITS

    line, cols, cell = LIMITS["line_chars"], LIMITS["predictions_columns"], LIMITS["cell_chars"]
    head = "track,scenario_id,model_id,predicted_ms"
    row = ",".join(map(str, preds.iloc[0][["track", "scenario_id", "model_id", "predicted_ms"]]))
    ids = row.rsplit(",", 2)[0]  # track,scenario_id
    n = draw(st.integers(cols - 3, 150_000))  # extra columns: more than the bound in all
    names = draw(st.sampled_from(["a", "dup", "model_id", "c{i}", ""]))  # duplicates, or not
    extra = "".join("," + names.format(i=i) for i in range(n))
    wide = f"line 1: {n + 4} columns (at most {cols}" if len(head + extra) <= line else f"line 1: more than {line} characters"
    long_cell, big = draw(st.integers(line + 1, 2_000_000)), draw(st.integers(cell + 1, line - 100))
    lines = draw(st.integers(3, 3000))
    return [
        ("wide.csv", head + extra + "\n" + (row + "," * n + "\n") * draw(st.integers(0, 3)), wide),
        ("long.csv", f"{head}\n{row}\n{ids}," + "m" * long_cell + ",1.0" * draw(st.booleans()), f"line 3: more than {line} characters"),
        ("cell.csv", f"{head}\n{ids}," + "m" * big + ",1.0\n", f"line 2: a cell of {big} characters (at most {cell}"),
        ("quoted.csv", f'{head}\n{ids},"' + ("m" * 100 + "\n") * lines + '",1.0\n', f"line 2: a cell of"),
    ]


@given(st.data())
@ONE_BATCH
def test_submissions_past_the_bounds(public, good_predictions, tmp_path_factory, data):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    preds, baseline_results = good_predictions
    work = tmp_path_factory.mktemp("bounds")
    results = work / "results"
    import shutil

    shutil.copytree(baseline_results, results)
    subs = work / "submissions"
    subs.mkdir()
    roots = ["--public", public["public"], "--host", public["host"]]
    meta = work / "meta.yaml"
    meta.write_text(yaml.safe_dump(META))
    jobs, expect = [], []  # expect: (case, the file its one line names, metadata, what the line says)
    for name, content, want in data.draw(hostile_shapes(preds)):
        p = work / name
        p.write_text(content)
        jobs.append({"kind": "leaderboard", "argv": [*roots, "validate", str(p), str(meta)]})
        expect.append(("shape", p, meta, want))
    # parquet: many columns; one long string dictionary-encoded in every row (decodes to gigabytes)
    p = work / "wide.parquet"
    ncols = data.draw(st.integers(17, 400))  # (predictions_columns is 16)
    pq.write_table(pa.table({f"c{i}": [0] for i in range(ncols)}), p)
    jobs.append({"kind": "leaderboard", "argv": [*roots, "validate", str(p), str(meta)]})
    expect.append(("shape", p, meta, f"{ncols} columns (at most "))
    p = work / "bomb.parquet"
    k, rows = data.draw(st.integers(257, 1_000_000)), data.draw(st.integers(1, 1_000_000))
    zeros = pa.array(np.zeros(rows, dtype=np.int32))
    pq.write_table(pa.table({"track": pa.DictionaryArray.from_arrays(zeros, [TRACK]),
                             "scenario_id": pa.DictionaryArray.from_arrays(zeros, ["s"]),
                             "model_id": pa.DictionaryArray.from_arrays(zeros, ["m" * k]),
                             "predicted_ms": pa.array(np.ones(rows))}), p, compression="zstd")
    jobs.append({"kind": "leaderboard", "argv": [*roots, "validate", str(p), str(meta)]})
    expect.append(("shape", p, meta, f"row 0: model_id: a cell of {k} characters"))
    # escapes and bidi characters in what a submitter writes: model_id, method, description, a key
    for i in range(2):
        df = preds.copy()
        if data.draw(st.booleans()):
            df = pd.concat([df, df.iloc[[0]].assign(model_id=data.draw(HOSTILE_TEXT))], ignore_index=True)
        m = {**META, "method": "m" + data.draw(HOSTILE_TEXT), "description": data.draw(HOSTILE_TEXT)}
        if data.draw(st.booleans()):
            m[data.draw(HOSTILE_TEXT)] = data.draw(HOSTILE_TEXT)
        p, mf = work / f"esc{i}{data.draw(st.sampled_from(['.csv', '.parquet']))}", work / f"esc{i}.yaml"
        df.to_csv(p, index=False) if p.suffix == ".csv" else df.to_parquet(p, index=False)
        mf.write_text(yaml.safe_dump(m, allow_unicode=True))
        for cmd in ("validate", "submit"):
            jobs.append({"kind": "leaderboard", "argv": [*roots, cmd, str(p), str(mf), f"--name=esc{i}", "--submissions",
                                                          str(subs), "--results", str(results)]})
            expect.append(("escapes", p, mf, None))
    # kind: baseline: validate, evaluate and submit refuse it with the same line
    p, mf = work / "kind.parquet", work / "kind.yaml"
    preds.to_parquet(p, index=False)
    mf.write_text(yaml.safe_dump({**META, "kind": "baseline"}))
    for argv in (["validate", str(p), str(mf)], ["evaluate", str(p), str(mf)],
                 ["submit", str(p), str(mf), "--name=mine", "--submissions", str(subs), "--results", str(results)]):
        jobs.append({"kind": "leaderboard", "argv": [*roots, *argv]})
        expect.append(("kind", mf, mf, "kind: baseline is reserved"))
    out = run_timed(jobs, tmp_path_factory.mktemp("jobs"), work)
    kind_lines = set()
    for (what, p, m, want), r in zip(expect, out):
        assert not _raw_controls(r["out"] + r["err"]), (what, p.name, r)
        if what == "escapes":
            assert r["rc"] in (0, 1), r
            continue
        assert r["rc"] == 1, (what, p.name, r)
        (line,) = r["err"].strip().splitlines()  # one line: the header and the problem together
        assert line.startswith(f"leaderboard: invalid submission: {p}: ") and want in line, (want, line)
        assert what != "shape" or "(at most" in line and "foundation/limits.py" in line, line
        kind_lines.add(line) if what == "kind" else None
    assert len(kind_lines) == 1  # validate, evaluate and submit: the same line
    submits = [r for job, r in zip(jobs, out) if job["argv"][len(roots)] == "submit" and "--name=mine" not in job["argv"]]
    assert {x.name for x in subs.iterdir()} == {f"esc{i}" for i, r in enumerate(submits) if r["rc"] == 0}


# ---------------------------------------------------------------- public CSV rows
USC_OPS_HEADER = "model,operation,feature,pixel4|gpu|float,pixel4|gpu|kernel"
USC_E2E_HEADER = "model,FLOPS,size,pixel4|1large|float|mean,pixel4|1large|float|std"
FEATURE_KEYS = st.sampled_from(["Input_shape", "Input_channel", "Output_shape", "Stride", "Kernel", "Filter", "Group",
                                "FLOPS", "input_channel", "output_channel", "groups"]) | st.integers(-3, 3) | st.text(max_size=4)
FEATURE_VALUES = HOSTILE_INTS | st.integers(-10, 10) | st.text(max_size=6) | st.floats() | st.booleans() | \
    st.lists(st.integers(), max_size=2) | st.sampled_from(["'-64'", "1" + "0" * 30, "9" * 5000])


def _literal(v) -> str:
    return repr(v)


@st.composite
def usc_folder_rows(draw) -> tuple[list[str], list[str]]:
    models = ["resnet10", "mobilenet_wd4", "squeezenet_v1_1"]
    ops = [USC_OPS_HEADER]
    for i in range(draw(st.integers(1, 6))):
        feat = draw(st.dictionaries(FEATURE_KEYS, FEATURE_VALUES, max_size=5))
        literal = "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in feat.items()) + "}"
        if draw(st.integers(0, 5)) == 0:
            literal = draw(st.sampled_from(["[1, 2]", "{", "{1: {2: " * 200 + "}" * 400, "__import__('os')", "{'a': b'x'}", "{'a': {1, 2}}"]))
        cell = '"' + literal.replace('"', '""') + '"'
        op = draw(st.sampled_from(["CONV_2D", "DEPTHWISE_CONV_2D", "MEAN", "FULLY_CONNECTED", "ADD", "WEIRD"]))
        ops.append(f"{draw(st.sampled_from(models))},{op},{cell},{draw(CELLS).replace(chr(10), '')},k_{i}")
    e2e = [USC_E2E_HEADER]
    for m in models:
        cells = [draw(CELLS | st.sampled_from(["1e30", "31865981928", "-5", "1.5"])).replace("\n", "").replace(",", "")
                 for _ in range(4)]
        e2e.append(",".join([m, *cells]))
    return ops, e2e


@given(st.lists(usc_folder_rows(), min_size=12, max_size=12))
@ONE_BATCH
def test_malformed_public_rows(tmp_path_factory, folders):
    work = tmp_path_factory.mktemp("usc")
    jobs = []
    for i, (ops, e2e) in enumerate(folders):
        d = work / f"usc{i}"
        d.mkdir()
        (d / "cnn_real_ops_gpu_tflite.csv").write_text("\n".join(ops) + "\n")
        (d / "cnn_real_e2e_tflite.csv").write_text("\n".join(e2e) + "\n")
        jobs.append({"kind": "import_usc", "path": str(d)})
    before = digest(work)
    for r in run_bounded(jobs, tmp_path_factory.mktemp("jobs"), work):
        assert r["rc"] == 0, r  # bad rows and cells are problems; the import itself goes on
        for line in r["out"].strip().splitlines():
            assert line.startswith(("cnn_real_", "cnn_real_e2e_torch.csv", "cnn_real_ops_gpu_torch.csv")), line
    assert digest(work) == before


# ---------------------------------------------------------------- saved predictors
@pytest.fixture(scope="module")
def saved_predictors(public, tmp_path_factory):
    from leaderboard.baselines import Networks, make_predictor, save_predictor
    from pipelines.dataset.load import load_dataset

    ds = load_dataset(public["public"])
    gpu = Networks.of_scenario(ds, "usc-pixel4-tflite-gpu-fp16")[:12]
    nb201 = Networks.of_scenario(ds, next(s for s in ds.scenarios["scenario_id"] if s.startswith("help-")))[:20]
    base = tmp_path_factory.mktemp("saved-props")
    out = {}
    for name, params, X in (("usc_gbdt", {"n_estimators": 3}, gpu), ("usc_rf", {"n_estimators": 2}, gpu),
                            ("flops", {}, nb201)):
        out[name] = save_predictor(make_predictor(name, **params).fit(X, X.y()), base / name)
    return out


def _paths(x, at=()):
    """Every (path) of a JSON document, for picking a place to tamper with."""
    yield at
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _paths(v, at + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x[:3]):
            yield from _paths(v, at + (i,))


@st.composite
def tampered_predictor(draw, saved: dict) -> tuple[str, dict[str, bytes]]:
    name = draw(st.sampled_from(sorted(saved)))
    folder = saved[name]
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    meta = json.loads(files["predictor.json"])
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(meta))
        at = draw(st.sampled_from(paths[1:]))
        node = meta
        for k in at[:-1]:
            node = node[k]
        if draw(st.integers(0, 4)) == 0 and isinstance(node, dict):
            node.pop(at[-1], None)
        else:
            node[at[-1]] = draw(JSONISH)
    files["predictor.json"] = json.dumps(meta).encode()
    txts = [k for k in files if k.endswith(".lightgbm.txt")]
    if txts and draw(st.booleans()):
        k = draw(st.sampled_from(txts))
        lines = files[k].decode().splitlines()
        i = draw(st.integers(0, len(lines) - 1))
        key = lines[i].split("=", 1)[0]
        lines[i] = key + "=" + draw(st.sampled_from(["9999", "-1", "0 0 0", "nan", "", "1e400", "-5 -5", "3 1 2"])
                                    | st.text(max_size=6).filter(lambda s: "\n" not in s and "\r" not in s))
        files[k] = "\n".join(lines).encode()
    return name, files


@given(st.data())
@BATCHES
def test_tampered_saved_predictors(saved_predictors, tmp_path_factory, data):
    work = tmp_path_factory.mktemp("pred")
    jobs, folders = [], []
    for i in range(8):
        name, files = data.draw(tampered_predictor(saved_predictors))
        d = work / f"{name}-{i}"
        d.mkdir()
        for fname, blob in files.items():
            (d / fname).write_bytes(blob)
        jobs.append({"kind": "load_predictor", "path": str(d)})
        folders.append(d)
    before = digest(work)
    for d, r in zip(folders, run_bounded(jobs, tmp_path_factory.mktemp("jobs"), work)):
        assert r["rc"] in (0, 2), r
        if r["rc"] == 2:
            one_line_errors(r, str(d), [str(d)])
    assert digest(work) == before
