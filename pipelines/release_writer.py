"""Writing a dataset release: ``python -m pipelines.release_writer``.

It copies the assembled tables (``data/dataset``: compact zstd parquet) and the card into the
folder ``release.folder`` names (``datasets/<name>-v<N>/``), replaced whole and atomically,
with ``RELEASE.json`` (name, version, when, the pairs it holds per scenario, sizes, the
processors with their description and the speed probe's reference), and carries over what lives
only in the release: its ``CHANGES.md`` and the control and retest histories, whose sections it
appends to the card.
It is the last step of ``scripts/release_sweep.sh``, never the main job (whose
``data/dataset`` also holds its own tour's scenarios). Reading a release is
``pipelines/release.py``.

    python -m pipelines.release_writer [--params params.yaml]   # data/dataset -> ${release.folder}
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from .measure.records import Record
from .release import (MANIFEST, PROCESSOR_IDENTITY, ROOT, Release, ReleaseError, check_one_machine, parse_name,
                      processor_differences, processors, release_for_machine, resolve)

CHANGES = "CHANGES.md"  # a release's history (what each session measured), carried from version to version
LIMIT_BYTES = 100 * 2**20  # a release is committed to git: it must stay well under this


def probe_references(measurements: Path) -> dict[str, dict[str, float]]:
    """Device -> CPU -> the speed-probe reference (seconds) the kept processes under
    ``measurements`` (``<device>/<scenario>/<model>.json``) were judged against: the median over
    processes of each one's reference on that CPU (pipelines/speed_probe.py). Empty where no
    record ran the probe."""
    seen: dict[str, dict[str, list[float]]] = {}
    for rec in measurements.glob("*/*/*.json"):
        if rec.name.count(".") != 1 or rec.name == "SCENARIO.json":  # traces, errors, the status file
            continue
        try:
            procs = Record.from_json(json.loads(rec.read_text()), rec).e2e.per_process
        except (OSError, ValueError):  # torn, or not a record (RecordError is a ValueError)
            continue
        for p in procs:
            best = ((p.get("load") or {}).get("probe") or {}).get("best_s") or {}
            for cpu, s in best.items():
                seen.setdefault(rec.parent.parent.name, {}).setdefault(str(cpu), []).append(float(s))
    return {dev: {cpu: statistics.median(v) for cpu, v in sorted(cpus.items())} for dev, cpus in sorted(seen.items())}


def machines(measurements: Path) -> dict[str, dict[str, Any]]:
    """Device -> the processor its measurements ran on, from the device description each
    measured scenario's ``SCENARIO.json`` keeps (``processor``: vendor, model name, family, model,
    stepping, ISA flags; pipelines/devices/host.py ``parse_cpuinfo``). Sessions that saw different
    flags lines on one processor (a kernel upgrade) keep the ISA flags all of them had and every
    flags hash, sorted; two processors under one device name are a ReleaseError, as
    ``check_one_machine`` refuses their rows. Empty where no description records one."""
    seen: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    for status in sorted(measurements.glob("*/*/SCENARIO.json")):
        try:
            info = json.loads(status.read_text())
        except (OSError, ValueError):
            continue
        proc = (info.get("device") or {}).get("processor") if isinstance(info, dict) else None
        if isinstance(proc, dict):
            seen.setdefault(status.parent.parent.name, []).append((status, proc))
    out: dict[str, dict[str, Any]] = {}
    for dev, found in sorted(seen.items()):
        first_path, first = found[0]
        for path, proc in found[1:]:
            diff = processor_differences(first, {k: proc.get(k) for k in PROCESSOR_IDENTITY})
            if diff:
                raise ReleaseError(f"{path}: device {dev!r} ran on another processor than in {first_path} "
                                   f"({'; '.join(diff)}); a release holds one machine's measurements")
        isa = set(first.get("isa") or [])
        for _, proc in found[1:]:
            isa &= set(proc.get("isa") or [])
        hashes = sorted({str(p["flags_sha256"]) for _, p in found if p.get("flags_sha256")})
        out[dev] = {**{k: first.get(k) for k in PROCESSOR_IDENTITY}, "isa": sorted(isa),
                    "flags_sha256": hashes[0] if len(hashes) == 1 else hashes}
    return out


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
                # device -> its processor's description (family, model, stepping, ISA flags) from
                # the records' device description; a device without local records keeps the old one
                "machine": {**Release(out).manifest.get("machine", {}), **machines(src.parent / "measurements")},
                # device -> CPU -> the speed probe's reference of its records: the next session
                # on this processor starts from it (a session in a slow phase must not judge
                # against its own speed); a device without local records keeps the old one
                "probe_reference_s": {**Release(out).manifest.get("probe_reference_s", {}),
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


def main(argv: list[str] | None = None) -> int:
    from .config import ConfigError, load_params

    p = argparse.ArgumentParser(prog="python -m pipelines.release_writer", description=__doc__.split("\n\n")[0])
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
        if not cfg.release.folder:
            raise ReleaseError("release.folder: empty, no release folder to write")
        if args.check_machine or args.for_this_machine:
            from .devices import make_device

            dev = make_device(cfg.device)
            processor = str(dev.describe().get("cpu_model"))
            if args.for_this_machine:
                print(release_for_machine(dev.name, processor).relative_to(ROOT))
                return 0
            why = Release(cfg.release.folder).machine_mismatch(dev.name, processor)
            if why:
                raise ReleaseError(why)
            return 0
        m = write_release(args.dataset or Path(cfg.data_dir) / "dataset", cfg.release.folder)
    except (ConfigError, ReleaseError, FileNotFoundError) as e:
        print(f"latbench: error: {e}", file=sys.stderr)
        return 2
    print(f"release {m['name']}-v{m['version']}: {m['rows']['e2e']} e2e rows in "
          f"{len(m['pairs_per_scenario'])} scenarios, {m['bytes'] / 2**20:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
