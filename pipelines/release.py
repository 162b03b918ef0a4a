"""A committed dataset release, read-only: ``datasets/<name>-v<N>/``.

A release is the assembled tables and card of a sweep with ``RELEASE.json`` (what it holds per
scenario, the processors it was measured on and their description, the speed probe's
reference). The ``release`` config section names the one the project's data belongs to; every
stage that reads it asks a :class:`Release`: which pairs it holds and which of those are current
under today's protocol (the measure stage skips them, assemble takes their rows, prune may
delete their files), which processor measured it (its name; from releases written since they
record it, its family, model, stepping and ISA flags), which speed it was measured at, and
where the control and retest histories live. Writing a release is ``pipelines/release_writer.py``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"^(?P<name>[a-z0-9][a-z0-9_-]*?)-v(?P<version>\d+)$")
MANIFEST = "RELEASE.json"
# what every released e2e row must have recorded to count as measured under the current
# protocol: the speed probe's verdict; each runner adds its own columns (Runner.protocol_columns)
PROTOCOL_COLUMNS = ("probe_slowdown",)


class ReleaseError(ValueError):
    """A release folder that cannot be written or read; one line naming the path."""


@dataclass
class ReleaseConfig:
    """The ``release`` config section: the committed release the project's data belongs to."""

    folder: str = "datasets/host-v1"  # datasets/<name>-v<N>; empty: none
    # its pairs are not measured again, assemble takes their rows, prune may delete the files
    # only they read; false: every pair is measured here (an explicit choice)
    reuse: bool = True
    # released rows measured under an older protocol (no speed-probe verdict, a runner's own
    # columns missing, given up on below today's max_processes) count as not released
    remeasure_outdated: bool = False
    # generator names measured again at every point at the start of a release session
    # (python -m pipelines.control): the between-session drift the card states
    control: list[str] = field(default_factory=list)


def validate_config(cfg: ReleaseConfig) -> ReleaseConfig:
    if cfg.folder and not NAME.match(Path(cfg.folder).name):
        raise ValueError(f"folder: {cfg.folder!r}: a release folder is named <name>-v<N>, e.g. datasets/host-v1")
    return cfg


def resolve(path: str | Path) -> Path:
    """A release path as configured (relative paths are relative to the project root)."""
    p = Path(path)
    return p if p.is_absolute() else ROOT / p


def parse_name(folder: Path) -> tuple[str, int]:
    m = NAME.match(folder.name)
    if not m:
        raise ReleaseError(f"{folder}: a release folder is named <name>-v<N>, e.g. host-v1")
    return m["name"], int(m["version"])


class Release:
    """One release folder (it need not exist yet: then it holds nothing)."""

    def __init__(self, folder: str | Path):
        self.folder = resolve(folder)
        self.label = str(folder)

    @classmethod
    def configured(cls, cfg: ReleaseConfig) -> "Release | None":
        """The release the config names, or None (``release.folder`` empty)."""
        return cls(cfg.folder) if cfg.folder else None

    def __repr__(self) -> str:
        return f"Release({self.label!r})"

    @property
    def manifest(self) -> dict[str, Any]:
        path = self.folder / MANIFEST
        return json.loads(path.read_text()) if path.is_file() else {}

    def history(self, name: str) -> Path:
        """A history file kept in the release (``control.csv``, ``retest.csv``)."""
        return self.folder / name

    def protocol_columns(self) -> dict[str, tuple[str, ...]]:
        """scenario_id -> the e2e columns its rows must have recorded to be current: the suite's
        and its runner's (the scenarios table says which runner; none known: the suite's)."""
        from .runners import runner_for

        path = self.folder / "scenarios.parquet"
        if not path.is_file():
            return {}
        import pyarrow.parquet as pq

        out = {}
        for r in pq.read_table(path, columns=["scenario_id", "framework", "accelerator"]).to_pylist():
            runner = runner_for(str(r["framework"]), str(r["accelerator"]))
            out[str(r["scenario_id"])] = PROTOCOL_COLUMNS + (runner.protocol_columns if runner else ())
        return out

    def pairs(self, current_only: bool = False, max_processes: int | None = None) -> set[tuple[str, str]]:
        """(model_id, scenario_id) of every e2e row (empty if there are none). ``current_only``:
        only rows measured under the current protocol, i.e. with every column of
        :meth:`protocol_columns` recorded and, given the current adaptive stopping's
        ``max_processes``, not given up on below it (a row whose median's interval was still
        wide when a smaller cap stopped it is one today's protocol would go on measuring)."""
        path = self.folder / "e2e.parquet"
        if not path.is_file():
            return set()
        import pyarrow.parquet as pq

        names = set(pq.read_schema(path).names)
        required = self.protocol_columns() if current_only else {}
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

    def processors(self, device: str) -> set[str]:
        """The processors the ``device`` rows were measured on (empty: none, or no table yet)."""
        path = self.folder / "scenarios.parquet"
        if not path.is_file():
            return set()
        import pyarrow.parquet as pq

        t = pq.read_table(path, columns=["device", "soc"]).to_pandas()
        return {str(s) for s in t.loc[t["device"] == device, "soc"].dropna()}

    def machine_mismatch(self, device: str, processor: str) -> str | None:
        """Why this machine (``device`` name, ``processor``: its cpu_model) may not add to the
        release, or None: the release's rows of that device were measured on another processor."""
        socs = sorted(self.processors(device))
        if socs and processor not in socs:
            return (f"{self.folder / 'scenarios.parquet'}: the release's {device!r} rows were measured on "
                    f"{', '.join(socs)}; this machine is {processor}: its measurements would not compare with them")
        return None

    def machine(self, device: str) -> dict[str, Any] | None:
        """The processor description the ``device`` rows were measured on (vendor, model name,
        family, model, stepping, ISA flags: :func:`pipelines.devices.host.parse_cpuinfo`), or None:
        a release written before releases recorded it (host-v1 records only the processor's name,
        :meth:`processors`)."""
        m = self.manifest.get("machine", {}).get(device)
        return m if isinstance(m, dict) else None

    def probe_reference(self, device: str) -> dict[int, float]:
        """CPU -> seconds: the speed-probe reference of the ``device`` rows (empty: none)."""
        refs = self.manifest.get("probe_reference_s", {}).get(device, {})
        return {int(cpu): float(s) for cpu, s in refs.items()}

    def reference_for(self, device: str, processor: str) -> dict[int, float]:
        """The probe reference a session on this machine starts from: the release's, when its
        ``device`` rows were measured on this very ``processor``; else none."""
        return self.probe_reference(device) if self.processors(device) == {processor} else {}


def reused_pairs(release_cfg: ReleaseConfig, stopping: Any) -> set[tuple[str, str]]:
    """The released pairs a sweep does not measure again: none when ``release.reuse`` is false;
    with ``release.remeasure_outdated`` only the current ones (:meth:`Release.pairs`), else all.
    ``stopping`` is the measure protocol's (its adaptive cap decides what is current)."""
    release = Release.configured(release_cfg)
    if release is None or not release_cfg.reuse:
        return set()
    return release.pairs(current_only=release_cfg.remeasure_outdated,
                         max_processes=stopping.max_processes if stopping.policy == "adaptive" else None)


def processors(scenarios: Any) -> dict[str, dict[str, list[str]]]:
    """device -> processor (the scenarios table's ``soc``) -> its scenario ids."""
    out: dict[str, dict[str, list[str]]] = {}
    for dev, soc, sid in zip(scenarios["device"], scenarios["soc"], scenarios["scenario_id"]):
        out.setdefault(str(dev), {}).setdefault(str(soc), []).append(str(sid))
    return out


def check_one_machine(scenarios: Any, where: Path) -> None:
    """A release holds one machine's measurements per device name: rows of two processors under
    one device would make every comparison across scenarios (int8 over fp32, two cores over
    one) a comparison of machines (datasets/host-xeon-v1/CHANGES.md)."""
    for dev, socs in processors(scenarios).items():
        if len(socs) > 1:
            what = "; ".join(f"{soc}: {', '.join(sorted(sids)[:3])}" for soc, sids in sorted(socs.items()))
            raise ReleaseError(f"{where}: device {dev!r} ran on {len(socs)} processors ({what}); a release "
                               f"holds one machine's measurements (measure on a machine like the release's, "
                               f"or start a release of this machine's own)")


#: What names a processor in a description (pipelines/devices/host.py ``parse_cpuinfo``): two
#: descriptions that differ in one of these are two processors; the flags may differ between
#: kernel versions on one processor.
PROCESSOR_IDENTITY = ("vendor", "model_name", "family", "model", "stepping")


def processor_differences(recorded: dict[str, Any] | None, this: dict[str, Any] | None) -> list[str]:
    """How processor description ``this`` differs from ``recorded`` (``model 17 vs 1``, ``isa:
    lacks avx512f``), over the keys both know; empty when they agree or either is unknown."""
    if not recorded or not this:
        return []
    out = [f"{k.replace('_', ' ')} {this[k]!r} vs {recorded[k]!r}" if k == "model_name" else
           f"{k} {this[k]} vs {recorded[k]}"
           for k in PROCESSOR_IDENTITY if recorded.get(k) is not None and this.get(k) is not None
           and str(recorded[k]) != str(this[k])]
    if isinstance(recorded.get("isa"), list) and isinstance(this.get("isa"), list):
        lacks = sorted(set(recorded["isa"]) - set(this["isa"]))
        more = sorted(set(this["isa"]) - set(recorded["isa"]))
        if lacks:
            out.append(f"isa: lacks {', '.join(lacks)}")
        if more:
            out.append(f"isa: also {', '.join(more)}")
    return out


_VENDOR_WORDS = {"intel", "amd", "arm", "processor", "cpu", "cpus", "core", "with", "radeon", "graphics"}


def processor_slug(processor: str) -> str:
    """A short name for a processor, for a new release's folder: "AMD EPYC" -> "epyc",
    "Intel(R) Xeon(R) Processor" -> "xeon" (vendor words, trademarks and "processor" dropped)."""
    words = re.sub(r"\((r|tm|c)\)", " ", processor.lower()).replace("@", " ").split()
    keep = [re.sub(r"[^a-z0-9]+", "-", w).strip("-") for w in words if w not in _VENDOR_WORDS]
    return "-".join(w for w in keep if w)[:24].strip("-") or "cpu"


def release_for_machine(device: str, processor: str, root: str | Path = "datasets") -> Path:
    """The release this machine adds to: the newest one under ``root`` whose ``device`` rows were
    measured on ``processor``, else a new ``<device>-<processor slug>-v1``; each processor's
    sweep sessions grow a release of its own (``check_one_machine``)."""
    base = resolve(root)
    mine: list[tuple[int, Path]] = []
    for folder in sorted(base.glob("*-v*")):
        if NAME.match(folder.name) and Release(folder).processors(device) == {processor}:
            mine.append((parse_name(folder)[1], folder))
    if mine:
        return max(mine)[1]
    name = f"{device}-{processor_slug(processor)}"
    version = 1
    while (base / f"{name}-v{version}" / "scenarios.parquet").is_file():  # another processor's, same slug
        version += 1
    return base / f"{name}-v{version}"
