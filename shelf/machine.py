"""Which machine a host scenario's predictions are priced on, and how this machine compares.

A host scenario (``host-...``) is fitted on a release's measurements (``datasets/host-v1``): its
predictions are times on the release's machine. :func:`compare` puts that machine (the
release's processor, with its family, model, stepping and ISA flags where the release records
them, and its speed-probe reference per CPU) beside this one (its ``/proc/cpuinfo`` and what
the speed probe, pipelines/speed_probe.py, reads on the scenario's CPUs now: :data:`PROBES`
probes per CPU, the median kept, a few milliseconds in all). :meth:`Comparison.ratio` is this
machine's reading over the release's reference on the scenario's CPUs (their mean);
``latbench predict --scale-to-this-machine`` multiplies a host prediction by it, an estimate:
the probe's fixed work (float multiply-adds and a streaming sweep) stands for the network, and
a processor with other vector units speeds up a network's kernels by other factors than the
probe's (``benchmarks/bench_probe_scaling.py`` prints how far the estimate goes on this
machine). No probe runs for other scenarios (phones, NPUs) or for the host's GPU scenario.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

PROBES = 7  # probes per CPU, the median kept (each under 5 ms: pipelines/speed_probe.py)
SLOWER = 0.10  # a probe ratio beyond 1 +- SLOWER is said in a note line
HOST_PREFIX = "host-"


def is_host(scenario_id: str) -> bool:
    return scenario_id.startswith(HOST_PREFIX)


def scenario_cores(scenario_id: str) -> tuple[str, str | None]:
    """(accelerator, core-set label) of a host scenario id, ``<device>-<framework>-<accelerator>
    [-<cores>]-<precision>`` (pipelines/scenarios.py ``make_scenario_id``): ``("cpu", "1large")``,
    ``("gpu", None)``."""
    parts = scenario_id.split("-")
    acc = parts[2] if len(parts) > 2 else ""
    return acc, (parts[3] if acc == "cpu" and len(parts) > 4 else None)


@dataclass(frozen=True)
class ReleaseMachine:
    """What a release records of the machine that measured one of its devices."""

    folder: str  # as the shelf entry records it (datasets/host-v1)
    device: str
    processors: tuple[str, ...]  # the processor's name (RELEASE.json ``processors``)
    machine: dict[str, Any] | None  # family, model, stepping, ISA flags (None: not recorded)
    reference_s: dict[int, float]  # CPU -> the speed probe's reference (s)

    @classmethod
    def read(cls, folder: str, device: str) -> "ReleaseMachine":
        from pipelines.release import MANIFEST, Release

        r = Release(folder)
        if not (r.folder / MANIFEST).is_file():
            raise FileNotFoundError(f"{r.folder / MANIFEST}: no release manifest")
        try:
            procs = tuple(str(p) for p in r.manifest.get("processors", {}).get(device, []))
            return cls(folder, device, procs, r.machine(device), r.probe_reference(device))
        except (ValueError, TypeError, AttributeError) as e:
            raise ValueError(f"{r.folder / MANIFEST}: processors, machine or probe_reference_s of {device!r}: {e}") \
                from None


def _identity(name: str | None, desc: dict[str, Any] | None) -> str:
    """``AMD EPYC (AuthenticAMD family 25 model 17 stepping 1)``."""
    if not desc:
        return f"{name or 'unknown processor'} (family/model/stepping not recorded)"
    ids = " ".join(f"{k} {desc[k]}" for k in ("family", "model", "stepping") if desc.get(k) is not None)
    return f"{name or desc.get('model_name') or 'unknown processor'} ({' '.join(x for x in (desc.get('vendor'), ids) if x)})"


def _ms(readings: dict[int, float]) -> str:
    return ", ".join(f"CPU {c} {s * 1e3:.3f} ms" for c, s in sorted(readings.items()))


@dataclass
class Comparison:
    """A release's machine beside this one, for the host scenarios asked of it."""

    release: ReleaseMachine
    this_name: str | None
    this: dict[str, Any] | None
    cpus: dict[str, tuple[int, ...]]  # scenario -> its CPUs here (empty: a GPU scenario)
    readings_s: dict[int, float] = field(default_factory=dict)  # CPU -> the median probe now
    no_probe: str | None = None  # why there is no reading

    def differences(self) -> list[str]:
        """How this processor differs from the release's (name; family, model, stepping and ISA
        flags where both are known)."""
        from pipelines.release import processor_differences

        out = []
        if self.release.processors and self.this_name and self.this_name not in self.release.processors:
            out.append(f"model name {self.this_name!r} vs {', '.join(map(repr, self.release.processors))}")
        recorded = self.release.machine
        if recorded and self.this:
            out += [d for d in processor_differences(recorded, self.this) if not d.startswith("model name")]
        return out

    def ratio(self, scenario_id: str) -> float | None:
        """This machine's probe reading over the release's reference, the mean over the
        scenario's CPUs; None without a reading or a reference for each of them."""
        cpus = self.cpus.get(scenario_id) or ()
        if not cpus or any(c not in self.readings_s or c not in self.release.reference_s for c in cpus):
            return None
        return statistics.fmean(self.readings_s[c] / self.release.reference_s[c] for c in cpus)

    def lines(self, scaled: bool) -> list[str]:
        """One line stating both machines; a second one when they differ or the probe reads this
        machine more than :data:`SLOWER` off the release's speed."""
        r = self.release
        used = {c for v in self.cpus.values() for c in v}
        ref = _ms({c: s for c, s in r.reference_s.items() if c in used or not used}) or "none recorded"
        proc = ", ".join(r.processors) or None
        now = [f"probe now {_ms(self.readings_s)} (median of {PROBES})"] if self.readings_s else []
        if self.no_probe:
            now.append(f"no probe reading ({self.no_probe})")
        elif not used:
            now.append("no probe (a GPU scenario: the probe times CPUs)")
        now = "; ".join(now)
        lines = [f"machine: priced on {r.folder} ({r.device}: {_identity(proc, r.machine)}; probe reference "
                 f"{ref}); this machine: {_identity(self.this_name, self.this)}; {now}"]
        diff = self.differences()
        ratios = {sid: q for sid in self.cpus if (q := self.ratio(sid)) is not None}
        off = {sid: q for sid, q in ratios.items() if abs(q - 1.0) > SLOWER}
        if diff or off:
            what = []
            if diff:
                what.append(f"its processor differs from the release's ({'; '.join(diff)})")
            for q in sorted(set(round(v, 2) for v in off.values())):
                sids = [s for s, v in off.items() if round(v, 2) == q]
                what.append(f"its probe reads x{q:.2f} the release's time ({'slower' if q > 1 else 'faster'}) "
                            f"on the CPUs of {', '.join(sids)}")
            tail = ("the host figures below are scaled by the probe ratio (an estimate)" if scaled else
                    "the host figures below are the release machine's; --scale-to-this-machine multiplies them "
                    "by the probe ratio (an estimate)")
            lines.append(f"note: this machine differs: {'; '.join(what)}: {tail}")
        return lines


def _probe(cpus: Iterable[int], probes: int = PROBES) -> dict[int, float]:
    """CPU -> the median of ``probes`` probes on it (interleaved across the CPUs)."""
    from pipelines.speed_probe import probe_once

    cpus = sorted(set(cpus))
    seen: dict[int, list[float]] = {c: [] for c in cpus}
    for _ in range(probes):
        for c in cpus:
            seen[c].append(probe_once(c))
    return {c: statistics.median(v) for c, v in seen.items()}


def compare(entries: dict[str, dict[str, Any]], root: str = "/", probes: int = PROBES) -> list[Comparison]:
    """A :class:`Comparison` per release among the host scenarios of ``entries`` (scenario id ->
    shelf entry; the others are left out): what the release records, this machine's
    ``/proc/cpuinfo``, and the speed probe on the union of the scenarios' CPUs here. An entry that
    records no release (a shelf built before entries recorded it: ``latbench shelf describe``)
    or a release without a manifest is a ValueError naming it."""
    from pipelines.devices.host import cpu_model, processor_description
    from pipelines.devices.topology import core_set, read_clusters

    groups: dict[tuple[str, str], list[str]] = {}
    for sid, e in entries.items():
        if not is_host(sid):
            continue
        folder = (e.get("training") or {}).get("release")
        if not folder:
            raise ValueError(f"{sid}: the shelf entry records no release (training.release) to name the machine it "
                             f"is priced on: `latbench shelf describe` records it")
        groups.setdefault((str(folder), sid.split("-")[0]), []).append(sid)
    if not groups:
        return []
    name, desc = cpu_model(root), processor_description(root)
    clusters = read_clusters(root)
    out = []
    for (folder, device), sids in groups.items():
        try:
            rm = ReleaseMachine.read(folder, device)
        except FileNotFoundError as e:
            raise ValueError(str(e)) from None
        cpus: dict[str, tuple[int, ...]] = {}
        no_probe = None
        for sid in sids:
            acc, label = scenario_cores(sid)
            if acc != "cpu" or not label:
                cpus[sid] = ()
                continue
            try:
                cpus[sid] = core_set(clusters, label).cpus
            except ValueError as e:  # this machine has fewer cores than the scenario pins
                cpus[sid], no_probe = (), f"{sid}: {e}"
        c = Comparison(rm, name, desc, cpus, no_probe=no_probe)
        wanted = {cpu for v in cpus.values() for cpu in v}
        if wanted:
            try:
                c.readings_s = _probe(wanted, probes)
            except FileNotFoundError as e:  # the native probe library is not built
                c.no_probe = f"{str(e).split(':')[0]} absent: native/build.sh builds the speed probe"
            except OSError as e:  # a CPU this process may not pin to
                c.no_probe = f"the speed probe failed: {e}"
        out.append(c)
    return out


def release_of(dataset_path: str | Path | None, root: Path) -> str | None:
    """The release a dataset folder is (it holds ``RELEASE.json``), as a path relative to the
    checkout ``root`` when it lies inside it; None for any other dataset (the public imports)."""
    if dataset_path is None:
        return None
    p = Path(dataset_path).resolve()
    if not (p / "RELEASE.json").is_file():
        return None
    try:
        json.loads((p / "RELEASE.json").read_text())
    except (OSError, ValueError):
        return None
    try:
        return str(p.relative_to(root.resolve()))
    except ValueError:
        return str(p)


__all__ = ["Comparison", "PROBES", "ReleaseMachine", "SLOWER", "compare", "is_host", "release_of", "scenario_cores"]
