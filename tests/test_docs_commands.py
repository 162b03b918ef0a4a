"""Every command the README and docs/ show runs as shown, through the installed entry points.

The code blocks (fenced, and indented) of README.md and docs/*.md are read; every line that
starts with `latbench`, `leaderboard` or `leaderboard-train` is a command a user will type.
Each is checked against the console script the set-up installed (not `python -m`, which once
hid a `leaderboard-train` that could not find its config): its subcommand exists and
takes every option the line uses, and for the Hydra app the overrides compose. The cheap ones
(`--help`, `scenarios`, `show`, `validate`, a leaderboard validate/evaluate, a tiny sweep) are
then run in full the way the docs spell them, with only the data folders pointed at test data.
"""
from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's console scripts
ENTRY_POINTS = ("latbench", "leaderboard", "leaderboard-train")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _code_lines(text: str):
    fenced = False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or (line.startswith("    ") and not line.lstrip().startswith(("-", "*", "|"))):
            yield line.strip().removeprefix("$ ")


def doc_commands() -> list[tuple[str, str]]:
    out = []
    for path in DOCS:
        for line in _code_lines(path.read_text()):
            if line.split(" ", 1)[0] in ENTRY_POINTS:
                out.append((path.relative_to(ROOT).as_posix(), re.sub(r"\s+#.*$", "", line)))
    return out


COMMANDS = doc_commands()


def test_the_docs_show_commands_of_every_entry_point():
    assert {c.split()[0] for _, c in COMMANDS} == set(ENTRY_POINTS)


def run(argv: list[str], cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    exe = BIN / argv[0]
    assert exe.is_file(), f"{argv[0]} is not installed in {BIN} (pyproject.toml [project.scripts])"
    return subprocess.run([str(exe), *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@functools.lru_cache(maxsize=None)
def help_text(entry: str, sub: tuple[str, ...]) -> str:
    r = run([entry, *sub, "--help"])
    assert r.returncode == 0, f"`{entry} {' '.join(sub)} --help` failed: {r.stderr.strip()[-500:]}"
    return r.stdout


def subcommand(entry: str, args: list[str]) -> tuple[str, ...]:
    """The (nested) subcommand a documented command names: its first word, then each following
    word the help lists as an action of what came before (`latbench shelf build`), not a file."""
    words = [a for a in args if not a.startswith("-")]
    sub = tuple(words[:1])
    for w in words[1:]:
        if not re.search(rf"^\s+{re.escape(w)}\s", help_text(entry, sub), re.M):
            break
        sub += (w,)
    return sub


def _tokens(cmd: str) -> list[str]:
    # "[--cores-all]" marks an optional argument: check it as if given
    return [t.strip("[]") for t in shlex.split(cmd) if t.strip("[]")]


@pytest.mark.parametrize("where,cmd", COMMANDS, ids=[f"{w}: {c}" for w, c in COMMANDS])
def test_doc_command_matches_the_installed_entry_point(where, cmd):
    entry, *args = _tokens(cmd)
    if entry == "leaderboard-train":
        # compose the job's config as Hydra would (a sweep: its first job), without running it
        overrides = [a.split(",")[0] if "=" in a else a for a in args if a != "-m"]
        r = run([entry, "--cfg", "job", *overrides])
        assert r.returncode == 0, f"{where}: `{cmd}` does not compose: {r.stderr.strip()[-800:]}"
        if any(a.startswith("hydra/launcher=") for a in overrides):
            r = run([entry, "--cfg", "hydra", *overrides])
            assert r.returncode == 0, f"{where}: `{cmd}`: the launcher does not compose: {r.stderr.strip()[-800:]}"
        return
    sub = subcommand(entry, args)
    text = help_text(entry, sub)
    for a in args:
        if a.startswith("--"):
            flag = a.split("=", 1)[0]
            assert re.search(rf"(^|[\s\[,]){re.escape(flag)}\b", text, re.M), \
                f"{where}: `{cmd}`: `{entry} {' '.join(sub)}` has no option {flag}"


# ---------------------------------------------------------------- the cheap ones, run in full
def test_latbench_help_scenarios_show_validate_run_as_typed(tmp_path):
    from generators.ir import Graph

    for cmd in ("latbench --help", "latbench scenarios", "latbench scenarios --cores-all"):
        assert any(c == cmd or c.startswith(cmd.split(" [")[0]) for _, c in COMMANDS), cmd
        r = run(shlex.split(cmd))
        assert r.returncode == 0, f"`{cmd}`: {r.stderr.strip()[-800:]}"
        assert r.stdout.strip()
    ir = tmp_path / "models" / "zoo"
    ir.mkdir(parents=True)
    for i in range(2):
        g = Graph(f"doc-{i}", source="zoo")
        x = g.input([1, 3, 16, 16])
        g.set_outputs(g.add("relu", g.add("conv2d", x, out_channels=4 + i, kernel=3, padding=1)))
        g.save(ir / f"{g.model_id}.json")
    files = sorted(str(p) for p in ir.glob("*.json"))
    r = run(["latbench", "validate", *files])  # `latbench validate path/to/*.json`
    assert r.returncode == 0, r.stderr
    r = run(["latbench", "show", files[0]])  # `latbench show data/models/zoo/<id>.json`
    assert r.returncode == 0 and "conv2d" in r.stdout, r.stderr


def test_leaderboard_validate_and_evaluate_run_as_typed(tmp_path, public):
    import pandas as pd

    from leaderboard.tracks import TRACKS, ensure_split, resolve

    track = TRACKS.get("help-nb201-n10")
    data = resolve(track, public)
    split, _ = ensure_split(data, None, write=False)
    rows = []
    for sid in data.scenario_ids:
        by_name = dict(zip(data.measured(sid)["name"], data.measured(sid)["model_id"]))
        for f in split.for_scenario(sid):
            rows += [{"track": track.name, "scenario_id": sid, "model_id": by_name[n], "predicted_ms": 5.0,
                      "fold": f.fold} for n in f.test if n in by_name]  # (its draws are repeated: one row per fold)
    pd.DataFrame(rows).to_csv(tmp_path / "preds.csv", index=False)
    (tmp_path / "meta.yaml").write_text("method: constant five\nauthors: docs test\ncode: https://example.org/constant-five\n"
                                        "training_data: none\nseeds: [0]\nkind: submission\n"
                                        "description: predicts 5 ms for every network\n")
    roots = ["--public", public["public"], "--host", public["host"]]
    for sub in ("validate", "evaluate"):  # `leaderboard validate preds.csv meta.yaml`, `... evaluate ...`
        r = run(["leaderboard", *roots, sub, "preds.csv", "meta.yaml"], cwd=tmp_path)
        assert r.returncode == 0, f"leaderboard {sub}: {r.stderr.strip()[-800:]}"
        assert track.name in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.yaml", "preds.csv"]  # evaluate files nothing


def test_leaderboard_train_sweep_runs_as_typed(tmp_path, public):
    cmd = "leaderboard-train -m predictor=flops,lookup track=help-nb201-n10,help-nb201-n100"
    assert ("docs/leaderboard.md", cmd) in COMMANDS
    r = run([*shlex.split(cmd), f"public={public['public']}", f"host={public['host']}", f"out={tmp_path / 'entries'}",
             f"hydra.sweep.dir={tmp_path / 'multirun'}"], cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    for entry in ("flops", "lookup"):
        assert (tmp_path / "entries" / entry / "metadata.yaml").is_file(), r.stderr[-2000:]
    assert len(list((tmp_path / "multirun").glob("[0-3]"))) == 4  # 2 predictors x 2 tracks


def _fenced(text: str, lang: str, marker: str) -> str:
    """The fenced ``lang`` block of ``text`` that contains ``marker``."""
    for block in re.findall(rf"```{lang}\n(.*?)```", text, re.S):
        if marker in block:
            return block
    raise AssertionError(f"docs/leaderboard.md: no ```{lang} block with {marker!r}")


@pytest.mark.skipif(not (ROOT / "data" / "public" / "e2e.parquet").is_file(),
                    reason="the public data is not imported here (dvc repro import-public): the example reads it")
def test_worked_submission_runs_as_typed(tmp_path):
    """docs/leaderboard.md's worked example: the outside method's script and metadata as shown,
    then its four commands as typed (submit/render pointed at a temporary board, not the repo's)."""
    import pandas as pd

    doc = (ROOT / "docs" / "leaderboard.md").read_text()
    section = doc.split("### A worked example", 1)[1].split("\n### ", 1)[0]
    (tmp_path / "cellcount.py").write_text(_fenced(section, "python", "TRACK = "))
    (tmp_path / "meta.yaml").write_text(_fenced(section, "yaml", "method: cellcount"))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "public").symlink_to(ROOT / "data" / "public")
    (tmp_path / "leaderboard").mkdir()
    (tmp_path / "leaderboard" / "splits").symlink_to(ROOT / "leaderboard" / "splits")
    typed, fenced = [], False
    for line in section.splitlines():  # the indented block outside the fenced ones: what a user types
        if line.strip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("    ") and line.strip():
            typed.append(re.sub(r"\s+#.*$", "", line.strip()))
    assert typed == ["python cellcount.py", "leaderboard validate preds.parquet meta.yaml",
                     "leaderboard submit preds.parquet meta.yaml --name cellcount", "leaderboard render --board"]
    r = subprocess.run([sys.executable, "cellcount.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "9600 predictions" in r.stdout, r.stderr[-2000:]
    preds = pd.read_parquet(tmp_path / "preds.parquet")
    assert sorted(preds["fold"].unique()) == [0, 1, 2] and (preds["predicted_ms"] > 0).all()
    board = ["--results", str(tmp_path / "results")]
    extra = {"submit": ["--submissions", str(tmp_path / "submissions"), *board],
             "render": [*board, "--readme", str(tmp_path / "README.md"), "--site", str(tmp_path / "site")]}
    for cmd in typed[1:]:
        argv = [a for a in shlex.split(cmd) if a != "--board"]  # the committed board's folders -> the temporary one
        r = run(argv + extra.get(argv[1], []), cwd=tmp_path, timeout=600)
        assert r.returncode == 0, f"`{cmd}`: {r.stderr.strip()[-1500:]}"
    assert (tmp_path / "submissions" / "cellcount" / "predictions.parquet").is_file()
    assert (tmp_path / "results" / "help-nb201-n10" / "cellcount.json").is_file()
    readme = (tmp_path / "README.md").read_text()
    assert re.search(r"^\| \d+ \| cellcount \| submission \| ", readme, re.M), readme[:3000]
    assert "cellcount" in (tmp_path / "site" / "index.html").read_text()
