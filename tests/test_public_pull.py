"""A checkout gets the public data by itself, or runs without it (pipelines/dataset/pull.py).

The pull is exercised with the real ``dvc get`` against a Git repository made here (a source
pinned to its commit and its files' MD5s), so no network is needed: files that match their pins
land with PULLED.json; a file that does not match, or a repository that cannot be reached,
leaves MISSING.txt with a one-line reason, quickly. Then import-public skips such a dataset and
says why, and the leaderboard's tracks on it say why they have no data.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.config import compose, write_params
from pipelines.dataset.pull import MISSING, PULLED, SOURCES, Source, pull

ROOT = Path(__file__).resolve().parents[1]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def source_repo(tmp_path_factory) -> tuple[Path, str, dict[str, bytes]]:
    """A Git repository holding a file and a folder, as a public dataset's repository would."""
    repo = tmp_path_factory.mktemp("source-repo")
    files = {"dataset/e2e.csv": b"model,pixel4|1large|float|mean\nm,1234\n",
             "data/latency/a.pt": b"not really a tensor", "data/latency/b.pt": b"another"}
    for path, data in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(data)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "data")
    return repo, _git(repo, "rev-parse", "HEAD"), files


def _source(repo: Path, rev: str, files: dict[str, bytes], md5=None) -> Source:
    md5 = md5 or {"e2e.csv": hashlib.md5(files["dataset/e2e.csv"]).hexdigest(),
                  "latency/a.pt": hashlib.md5(files["data/latency/a.pt"]).hexdigest(),
                  "latency/b.pt": hashlib.md5(files["data/latency/b.pt"]).hexdigest()}
    return Source("toy", "toy-data", str(repo), rev, gets=(("dataset/e2e.csv", "e2e.csv"), ("data/latency", "latency")),
                  md5=tuple(md5.items()), present=("e2e.csv",))


def test_pull_gets_the_pinned_files_with_dvc(tmp_path, source_repo):
    repo, rev, files = source_repo
    src = _source(repo, rev, files)
    got = pull(root=tmp_path / "external", shared=tmp_path / "no-shared", sources={"toy": src})
    assert got == {"toy": f"pulled {repo}@{rev[:7]}"}
    folder = tmp_path / "external" / "toy-data"
    assert (folder / "e2e.csv").read_bytes() == files["dataset/e2e.csv"]
    assert (folder / "latency" / "b.pt").read_bytes() == files["data/latency/b.pt"]
    record = json.loads((folder / PULLED).read_text())
    assert record["repo"] == str(repo) and record["rev"] == rev and set(record["files"]) == {
        "e2e.csv", "latency/a.pt", "latency/b.pt"}
    assert not (folder / MISSING).exists() and not list((tmp_path / "external").glob(".pull-*"))
    # a second pull keeps what is there
    assert pull(root=tmp_path / "external", shared=tmp_path / "no-shared", sources={"toy": src}) == {"toy": "present"}


def test_a_file_that_is_not_the_pinned_one_is_refused(tmp_path, source_repo):
    repo, rev, files = source_repo
    src = _source(repo, rev, files, md5={"e2e.csv": "0" * 32})
    got = pull(root=tmp_path / "external", shared=tmp_path / "no-shared", sources={"toy": src})["toy"]
    assert got.startswith("missing: ") and f"e2e.csv: MD5 {hashlib.md5(files['dataset/e2e.csv']).hexdigest()}, " \
        f"pinned {'0' * 32}" in got
    folder = tmp_path / "external" / "toy-data"
    assert sorted(p.name for p in folder.iterdir()) == [MISSING]  # nothing unchecked is left
    assert "not the pinned file" in (folder / MISSING).read_text()


def test_unreachable_source_is_one_line_quickly_and_not_retried(tmp_path, source_repo):
    repo, rev, files = source_repo
    src = _source(tmp_path / "no-such-repo", rev, files)
    t0 = time.monotonic()
    got = pull(root=tmp_path / "external", shared=tmp_path / "no-shared", sources={"toy": src})["toy"]
    assert time.monotonic() - t0 < 60
    assert got.startswith(f"missing: no copy at {tmp_path / 'no-shared' / 'toy-data'}, and `dvc get ") and "\n" not in got
    reason = (tmp_path / "external" / "toy-data" / MISSING).read_text().strip()
    assert "\n" not in reason and len(reason) < 700
    # the next set-up does not try again (an offline machine stays quick) unless asked
    again = pull(root=tmp_path / "external", shared=tmp_path / "no-shared", sources={"toy": src})["toy"]
    assert again == f"missing: {reason} (an earlier attempt; --retry tries again)"
    fixed = _source(repo, rev, files)
    assert pull(root=tmp_path / "external", shared=tmp_path / "no-shared", sources={"toy": fixed}, retry=True) == \
        {"toy": f"pulled {repo}@{rev[:7]}"}


def test_this_machines_copy_is_linked(tmp_path, source_repo):
    repo, rev, files = source_repo
    copy = tmp_path / "shared" / "external" / "toy-data"
    copy.mkdir(parents=True)
    (copy / "e2e.csv").write_text("x\n")
    (tmp_path / "external" / "toy-data").mkdir(parents=True)
    (tmp_path / "external" / "toy-data" / MISSING).write_text("an earlier attempt failed\n")
    got = pull(root=tmp_path / "external", shared=tmp_path / "shared" / "external",
               sources={"toy": _source(repo, rev, files)})
    assert got == {"toy": f"linked {copy}"}
    link = tmp_path / "external" / "toy-data"
    assert link.is_symlink() and (link / "e2e.csv").read_text() == "x\n"


def test_the_command_names_what_is_missing(tmp_path):
    """`python -m pipelines.dataset.pull` in a folder with no copy beside it and --no-fetch."""
    proc = subprocess.run([sys.executable, "-m", "pipelines.dataset.pull", "--no-fetch"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env={**_env(), "LATBENCH_SHARED": str(tmp_path / "none")})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines] == [f"public data {n}" for n in SOURCES]
    assert all(ln.endswith("fetching is off (import-public skips it)") for ln in lines), lines
    bad = subprocess.run([sys.executable, "-m", "pipelines.dataset.pull", "nope"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env=_env())
    assert bad.returncode == 2 and "unknown public dataset 'nope'" in bad.stderr


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_import_public_skips_what_was_not_pulled_and_the_board_says_why(tmp_path):
    """No public data at all: the stage exits 0, names what it skipped, writes no tables, and a
    public track is unavailable with that reason."""
    ext = tmp_path / "external"
    pull(root=ext, shared=tmp_path / "none", fetch=False)
    raw = compose([f"data_dir={tmp_path / 'data'}", f"public.usc.path={ext / 'usc-mobile-ml-benchmark'}",
                   f"public.help.path={ext / 'help-nasbench201'}", f"public.qaihub.path={ext / 'qai-hub-models'}"])
    params = tmp_path / "params.yaml"
    write_params(raw, params)
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "import-public", "--params", str(params), "-q"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [ln for ln in lines if ln.startswith("import-public: ")] == [
        f"import-public: skipped usc: no copy at {tmp_path / 'none' / 'usc-mobile-ml-benchmark'}, and fetching is off",
        f"import-public: skipped help: no copy at {tmp_path / 'none' / 'help-nasbench201'}, and fetching is off",
        f"import-public: skipped qaihub: no copy at {tmp_path / 'none' / 'qai-hub-models'}, and fetching is off"]
    out = tmp_path / "data" / "public"
    assert not list(out.glob("*.parquet"))
    assert set(json.loads((out / "SKIPPED.json").read_text())) == {"usc", "help", "qaihub"}

    from leaderboard.tracks import TRACKS, Unavailable, resolve

    r = resolve(TRACKS.get("usc-real-kfold"), {"public": str(out)})
    assert isinstance(r, Unavailable)
    assert r.reason == f"no public data: import-public skipped help, qaihub, usc ({out / 'SKIPPED.json'} says why)"


def test_entries_on_tracks_without_data_here_are_not_rejected(tmp_path):
    """A committed baseline entry covering public tracks, scored on a checkout without the public
    data: nothing rejected, no result for those tracks, and the status says why they are missing."""
    from leaderboard.cli import main as leaderboard

    (tmp_path / "public").mkdir()
    (tmp_path / "public" / "SKIPPED.json").write_text('{"usc": "not pulled", "help": "not pulled"}\n')
    entries = tmp_path / "entries"
    entries.mkdir()
    (entries / "flops").symlink_to(ROOT / "leaderboard" / "entries" / "public" / "flops")
    results = tmp_path / "results"
    assert leaderboard(["--public", str(tmp_path / "public"), "evaluate", "--entries", str(entries),
                        "--results", str(results)]) == 0
    assert json.loads((results / "rejected.json").read_text()) == {}
    assert not list(results.glob("*/flops.json"))
    status = json.loads((results / "status.json").read_text())
    assert status["usc-real-kfold"]["available"] is False
    assert status["usc-real-kfold"]["reason"] == \
        f"no public data: import-public skipped help, usc ({tmp_path / 'public' / 'SKIPPED.json'} says why)"
