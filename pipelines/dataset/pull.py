"""Bringing the public datasets' files to a checkout: ``python -m pipelines.dataset.pull``.

The public measurements are never part of the project. Each :class:`Source` pins the files the
importers read to a commit of the repository that publishes them, with each file's MD5. For every
source, :func:`pull` makes ``external/<folder>/`` hold its files, trying in order:

1. files already there (a previous pull, or files the user put there): kept as they are;
2. this machine's copy in ``../shared/external/<folder>`` (``LATBENCH_SHARED`` names another
   folder holding ``external/``): linked;
3. ``dvc get`` of each pinned file at the pinned commit, each checked against its MD5, with the
   provenance written to ``external/<folder>/PULLED.json``.

When all three fail, the folder is created holding ``MISSING.txt`` with the reason (later runs
do not fetch again unless ``--retry``, so an offline set-up stays quick): the
import-public stage then skips that dataset and says why, and the leaderboard lists its tracks as
having no data. Nothing fails: a checkout without the public data still runs everything else.

``dvc get``, not ``dvc import``: an import leaves a frozen stage in the workspace, and
``dvc repro`` clones the source repository to verify such a stage on every run, so the main job
would need the network forever (and DVC refuses ``.dvc`` files in the git-ignored ``external/``).
The pins give the same reproducibility: a commit and a checksum per file.

A machine's copy may differ from the repository's files: the copy of the Qualcomm AI Hub
measurements (source ``qaihub``) is re-serialised as YAML and leaves some devices out (its
SOURCE.md), so no perf.yaml of it has the upstream MD5. That source therefore pins both, in
``pins/qai-hub-models.json``: ``md5`` holds the upstream files' MD5s at the pinned commit
(``git show <rev>:<path>``), checked after ``dvc get`` as for every source, and ``copy_md5`` the
files of the machine's copy, checked before it is linked (a copy that is not the pinned one is
not linked; the pull then tries ``dvc get``). Both are the files the importer reads.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from foundation.atomic import write_text

EXTERNAL = Path("external")
MISSING = "MISSING.txt"
PULLED = "PULLED.json"
TIMEOUT_S = 600  # one `dvc get`: a firewall that drops packets must not hang the set-up


@dataclass(frozen=True)
class Source:
    name: str  # the config section (public.<name>)
    folder: str  # under external/ (and ../shared/external/)
    repo: str
    rev: str
    gets: tuple[tuple[str, str], ...]  # (file or folder in the repository, where it goes under the folder)
    md5: tuple[tuple[str, str], ...]  # (file under the folder, its MD5): every file the importer reads
    present: tuple[str, ...]  # any of these under the folder (a path, or a glob pattern) means the dataset is there
    # (file under the folder, its MD5) of this machine's copy where it differs from the repository's
    # files (re-serialised): checked before the copy is linked; empty: the copy is not checked
    copy_md5: tuple[tuple[str, str], ...] = ()

    def missing_reason(self, folder: Path) -> str | None:
        """Why ``folder`` holds no data of this source, or None when it does."""
        if any(next(folder.glob(p), None) is not None if "*" in p else (folder / p).exists() for p in self.present):
            return None
        note = folder / MISSING
        if note.is_file():
            return note.read_text(encoding="utf-8", errors="replace").strip().splitlines()[0]
        return f"{folder}: none of {', '.join(self.present)} found"

    def copy_fault(self, copy: Path) -> str | None:
        """Why ``copy`` is not the pinned copy (a file of ``copy_md5`` missing or different), or None."""
        for name, md5 in self.copy_md5:
            got = _md5(copy / name) if (copy / name).is_file() else "no such file"
            if got != md5:
                return f"{name}: MD5 {got}, pinned {md5}"
        return None


_USC = "https://github.com/qed-usc/mobile-ml-benchmark"
_HELP = "https://github.com/HayeonLee/HELP"
_HELP_LATENCY = (  # device -> md5 of data/nasbench201/latency/<device>.pt
    ("1080ti_1", "e54939c91b51c8b1c50d2235647ff9ad"), ("1080ti_256", "afc408e4983cd154086f464022bfb692"),
    ("1080ti_32", "f7932cada482eea72f33986a488ed678"), ("2080ti_1", "27981dc24fd9a40d13dcd658f104fd11"),
    ("2080ti_256", "d68a23f24d1808d05adee376165af206"), ("2080ti_32", "ad5cd1cecbf2532011c12546a939e33f"),
    ("essential_ph_1", "a5fe05a6651337078abb47f85232668a"), ("eyeriss", "32a655466f2c801fbc7a9435edea2613"),
    ("fpga", "3f1a4d0e388928c3984e10f574bd804a"), ("gold_6226", "fcae818653f6b7dc13196a504a490ecc"),
    ("gold_6240", "510df549512218415c4c801a4242c020"), ("pixel2", "46e8d0c1b21acf81de93116b49311f79"),
    ("pixel3", "126e1e5bedf6cc3cb5989e5a9e014517"), ("raspi4", "86ec834451a6dacb9d5689e5feeac955"),
    ("samsung_a50", "254adb39ef708203f5b31c334878f5c8"), ("samsung_s7", "5291a03875603103c77701f32db52b6a"),
    ("silver_4114", "5eaaa86a29600eeedd469f7d63f00c1b"), ("silver_4210r", "aeabb9a4fd074959a2611cbe4b08ea78"),
    ("titan_rtx_1", "9bfa1db2e6790651c2d7794bf0f7650d"), ("titan_rtx_256", "cd9d0793c3a9aece1304f12ff5610afc"),
    ("titan_rtx_32", "1656c61ff4ef08d1821f0dea8196d000"), ("titanx_1", "ab6eb40019db7914966bdf526be6188c"),
    ("titanx_256", "0eba830a17e2070894e8fa89d65c28e6"), ("titanx_32", "e84db5d240ee8cfb11f3fc258fa6a132"),
    ("titanxp_1", "1268ab2cef0b0a7d1ddc66536768460c"), ("titanxp_256", "8c2b696c4b1732328489d6f69688c3df"),
    ("titanxp_32", "8baf0fbdb9c48483fea895f8d9c0d3a6"),
)

PINS = Path(__file__).resolve().with_name("pins")  # per-file MD5s of the sources with many files


def _pinned(name: str, folder: str, gets: tuple[tuple[str, str], ...], present: tuple[str, ...]) -> Source:
    """A source whose commit and MD5s are in ``pins/<folder>.json`` (``upstream``: the repository's
    files at ``rev``; ``copy``: this machine's copy, where it differs)."""
    pins = json.loads((PINS / f"{folder}.json").read_text(encoding="utf-8"))
    return Source(name, folder, pins["repo"], pins["rev"], gets=gets, md5=tuple(sorted(pins["upstream"].items())),
                  present=present, copy_md5=tuple(sorted(pins.get("copy", {}).items())))


SOURCES = {s.name: s for s in (
    Source("usc", "usc-mobile-ml-benchmark", _USC, "40ba833a9ca560a3035a76a5c3da504082dec001",
           gets=tuple((f"dataset/{f}", f) for f in ("tflite_cnn_e2e.csv", "torch_cnn_e2e.csv",
                                                     "tflite_cnn_ops_gpu.csv", "torch_cnn_ops_gpu.csv")),
           md5=(("tflite_cnn_e2e.csv", "bdc64dcba86ebe436012c51abc897380"),
                ("torch_cnn_e2e.csv", "fd436802960c6facfa2b4b297672f609"),
                ("tflite_cnn_ops_gpu.csv", "2451db4aadc7ffef0a736268afc91aa2"),
                ("torch_cnn_ops_gpu.csv", "452fca00426d4060a5f329c7fbd2a380")),
           present=("cnn_real_e2e_tflite.csv", "cnn_real_e2e_torch.csv", "tflite_cnn_e2e.csv", "torch_cnn_e2e.csv")),
    Source("help", "help-nasbench201", _HELP, "45f70eb92d0d735970a33b608d1544ad3c52f285",
           gets=(("data/nasbench201/latency", "latency"), ("data/nasbench201/str_arch2idx.pt", "str_arch2idx.pt")),
           md5=(*((f"latency/{d}.pt", m) for d, m in _HELP_LATENCY),
                ("str_arch2idx.pt", "763623ed70a07c73195d25da4bf4c38e")),
           present=("latency.csv", "latency")),
    # Qualcomm AI Hub's published measurements: one perf.yaml per model folder (the copy's layout:
    # <model>/perf.yaml; pulled: the repository's qai_hub_models/models/<model>/perf.yaml)
    _pinned("qaihub", "qai-hub-models", gets=(("qai_hub_models/models", "qai_hub_models/models"), ("LICENSE", "LICENSE")),
            present=("*/perf.yaml", "qai_hub_models/models/*/perf.yaml")),
)}


def shared_external() -> Path:
    """This machine's copies of the public data: ``$LATBENCH_SHARED/external``, else ../shared/external."""
    shared = os.environ.get("LATBENCH_SHARED")
    return Path(shared) / "external" if shared else Path.cwd().parent / "shared" / "external"


def _md5(path: Path) -> str:
    h = hashlib.md5()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _dvc() -> str:
    beside = Path(sys.executable).with_name("dvc")  # the venv's own dvc
    return str(beside) if beside.is_file() else (shutil.which("dvc") or "dvc")


def _get(src: Source, repo: str, rev: str, root: Path) -> None:
    """``dvc get`` the pinned files into a temporary folder, check every MD5, then move them in."""
    folder = root / src.folder
    with tempfile.TemporaryDirectory(prefix=".pull-", dir=root) as tmp_name:
        tmp = Path(tmp_name).resolve()
        for path, dest in src.gets:
            out = tmp / dest
            out.parent.mkdir(parents=True, exist_ok=True)
            what = f"`dvc get {repo} {path} --rev {rev[:7]}`"
            try:
                proc = subprocess.run([_dvc(), "get", repo, path, "--rev", rev, "-o", str(out)],
                                      capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"{what} took over {TIMEOUT_S} s") from None
            if proc.returncode != 0:
                lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
                raise RuntimeError(f"{what} failed: {_short(lines[-1] if lines else f'exit status {proc.returncode}')}")
        for dest, md5 in src.md5:
            got = _md5(tmp / dest) if (tmp / dest).is_file() else "no such file"
            if got != md5:
                raise RuntimeError(f"{repo}@{rev[:7]}: {dest}: MD5 {got}, pinned {md5}: not the pinned file")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / MISSING).unlink(missing_ok=True)
        for dest, _ in src.md5:
            (folder / dest).parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / dest, folder / dest)
    record = {"repo": repo, "rev": rev, "files": dict(src.md5), "md5_of": "the repository's files at rev"}
    write_text(folder / PULLED, json.dumps(record, indent=1) + "\n")


def _short(text: str, limit: int = 200) -> str:
    """One line of at most ``limit`` characters, keeping the end (where the cause is)."""
    s = " ".join(text.split())
    return s if len(s) <= limit else s[: limit // 2] + " ... " + s.rsplit(": ", 1)[-1][-(limit // 2):]


def pull(names: list[str] | None = None, root: Path = EXTERNAL, shared: Path | None = None,
         repos: dict[str, str] | None = None, fetch: bool = True, retry: bool = False,
         sources: Mapping[str, Source] = SOURCES) -> dict[str, str]:
    """Make ``root/<folder>`` hold each named source's files (all sources when ``names`` is None).
    ``repos`` maps a source name to another repository (a mirror, or ``URL@REV`` for another
    commit); ``fetch=False`` never runs ``dvc get``, and neither does a source whose folder holds
    the MISSING.txt of an earlier failed attempt, unless ``retry``. Returns ``{name: what happened}``: "present",
    "linked <path>", "pulled <repo>@<rev>" or "missing: <reason>" (then MISSING.txt holds it)."""
    shared = shared_external() if shared is None else shared
    root.mkdir(parents=True, exist_ok=True)
    out: dict[str, str] = {}
    for name in names or list(sources):
        src = sources[name]
        folder = root / src.folder
        if src.missing_reason(folder) is None:
            out[name] = "present"
            continue
        copy = shared / src.folder
        no_copy = f"no copy at {copy}"
        if copy.is_dir() and src.missing_reason(copy) is None:
            fault = src.copy_fault(copy)
            if fault is None:
                if folder.is_symlink() or folder.is_dir():
                    shutil.rmtree(folder) if folder.is_dir() and not folder.is_symlink() else folder.unlink()
                folder.symlink_to(os.path.relpath(copy.resolve(), root.resolve()))
                out[name] = f"linked {copy}"
                continue
            no_copy = f"the copy at {copy} is not the pinned one ({fault})"
        repo, _, rev = (repos or {}).get(name, src.repo).partition("@")
        rev = rev or src.rev
        earlier = folder / MISSING
        if earlier.is_file() and not retry:
            out[name] = f"missing: {src.missing_reason(folder)} (an earlier attempt; --retry tries again)"
            continue
        if not fetch:
            reason = f"{no_copy}, and fetching is off"
        else:
            try:
                _get(src, repo, rev, root)
                out[name] = f"pulled {repo}@{rev[:7]}"
                continue
            except (RuntimeError, OSError) as e:
                reason = f"{no_copy}, and {e}"
        folder.mkdir(parents=True, exist_ok=True)
        write_text(folder / MISSING, f"{reason}\n")
        out[name] = f"missing: {reason}"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m pipelines.dataset.pull",
        description="Bring the public datasets' files into external/: keep what is there, link this "
                    "machine's copy (../shared/external or $LATBENCH_SHARED/external), else `dvc get` "
                    "the pinned commit's files and check their MD5s. A dataset that cannot be had is "
                    "skipped by import-public, which says why (docs/dataset.md).")
    ap.add_argument("names", nargs="*", metavar="NAME",
                    help=f"sources to pull (default: all: {', '.join(SOURCES)})")
    ap.add_argument("--from", dest="repos", action="append", default=[], metavar="NAME=URL[@REV]",
                    help="pull NAME from another repository (a mirror; @REV: another commit)")
    ap.add_argument("--no-fetch", action="store_true", help="never run `dvc get`: keep or link only")
    ap.add_argument("--retry", action="store_true",
                    help="run `dvc get` again for a source whose earlier attempt failed (its MISSING.txt)")
    args = ap.parse_args(argv)
    bad = [n for n in args.names if n not in SOURCES]
    if bad:
        ap.error(f"unknown public dataset {bad[0]!r} (known: {', '.join(SOURCES)})")
    repos = {}
    for item in args.repos:
        name, eq, url = item.partition("=")
        if not eq or name not in SOURCES or not url:
            ap.error(f"--from {item!r}: expected NAME=URL[@REV] with NAME one of {', '.join(SOURCES)}")
        repos[name] = url
    for name, what in pull(args.names or None, repos=repos, fetch=not args.no_fetch, retry=args.retry).items():
        print(f"public data {name}: {what}" + (" (import-public skips it)" if what.startswith("missing") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
