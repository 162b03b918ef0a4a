"""The dataset release that travels with the project: ``datasets/<name>-v<N>/``.

``python -m pipelines.release`` (the last step of ``scripts/release_sweep.sh``; never the main
job, whose ``data/dataset`` also holds its own tour's scenarios) copies the assembled tables (``data/dataset``: compact zstd parquet) and
the card into a committed folder with ``RELEASE.json`` (name, version, when, the pairs it
holds per scenario, sizes). ``load_dataset("datasets/host-v1")`` reads it like any dataset.

On another machine the release is what has landed: the measure stage does not measure a
(model, scenario) pair the release already holds (``measure.reuse_release: false`` measures
them again, an explicit choice), and ``assemble`` takes the released rows of pairs it has no
local record of, so a sweep stopped part-way continues elsewhere without measuring a pair
twice. Every released e2e row carries its provenance (host, runtime version, the machine's
load while it ran, the record it came from).

    python -m pipelines.release [--params params.yaml]     # data/dataset -> ${measure.release}
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"^(?P<name>[a-z0-9][a-z0-9_-]*?)-v(?P<version>\d+)$")
MANIFEST = "RELEASE.json"
CHANGES = "CHANGES.md"  # a release's history (what each session measured), carried from version to version
LIMIT_BYTES = 100 * 2**20  # a release is committed to git: it must stay well under this


class ReleaseError(ValueError):
    """A release folder that cannot be written or read; one line naming the path."""


def resolve(path: str | Path) -> Path:
    """A release path as configured (relative paths are relative to the project root)."""
    p = Path(path)
    return p if p.is_absolute() else ROOT / p


def parse_name(folder: Path) -> tuple[str, int]:
    m = NAME.match(folder.name)
    if not m:
        raise ReleaseError(f"{folder}: a release folder is named <name>-v<N>, e.g. host-v1")
    return m["name"], int(m["version"])


# what every released e2e row must have recorded to count as measured under the current
# protocol: the speed probe's verdict (rows from before the probe ran unseen through the VM's
# slow episodes); each runner adds its own columns (Runner.protocol_columns)
PROTOCOL_COLUMNS = ("probe_slowdown",)


def reused_pairs(measure: Any) -> set[tuple[str, str]]:
    """The released pairs a sweep with these ``measure`` settings does not measure again: none
    when ``reuse_release`` is false; with ``remeasure_outdated``, only those measured under the
    current protocol (:func:`released_pairs`); else every released pair."""
    if not measure.reuse_release:
        return set()
    s = measure.stopping
    return released_pairs(measure.release, current_only=measure.remeasure_outdated,
                          max_processes=s.max_processes if s.policy == "adaptive" else None)


def protocol_columns(folder: Path) -> dict[str, tuple[str, ...]]:
    """scenario_id -> the e2e columns its rows must have recorded to be current: the suite's
    and its runner's (the release's scenarios table says which runner; none known: the suite's)."""
    from .runners import runner_for

    path = folder / "scenarios.parquet"
    if not path.is_file():
        return {}
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=["scenario_id", "framework", "accelerator"]).to_pylist()
    out = {}
    for r in t:
        runner = runner_for(str(r["framework"]), str(r["accelerator"]))
        out[str(r["scenario_id"])] = PROTOCOL_COLUMNS + (runner.protocol_columns if runner else ())
    return out


def released_pairs(release: str | Path | None, current_only: bool = False,
                   max_processes: int | None = None) -> set[tuple[str, str]]:
    """(model_id, scenario_id) of every e2e row of the release (empty if there is none).
    ``current_only``: only the rows measured under the current protocol, i.e. with every
    column of :func:`protocol_columns` recorded and, given the current adaptive stopping's
    ``max_processes``, not given up on below it (a row whose median's interval was still wide
    when it reached a smaller cap is one the current protocol would have gone on measuring).
    The others (measured before the speed probe existed, PyTorch rows from before its workers
    ran on jemalloc, rows left unsettled by a smaller cap) count as not released: a release
    sweep measures them again (``measure.remeasure_outdated``), and the fresh rows replace them
    at assemble."""
    if not release:
        return set()
    folder = resolve(release)
    path = folder / "e2e.parquet"
    if not path.is_file():
        return set()
    import pyarrow.parquet as pq

    names = set(pq.read_schema(path).names)
    required = protocol_columns(folder) if current_only else {}
    wanted = {*PROTOCOL_COLUMNS, *(c for cols in required.values() for c in cols)} if current_only else set()
    capped = current_only and max_processes is not None and {"stop_reason", "processes"} <= names
    wanted |= {"stop_reason", "processes"} if capped else set()
    rows = pq.read_table(path, columns=["model_id", "scenario_id", *sorted(wanted & names)]).to_pylist()

    def current(r: dict[str, Any]) -> bool:
        # a column the release lacks is one no row of it recorded; NaN is empty as null is
        cols = required.get(r["scenario_id"], PROTOCOL_COLUMNS)
        if not all(c in names and r[c] is not None and r[c] == r[c] for c in cols):
            return False
        return not (capped and r["stop_reason"] == "max_processes" and r["processes"] < max_processes)

    return {(r["model_id"], r["scenario_id"]) for r in rows if not current_only or current(r)}


def processors(scenarios: Any) -> dict[str, dict[str, list[str]]]:
    """device -> processor (the scenarios table's ``soc``) -> its scenario ids."""
    out: dict[str, dict[str, list[str]]] = {}
    for dev, soc, sid in zip(scenarios["device"], scenarios["soc"], scenarios["scenario_id"]):
        out.setdefault(str(dev), {}).setdefault(str(soc), []).append(str(sid))
    return out


def check_one_machine(scenarios: Any, where: Path) -> None:
    """A release holds one machine's measurements per device name: the sessions of a sweep may
    land on machines of other processors (the project's VM has been an AMD EPYC and an Intel
    Xeon with AMX, whose latencies differ by far more than a sweep's noise, and differently per
    precision: datasets/host-xeon-v1/CHANGES.md), and rows of two processors under one device
    would make every comparison across scenarios (int8 over fp32, two cores over one) a
    comparison of machines."""
    for dev, socs in processors(scenarios).items():
        if len(socs) > 1:
            what = "; ".join(f"{soc}: {', '.join(sorted(sids)[:3])}" for soc, sids in sorted(socs.items()))
            raise ReleaseError(f"{where}: device {dev!r} ran on {len(socs)} processors ({what}); a release "
                               f"holds one machine's measurements (measure on a machine like the release's, "
                               f"or start a release of this machine's own)")


def release_processors(folder: Path, device: str) -> set[str]:
    """The processors a release folder's ``device`` rows were measured on (empty: no such rows,
    or no scenarios table yet)."""
    path = folder / "scenarios.parquet"
    if not path.is_file():
        return set()
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=["device", "soc"]).to_pandas()
    return {str(s) for s in t.loc[t["device"] == device, "soc"].dropna()}


def machine_mismatch(release: str | Path | None, device: str, processor: str) -> str | None:
    """Why this machine (``device`` name, ``processor``: its cpu_model) may not add to the
    release, or None: the release's rows of that device were measured on another processor."""
    socs = sorted(release_processors(resolve(release), device)) if release else []
    if socs and processor not in socs:
        return (f"{resolve(release) / 'scenarios.parquet'}: the release's {device!r} rows were measured on "
                f"{', '.join(socs)}; this machine is {processor}: its measurements would not compare with them")
    return None


def processor_slug(processor: str) -> str:
    """A short name for a processor, for a new release's folder: "AMD EPYC" -> "epyc",
    "Intel(R) Xeon(R) Processor" -> "xeon" (vendor words, trademarks and "processor" dropped)."""
    words = re.sub(r"\((r|tm|c)\)", " ", processor.lower()).replace("@", " ").split()
    keep = [re.sub(r"[^a-z0-9]+", "-", w).strip("-") for w in words if w not in _VENDOR_WORDS]
    return "-".join(w for w in keep if w)[:24].strip("-") or "cpu"


_VENDOR_WORDS = {"intel", "amd", "arm", "processor", "cpu", "cpus", "core", "with", "radeon", "graphics"}


def release_for_machine(device: str, processor: str, root: str | Path = "datasets") -> Path:
    """The release this machine adds to: the newest one under ``root`` whose ``device`` rows were
    measured on ``processor``, else a new ``<device>-<processor slug>-v1``. The project's VM has
    been an AMD EPYC and an Intel Xeon; each processor's sweep sessions grow a release of its
    own (``check_one_machine``), so a session on either continues where the last one on the same
    processor stopped."""
    base = resolve(root)
    mine: list[tuple[int, Path]] = []
    for folder in sorted(base.glob("*-v*")):
        if NAME.match(folder.name) and release_processors(folder, device) == {processor}:
            mine.append((parse_name(folder)[1], folder))
    if mine:
        return max(mine)[1]
    name = f"{device}-{processor_slug(processor)}"
    version = 1
    while (base / f"{name}-v{version}" / "scenarios.parquet").is_file():  # another processor's, same slug
        version += 1
    return base / f"{name}-v{version}"


def probe_references(measurements: Path) -> dict[str, dict[str, float]]:
    """Device -> CPU -> the speed-probe reference (seconds) the kept processes under
    ``measurements`` (``<device>/<scenario>/<model>.json``) were judged against: the median over
    processes of each one's reference on that CPU (pipelines/speed_probe.py). Empty where no
    record ran the probe."""
    import statistics

    seen: dict[str, dict[str, list[float]]] = {}
    for rec in measurements.glob("*/*/*.json"):
        if rec.name.count(".") != 1 or rec.name == "SCENARIO.json":  # traces, errors, the status file
            continue
        try:
            procs = json.loads(rec.read_text()).get("e2e", {}).get("per_process", [])
        except (OSError, ValueError):
            continue
        for p in procs:
            best = ((p.get("load") or {}).get("probe") or {}).get("best_s") or {}
            for cpu, s in best.items():
                seen.setdefault(rec.parent.parent.name, {}).setdefault(str(cpu), []).append(float(s))
    return {dev: {cpu: statistics.median(v) for cpu, v in sorted(cpus.items())} for dev, cpus in sorted(seen.items())}


def probe_reference(release: str | Path | None, device: str) -> dict[int, float]:
    """CPU -> seconds: the speed-probe reference of the release's ``device`` rows (empty: none)."""
    path = resolve(release) / MANIFEST if release else None
    if not path or not path.is_file():
        return {}
    refs = json.loads(path.read_text()).get("probe_reference_s", {}).get(device, {})
    return {int(cpu): float(s) for cpu, s in refs.items()}


def write_release(dataset_dir: str | Path, release_dir: str | Path) -> dict:
    """Copy the assembled tables and card of ``dataset_dir`` into ``release_dir`` (replaced
    whole, atomically) with its manifest; returns the manifest."""
    from .dataset import TABLES
    from .dataset.load import load_dataset

    src, out = Path(dataset_dir), resolve(release_dir)
    name, version = parse_name(out)
    ds = load_dataset(src)  # checked against the schema before anything is written
    check_one_machine(ds.scenarios, out)
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for t in TABLES:
        if (src / f"{t}.parquet").is_file():
            shutil.copyfile(src / f"{t}.parquet", tmp / f"{t}.parquet")
    for extra in ("DATASET.md", "failures.csv"):
        if (src / extra).is_file():
            shutil.copyfile(src / extra, tmp / extra)
    for png in src.glob("*.png"):
        shutil.copyfile(png, tmp / png.name)
    # the control set's history (pipelines/control.py) and the retest's rows (pipelines/retest.py)
    # are appended in the release itself, session after session: they are not in the assembled
    # tables, so carry them over, and the card states what they show (how far the instrument
    # moved between sessions; how far a released label moves when measured again)
    if (out / CHANGES).is_file():  # the release's history, written by hand: kept as it is
        shutil.copyfile(out / CHANGES, tmp / CHANGES)
    card = tmp / "DATASET.md"
    for history, section in _histories():
        if (out / history).is_file():
            shutil.copyfile(out / history, tmp / history)
            if card.is_file():
                card.write_text(card.read_text().rstrip("\n") + "\n\n" + section(tmp / history, ds))
    size = sum(p.stat().st_size for p in tmp.iterdir())
    if size > LIMIT_BYTES:
        shutil.rmtree(tmp)
        raise ReleaseError(f"{out}: {size / 2**20:.1f} MB, over the {LIMIT_BYTES // 2**20} MB a committed release may take")
    e = ds.e2e
    manifest = {"name": name, "version": version, "created_unix": int(time.time()),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "from": str(src),
                "bytes": size, "rows": {t: len(ds.tables()[t]) for t in TABLES},
                "pairs_per_scenario": {str(k): int(v) for k, v in e.groupby("scenario_id").size().items()},
                "hosts": sorted(str(h) for h in e["host"].dropna().unique()) if "host" in e else [],
                # device -> the processor its rows were measured on (one per device: check_one_machine)
                "processors": {dev: sorted(socs) for dev, socs in processors(ds.scenarios).items()},
                # device -> CPU -> the speed probe's reference of its records: the next session
                # on this processor starts from it (a session in a slow phase must not judge
                # against its own speed); a device without local records keeps the old one
                "probe_reference_s": {**_old_manifest(out).get("probe_reference_s", {}),
                                      **probe_references(src.parent / "measurements")}}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    old = out.with_name(f".{out.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    return manifest


def _histories() -> list[tuple[str, Callable[[Path, Any], str]]]:
    """(file kept in the release, its section of the card from the file and the dataset)."""
    from . import control, retest

    return [(control.HISTORY, lambda path, ds: control.drift_markdown(control.drift(control.read_history(path)))),
            (retest.HISTORY, lambda path, ds: retest.retest_markdown(retest.compare(control.read_history(path),
                                                                                   ds.e2e)))]


def _old_manifest(folder: Path) -> dict:
    return json.loads((folder / MANIFEST).read_text()) if (folder / MANIFEST).is_file() else {}


def main(argv: list[str] | None = None) -> int:
    from .config import ConfigError, load_params

    p = argparse.ArgumentParser(prog="python -m pipelines.release", description=__doc__.split("\n\n")[0])
    p.add_argument("--params", default=str(ROOT / "params.yaml"))
    p.add_argument("--dataset", default=None, help="assembled dataset folder (default: <data_dir>/dataset)")
    p.add_argument("--check-machine", action="store_true",
                   help="write nothing: exit 2 if this machine's processor is not the one the release's rows of "
                        "the configured device were measured on (the release sweep runs it before measuring)")
    p.add_argument("--for-this-machine", action="store_true",
                   help="write nothing: print the release folder this machine's processor adds to (the newest "
                        "release of the configured device measured on it, else a new <device>-<processor>-v1)")
    args = p.parse_args(argv)
    try:
        cfg = load_params(args.params)
        if not cfg.measure.release:
            raise ReleaseError("measure.release: empty, no release folder to write")
        if args.check_machine or args.for_this_machine:
            from .devices import make_device

            dev = make_device(cfg.device)
            processor = str(dev.describe().get("cpu_model"))
            if args.for_this_machine:
                print(release_for_machine(dev.name, processor).relative_to(ROOT))
                return 0
            why = machine_mismatch(cfg.measure.release, dev.name, processor)
            if why:
                raise ReleaseError(why)
            return 0
        m = write_release(args.dataset or Path(cfg.data_dir) / "dataset", cfg.measure.release)
    except (ConfigError, ReleaseError, FileNotFoundError) as e:
        print(f"latbench: error: {e}", file=sys.stderr)
        return 2
    print(f"release {m['name']}-v{m['version']}: {m['rows']['e2e']} e2e rows in "
          f"{len(m['pairs_per_scenario'])} scenarios, {m['bytes'] / 2**20:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
