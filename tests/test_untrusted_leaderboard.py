"""Untrusted submissions (issue 15, defects 2, 3, 4, 5, 9): the name policy, baselines' results
owned by the baselines, bounded reading, strict types, and a board no text can break; and the
three reproductions of the bounds issue: a small wide CSV refused before pandas parses it,
terminal escapes in submitted text shown inertly, and `validate` refusing what `submit` refuses."""
from __future__ import annotations

import hashlib
import json
import re
import time

import numpy as np
import pandas as pd
import pytest
import yaml

from leaderboard.cli import main
from support.fixtures import register_test_predictors
from leaderboard.run import evaluate_entry, train_entry, write_status
from leaderboard.submission import SubmissionError, check_entry_name, validate

TRACK = "usc-gpu-oplevel"
META = {"method": "mine", "authors": ["A. Person"], "code": "https://example.org/code",
        "training_data": "track training split only", "seeds": [0]}


@pytest.fixture(scope="module")
def board(public, tmp_path_factory):
    """A results folder with two baseline entries: `flops` (a registered predictor's name) and
    `my-baseline` (any name a baseline run chose), and the good predictions of a submission."""
    register_test_predictors()
    base = tmp_path_factory.mktemp("untrusted-board")
    results = base / "results"
    write_status(public, results)
    e1 = train_entry("test-reported-flops", {}, [TRACK], public, base / "entries", entry="flops")
    e2 = train_entry("test-reported-flops", {}, [TRACK], public, base / "entries", entry="my-baseline")
    for e in (e1, e2):
        evaluate_entry(e, public, results)
    preds = pd.read_parquet(e1 / "predictions.parquet")
    return base, results, preds


def digest(folder):
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def write(tmp_path, df, meta=META, suffix=".csv", meta_text=None):
    p, m = tmp_path / f"pred{suffix}", tmp_path / "meta.yaml"
    df.to_parquet(p, index=False) if suffix == ".parquet" else df.to_csv(p, index=False)
    m.write_text(meta_text if meta_text is not None else yaml.safe_dump(meta))
    return p, m


def cli(public, *args):
    return main(["--public", public["public"], "--host", public["host"], *map(str, args)])


def problems(p, m, public, **kw):
    with pytest.raises(SubmissionError) as e:
        validate(p, m, public, **kw)
    assert all("\n" not in x for x in e.value.problems)
    return "\n".join(e.value.problems)


# ---------------------------------------------------------------- 2 and 5: names
@pytest.mark.parametrize("name,ok", [("mine", True), ("my-method_2.1", True), ("flops", False), ("usc_lasso", False),
                                     ("..", False), (".hidden", False), ("a/b", False), ("", False), ("x" * 65, False),
                                     ("Upper", False)])
def test_entry_name_policy(name, ok):
    assert (check_entry_name(name) is None) == ok


def test_submit_cannot_take_a_baselines_name_or_results(board, public, tmp_path, capsys):
    base, results, preds = board
    before = digest(results)
    p, m = write(tmp_path, preds, suffix=".parquet")
    subs = tmp_path / "submissions"
    for name in ("flops", "FLOPS", "usc_lasso"):  # registered predictors' names (slugged first)
        assert cli(public, "submit", p, m, "--name", name, "--submissions", subs, "--results", results, "--replace") == 2
        assert "reserved for the suite's baselines" in capsys.readouterr().err
    # a name no predictor has, but whose results are a baseline's
    assert cli(public, "submit", p, m, "--name", "my-baseline", "--submissions", subs, "--results", results) == 2
    assert "has results of a baseline" in capsys.readouterr().err
    # kind: baseline is refused for submissions
    _, m2 = write(tmp_path, preds, meta={**META, "kind": "baseline"}, suffix=".parquet")
    assert cli(public, "submit", p, m2, "--name", "mine", "--submissions", subs, "--results", results) == 1
    assert "kind: baseline is reserved" in capsys.readouterr().err
    assert digest(results) == before and not subs.exists()
    # a proper submission is filed and scored beside the baselines
    m.write_text(yaml.safe_dump(META))
    assert cli(public, "submit", p, m, "--name", "mine", "--submissions", subs, "--results", results) == 0
    after = digest(results)
    assert {k: v for k, v in after.items() if not k.endswith("/mine.json")} == before
    assert f"{TRACK}/mine.json" in after


@pytest.mark.parametrize("name", ["..", ".hidden", "../../x", "...", "-", "/", "a/../../b", "my method"])
def test_submit_never_writes_outside_submissions(board, public, tmp_path, capsys, name):
    _, results, preds = board
    work = tmp_path / "work"
    subs = work / "submissions"
    subs.mkdir(parents=True)
    p, m = write(tmp_path, preds, suffix=".parquet")
    res = tmp_path / "results"
    rc = cli(public, "submit", p, m, "--name", name, "--submissions", subs, "--results", res, "--replace")
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--name" in err
    assert sorted(x.name for x in work.iterdir()) == ["submissions"] and not list(subs.iterdir())
    assert sorted(x.name for x in tmp_path.iterdir()) == ["meta.yaml", "pred.parquet", "work"]


def test_filed_entries_follow_the_policy_when_scored(board, public, tmp_path, capsys):
    base, _, preds = board
    results = tmp_path / "results"
    subs = tmp_path / "submissions"
    for name, meta in (("flops", META), ("usc_lasso", META), ("honest", META), ("fake", {**META, "kind": "baseline"})):
        (subs / name).mkdir(parents=True)
        preds.assign(predicted_ms=preds["predicted_ms"] * 2).to_parquet(subs / name / "predictions.parquet", index=False)
        (subs / name / "metadata.yaml").write_text(yaml.safe_dump(meta))
    assert cli(public, "evaluate", "--entries", base / "entries", "--entries", subs, "--submitted", subs,
               "--results", results) == 0
    rejected = json.loads((results / "rejected.json").read_text())
    assert "already taken by" in rejected["flops"][0]["problem"]  # the baseline's folder came first and keeps the name
    assert "reserved for the suite's baselines" in rejected["usc_lasso"][0]["problem"]  # a predictor's name, even unused
    assert "kind: baseline is reserved" in rejected["fake"][0]["problem"] and rejected["fake"][0]["track"] is None
    flops = json.loads((results / TRACK / "flops.json").read_text())
    assert flops["meta"]["kind"] == "baseline"  # the baseline's own result, not the submitted one
    assert (results / TRACK / "honest.json").is_file() and not (results / TRACK / "fake.json").exists()


def test_evaluate_clean_removes_only_result_files(board, public, tmp_path):
    _, results, _ = board
    folder = tmp_path / "leaderboard"
    (folder / "splits").mkdir(parents=True)
    (folder / "splits" / "usc-real-kfold.json").write_text('{"folds": []}')
    assert cli(public, "evaluate", "--clean", "--entries", tmp_path / "none", "--results", folder) == 0
    assert (folder / "splits" / "usc-real-kfold.json").read_text() == '{"folds": []}'


# ---------------------------------------------------------------- 4: bounded reading
BOMB = "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
               for p, c in zip([None, "a", "b", "c", "d", "e", "f"], "abcdefg"))


def test_metadata_alias_bomb_is_refused_quickly(board, public, tmp_path):
    _, _, preds = board
    text = yaml.safe_dump(META) + "params:\n" + "".join(f"  {line}\n" for line in BOMB.splitlines())
    assert len(text) < 1000  # expands to 9**7 values
    p, m = write(tmp_path, preds, meta_text=text)
    t0 = time.perf_counter()
    found = problems(p, m, public)
    assert time.perf_counter() - t0 < 10
    assert re.search(r"meta.yaml: unreadable \(more than \d+ (values|YAML aliases)", found), found


def test_a_small_parquet_of_many_rows_is_refused_unread(board, public, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 2_500_000
    idx = pa.array(np.zeros(n, dtype=np.int8))
    table = pa.table({c: pa.DictionaryArray.from_arrays(idx, [v]) for c, v in
                      (("track", TRACK), ("scenario_id", "s"), ("model_id", "m"))} | {"predicted_ms": pa.array(np.ones(n))})
    p = tmp_path / "pred.parquet"
    pq.write_table(table, p)
    assert p.stat().st_size < 2_000_000
    (tmp_path / "meta.yaml").write_text(yaml.safe_dump(META))
    text = problems(p, tmp_path / "meta.yaml", public)
    assert "2500000 rows (at most 2000000: predictions_rows in foundation/limits.py); not read" in text


# ---------------------------------------------------------------- 9: types, empty files, JSON, README
@pytest.mark.parametrize("values,stored", [
    (lambda n: np.ones(n, dtype=bool), "bool"),
    (lambda n: pd.to_datetime(np.arange(n), unit="s"), "datetime64"),
    (lambda n: pd.to_timedelta(np.arange(1, n + 1), unit="ms"), "timedelta64"),
])
def test_predictions_of_the_wrong_type_are_refused(board, public, tmp_path, values, stored):
    _, _, preds = board
    bad = preds.assign(predicted_ms=values(len(preds)))
    text = problems(*write(tmp_path, bad, suffix=".parquet"), public)
    assert f"predicted_ms: stored as {stored}" in text


def test_header_only_csv_is_not_an_entry(board, public, tmp_path):
    p = tmp_path / "pred.csv"
    p.write_text("track,scenario_id,model_id,predicted_ms\n")
    (tmp_path / "meta.yaml").write_text(yaml.safe_dump(META))
    assert "no predictions (the file has a header but no rows)" in problems(p, tmp_path / "meta.yaml", public)


def test_evaluate_prints_strict_json(board, public, tmp_path, capsys):
    _, _, preds = board
    from leaderboard.submission import LIMITS

    huge = preds.copy()
    huge.loc[0, "predicted_ms"] = 1e308
    assert cli(public, "evaluate", *write(tmp_path, huge, suffix=".parquet")) == 1
    assert f"larger than {LIMITS['predicted_ms']:g} ms" in capsys.readouterr().err
    big = preds.copy()
    big.loc[0, "predicted_ms"] = 0.9 * LIMITS["predicted_ms"]
    assert cli(public, "evaluate", *write(tmp_path, big, suffix=".parquet")) == 0

    def refuse(name):
        raise AssertionError(f"{name} in the output")

    json.loads(capsys.readouterr().out, parse_constant=refuse)


def test_board_shows_hostile_text_inertly(board, tmp_path):
    from leaderboard.render import render

    base, results, preds = board
    res = tmp_path / "results"
    res.mkdir()
    for p in results.rglob("*.json"):
        (res / p.relative_to(results)).parent.mkdir(parents=True, exist_ok=True)
        (res / p.relative_to(results)).write_bytes(p.read_bytes())
    doc = json.loads((res / TRACK / "flops.json").read_text())
    doc["meta"]["description"] = "<!--<script> </script><b>x</b> & more"
    (res / TRACK / "flops.json").write_text(json.dumps(doc))
    (res / "rejected.json").write_text(json.dumps({"evil": [{"track": None, "problem": "pred.csv: [click](http://evil.example) <img src=x> `code` |a|\nline 2"}]}))
    (res / TRACK / "garbage.json").write_text("[1, 2]")  # not a result file: left off, not a crash
    readme, index = render(res, tmp_path / "README.md", tmp_path / "site")
    page = index.read_text()
    data = re.search(r'<script type="application/json" id="board-data">(.*?)</script>', page, re.S).group(1)
    assert "<" not in data and ">" not in data and "&" not in data
    parsed = json.loads(data)
    descs = [e["description"] for t in parsed["tracks"] for e in t["entries"]]
    assert doc["meta"]["description"] in descs
    assert page.count("<script") == 2  # the data element and the page's own script, nothing else
    text = readme.read_text()
    line = next(x for x in text.splitlines() if x.startswith("- evil"))
    assert "\\[click\\](http://evil.example)" in line and "&lt;img src=x&gt;" in line and "\\`code\\`" in line
    assert "line 2" in line  # folded onto the one line


# ---------------------------------------------------------------- reproductions: wide CSV, escapes, validate == submit
def timed_cli(public, *args):
    t0 = time.perf_counter()
    rc = cli(public, *args)
    return rc, time.perf_counter() - t0


def figure(capsys, text):
    """A measured figure, printed past the capture (pytest -s shows it)."""
    with capsys.disabled():
        print(text)


def test_a_small_wide_csv_is_refused_before_parsing(board, public, tmp_path, capsys):
    """The reproduction: a 200 KB header of 100,000 duplicate names stalled validate (pandas is
    quadratic on duplicate names) for minutes; now it is one line naming the file, the line and the
    bound, within a second, in validate, evaluate and submit alike."""
    from leaderboard.submission import LIMITS

    p = tmp_path / "w.csv"
    p.write_text("track,scenario_id,model_id,predicted_ms" + ",a" * 100000 + "\n")
    m = tmp_path / "meta.yaml"
    m.write_text(yaml.safe_dump(META))
    subs, res = tmp_path / "subs", tmp_path / "results"
    want = f"{p}: line 1: more than {LIMITS['line_chars']} characters (at most {LIMITS['line_chars']}: line_chars"
    for args in (("validate", p, m), ("evaluate", p, m), ("submit", p, m, "--name", "wide", "--submissions", subs,
                                                          "--results", res)):
        rc, seconds = timed_cli(public, *args)
        err = capsys.readouterr().err
        figure(capsys, f"wide CSV, {args[0]}: exit {rc} in {seconds:.2f} s")
        assert rc == 1 and err.count("\n") == 1 and err.startswith(f"leaderboard: invalid submission: {want}"), err
        assert seconds < 30
    assert not subs.exists() and not res.exists()
    # under the line bound, the column count refuses it (duplicate names or not)
    for extra in (",a" * 2000, "".join(f",c{i}" for i in range(13))):
        p.write_text("track,scenario_id,model_id,predicted_ms" + extra + "\n" + f"{TRACK},s,m,1.0" + ",x" * (extra.count(",")) + "\n")
        rc, seconds = timed_cli(public, "validate", p, m)
        err = capsys.readouterr().err
        n = 4 + extra.count(",")
        assert rc == 1 and err.count("\n") == 1 and f"{p}: line 1: {n} columns (at most {LIMITS['predictions_columns']}" in err, err
        assert seconds < 30


@pytest.mark.parametrize("where", ["model_id", "metadata key"])
def test_terminal_escapes_in_submitted_text_are_shown_inertly(board, public, tmp_path, capsys, where):
    """The reproduction: a model_id (or any submitted text) holding escape sequences (window
    title, clear screen) and bidi characters reached the reviewer's terminal raw."""
    _, _, preds = board
    evil = "\x1b]0;pwned\x07\x1b[2Jevil\u202egnp.exe\u2066\x9b31m"
    raw = ("\x1b", "\x07", "\u202e", "\u2066", "\x9b")
    meta = dict(META)
    if where == "model_id":
        df = pd.concat([preds, preds.iloc[[0]].assign(model_id=evil)], ignore_index=True)
    else:
        df = preds
        meta[evil] = 1  # an unknown key: quoted in its problem line
    meta["method"], meta["description"] = f"mine{evil}", f"nice {evil}"
    p, m = write(tmp_path, df, meta=meta, meta_text=yaml.safe_dump(meta, allow_unicode=True))
    rc, seconds = timed_cli(public, "validate", p, m)
    err = capsys.readouterr().err
    figure(capsys, f"escapes in the {where}: exit {rc} in {seconds:.2f} s")
    assert rc == 1 and err.count("\n") == 1 and seconds < 30, err
    assert not any(c in err for c in raw), repr(err)
    assert "\\x1b]0;pwned\\x07\\x1b[2Jevil\\u202egnp.exe\\u2066\\x9b31m" in err, err
    # valid files whose method and description hold escapes: filed and scored, nothing raw printed
    p, m = write(tmp_path, preds, meta={**META, "method": f"mine{evil}", "description": evil})
    for args in (("validate", p, m), ("submit", p, m, "--name", "escapes", "--submissions", tmp_path / "subs",
                                      "--results", tmp_path / "results")):
        assert cli(public, *args) == 0
        out = capsys.readouterr()
        assert not any(c in out.out + out.err for c in raw), out


CASES = {  # what submit refuses, and how: (metadata, --name, exit status, the problem line's text)
    "kind baseline": ({**META, "kind": "baseline"}, "mine", 1, "kind: baseline is reserved"),
    "reserved name": (META, "flops", 2, "--name: entry name 'flops' is reserved"),
    "path-like name": (META, "a/b", 2, "--name: entry name 'a/b' is not allowed"),
    "existing entry": (META, "taken", 2, "taken exists (choose another --name, or --replace)"),
    "baseline's results": (META, "my-baseline", 2, "--name: 'my-baseline' has results of a baseline"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_refuses_what_submit_refuses(board, public, tmp_path, capsys, case):
    """The reproduction: validate called a `kind: baseline` metadata file valid, then submit refused
    it. Both run one function (leaderboard.cli.submit_checks): for each of submit's refusals,
    validate (with the same --name) refuses with the same line and exit status; the
    kind check needs no name, and evaluate makes it too."""
    _, results, preds = board
    meta, name, status, text = CASES[case]
    p, m = write(tmp_path, preds, meta=meta, suffix=".parquet")
    subs = tmp_path / "subs"
    (subs / "taken").mkdir(parents=True)
    before = digest(results)
    where = ("--submissions", subs, "--results", results)
    runs = {"submit": ("submit", p, m, "--name", name, *where), "validate --name": ("validate", p, m, "--name", name, *where)}
    if status == 1:  # the files' own problem: no name needed, and evaluate (scoring, filing nothing) says it too
        runs |= {"validate": ("validate", p, m), "evaluate": ("evaluate", p, m)}
    lines = {}
    for what, args in runs.items():
        rc, seconds = timed_cli(public, *args)
        err = capsys.readouterr().err
        figure(capsys, f"{case}, {what}: exit {rc} in {seconds:.2f} s")
        assert rc == status and err.count("\n") == 1 and text in err and seconds < 30, (what, err)
        lines[what] = err
    assert len(set(lines.values())) == 1, lines
    assert digest(results) == before and sorted(x.name for x in subs.iterdir()) == ["taken"]
    if status == 2:  # the name's refusal comes first, as in submit: the files are fine
        assert cli(public, "validate", p, m) == 0
        assert "entry name not checked" in capsys.readouterr().out
