"""How many devices Qualcomm AI Hub's published measurements hold, release by release.

The AI Hub tracks ask for many of today's devices; the source publishes, per release of
quic/ai-hub-models, the profile jobs of that release's hosted devices in
``qai_hub_models/models/<model>/perf.yaml``. This benchmark reads every release tag of a clone of
that repository (a URL is cloned bare into a temporary folder; a local clone or mirror is read in
place) and prints, per release, the perf.yaml files and the devices with at least one
measurement (the list layout of early releases, ``performance_metrics: [{..., reference_device_info:
{name}}]``, and the mapping layout of later ones, ``performance_metrics: {<device>: {<runtime>:
...}}``), then the devices over all releases and the pinned release's (pipelines/dataset/pull.py).
With ``--pulled`` it also runs the importer on a pulled copy of the pinned files and prints the
devices and scenarios the dataset holds.

    python benchmarks/bench_qaihub_devices.py --repo https://github.com/quic/ai-hub-models
    python benchmarks/bench_qaihub_devices.py --repo /path/to/a/mirror.git --pulled external/qai-hub-models
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from foundation.safeload import load_yaml_text  # noqa: E402
from pipelines.dataset.pull import SOURCES  # noqa: E402

MODELS = "qai_hub_models/models/"


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout


def devices_of(doc: object) -> set[str]:
    """The device names with a measurement in one perf.yaml document (either layout)."""
    out: set[str] = set()
    stack = [doc]
    while stack:
        o = stack.pop()
        if isinstance(o, list):
            stack.extend(o)
        elif isinstance(o, dict):
            for k, v in o.items():
                if k == "performance_metrics" and isinstance(v, dict):
                    out.update(str(d) for d, jobs in v.items() if jobs)
                elif k == "performance_metrics" and isinstance(v, list):
                    out.update(str(e["reference_device_info"]["name"]) for e in v
                               if isinstance(e, dict) and isinstance(e.get("reference_device_info"), dict))
                else:
                    stack.append(v)
    return out


def release_devices(repo: str, rev: str) -> tuple[int, set[str]]:
    files = [f for f in _git(repo, "ls-tree", "-r", "--name-only", rev).splitlines()
             if f.startswith(MODELS) and f.endswith("/perf.yaml")]
    # one `git cat-file --batch` for the release's files
    out = subprocess.run(["git", "-C", repo, "cat-file", "--batch"], input="".join(f"{rev}:{f}\n" for f in files).encode(),
                         capture_output=True, check=True).stdout
    devices: set[str] = set()
    at = 0
    for f in files:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        text = out[header_end + 1:header_end + 1 + size].decode()
        at = header_end + 1 + size + 1
        try:
            devices |= devices_of(load_yaml_text(text, f"{rev[:7]}:{f}"))
        except ValueError as e:
            print(f"  {rev[:7]}:{f}: skipped ({str(e).splitlines()[0][:80]})")
    return len(files), devices


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", default=SOURCES["qaihub"].repo, help="a clone, a mirror or a URL (default: the pinned one)")
    ap.add_argument("--pulled", type=Path, help="a pulled copy of the pinned files (python -m pipelines.dataset.pull)")
    args = ap.parse_args(argv)
    pinned = SOURCES["qaihub"].rev
    with tempfile.TemporaryDirectory() as tmp:
        repo = args.repo
        if not Path(repo).exists():
            subprocess.run(["git", "clone", "-q", "--bare", repo, f"{tmp}/repo"], check=True)
            repo = f"{tmp}/repo"
        tags = [t for t in _git(repo, "tag", "--sort=creatordate").splitlines() if t]
        revs = [(t, _git(repo, "rev-list", "-n", "1", t).strip()) for t in tags]
        if pinned not in {r for _, r in revs}:
            revs.append(("(pinned)", pinned))
        union: Counter[str] = Counter()
        print("| release | commit | perf.yaml files | devices measured |\n|---|---|---|---|")
        best = 0
        for tag, rev in revs:
            n, devs = release_devices(repo, rev)
            union.update(devs)
            best = max(best, len(devs))
            mark = " (pinned)" if rev == pinned else ""
            print(f"| {tag}{mark} | {rev[:7]} | {n} | {len(devs)} |")
            if rev == pinned:
                pinned_devs = devs
        print(f"\nreleases: {len(revs)}; the most devices one release measures: {best}; "
              f"the pinned release: {len(pinned_devs)}; device names over all releases: {len(union)}")
        print("names over all releases (releases measuring each):")
        for name, k in sorted(union.items()):
            print(f"  {name}: {k}" + ("" if name in pinned_devs else "  (not in the pinned release)"))
    if args.pulled:
        from pipelines.dataset.qaihub import import_qaihub

        r = import_qaihub({"path": str(args.pulled), "rebuild_ir": False})
        sc = r["scenarios"]
        print(f"\nimporter on {args.pulled}: {sc['device'].nunique()} devices, {len(sc)} scenarios, "
              f"{len(r['e2e'])} measurements, {len(r.problems)} problem lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
