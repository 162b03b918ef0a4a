"""``latbench prune``: delete the artifacts no stage of the sweep will read again.

The release sweep's artifacts outgrow a VM's disk (the zoo's 224x224 TFLite files most of all;
a release's CHANGES.md records the sizes), where the PyTorch point needs its TorchScript files
too and CI needs room of its own. An artifact file (a network's ``tflite_fp32``, ``torchscript_fp32``, ...)
is read only by the grid points whose runner measures that format (the format of the point's
precision, :data:`pipelines.runners.RUNNERS`), for the sources and models the point measures
(``measure.points``, ``runner_sources``, ``models``). Once the committed release
(``release.folder``) holds the pair of every such point, the file is not read again:

- ``measure`` skips released pairs (``release.reuse``);
- ``assemble`` takes a pruned pair's rows from the release, whose op features were read from
  the file while it existed (:func:`pipelines.assemble.assemble`);
- ``export`` does not write a pruned file again (:func:`pipelines.export._pending`).

``prune`` deletes such files and leaves ``<format>.dropped.json`` beside each: what was deleted,
its size, and the scenarios that hold its pairs. A file no export wrote on this machine (a sweep
on a fresh machine) gets its sidecar too (``written: false``), so export writes only the files a
point still reads. The control set's networks are measured again
at the start of every sweep session, so they are never pruned. A point added to the grid later
that needs a pruned file (the release's GPU point reads the NAS-Bench-201 cells' ``tflite_fp32``)
finds it missing, with the sidecar named in its error; ``prune --restore`` deletes the sidecars
of the files some point of the configured grid still needs (it reads the file and the release
lacks its pair; with ``release.reuse: false`` every read file), and the next ``export`` writes
those again. The other sidecars stay: restoring every pruned file would export tens of GB that
nothing reads.

    latbench prune --params data/release.params.yaml [--dry-run] [--restore]
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.atomic import write_text

from .artifacts import DROPPED, dropped_sidecar, is_dropped

@dataclass(frozen=True)
class Reader:
    """One grid point that reads an artifact format: of which networks, in which scenario."""

    point: str
    scenario_id: str
    fmt: str
    sources: frozenset[str] | None  # None: every source
    models: frozenset[str] | None  # None: every network of those sources

    def reads(self, source: str, model_id: str) -> bool:
        return (self.sources is None or source in self.sources) and (self.models is None or model_id in self.models)


def readers(cfg: Any, device: Any) -> list[Reader]:
    """Every point of the scenario grid that measures something on ``device``, as a Reader (a
    point the device does not offer, or that ``measure.points`` leaves out, reads nothing)."""
    from .measure.protocol import point_name, reading_points, stage_scenario

    out = []
    for (framework, precision, cores, accelerator), fmt, sources, m in reading_points(cfg.scenario, cfg.measure):
        st = stage_scenario(device, framework, precision, cores, None, accelerator)
        if st.scenario is not None:
            out.append(Reader(point_name(framework, precision, cores, accelerator), st.scenario.scenario_id, fmt,
                              frozenset(sources) if sources else None, frozenset(m.models) if m.models else None))
    return out


def _by_format(cfg: Any, device: Any) -> dict[str, list[Reader]]:
    out: dict[str, list[Reader]] = {}
    for r in readers(cfg, device):
        out.setdefault(r.fmt, []).append(r)
    return out


def _sources(models_dir: Path) -> dict[str, str]:
    """model_id -> its generator source (the folder of its IR file)."""
    return {p.stem: p.parent.name for p in models_dir.glob("*/*.json")}


@dataclass
class Plan:
    """What prune found: files it may delete, with their bytes and the scenarios holding them."""

    prunable: list[tuple[Path, str, int, list[str]]]  # (artifact, format, bytes, scenario ids)
    kept: dict[str, int]  # why a present file stays -> how many

    @property
    def bytes(self) -> int:
        return sum(b for _, _, b, _ in self.prunable)

    @property
    def unwritten(self) -> int:
        """How many of the prunable files were never written here (only their sidecars are left)."""
        return sum(not art.is_file() for art, _, _, _ in self.prunable)


class PruneError(ValueError):
    """The configuration does not allow pruning; one line naming the key."""


def plan(cfg: Any, device: Any, models_dir: Path, artifacts_dir: Path) -> Plan:
    """The artifact files whose every reading point's pair is in the release."""
    from generators.export.formats import FORMATS

    from .control import control_models
    from .release import reused_pairs

    if not cfg.release.folder:
        raise PruneError("release.folder: empty; prune deletes only files whose pairs a committed release holds")
    if not cfg.release.reuse:
        raise PruneError("release.reuse: false, so the sweep measures the released pairs again and needs "
                         "every file; nothing to prune")
    released = reused_pairs(cfg.release, cfg.measure.stopping)
    by_fmt = _by_format(cfg, device)
    sources = _sources(models_dir)
    # a control network named but not generated raises (ControlError names the key): never guess
    control = {mid for _, mid, _ in control_models(cfg, models_dir)} if cfg.release.control else set()
    prunable, kept = [], {}
    written = False

    def keep(why: str) -> None:
        if written:  # a file not written is not "kept": only whether to write it is decided
            kept[why] = kept.get(why, 0) + 1

    # the folders there are, and those of networks never exported on this machine: a file whose
    # pairs are all released need not be written (a sweep on a fresh machine exports only what it reads)
    present = {p.name for p in artifacts_dir.iterdir() if p.is_dir()} if artifacts_dir.is_dir() else set()
    for mid in sorted(present | set(sources)):
        folder = artifacts_dir / mid
        for fmt in FORMATS.names():
            art = folder / FORMATS.get(fmt).filename
            written = art.is_file()
            if not written and (is_dropped(folder, fmt) or fmt not in by_fmt):
                continue  # already pruned, or a format no point reads and nobody wrote
            source = sources.get(mid)
            if source is None:
                keep("no IR file under models/ (not this sweep's network)")
                continue
            if mid in control:
                keep("control set (measured again every session)")
                continue
            mine = [r for r in by_fmt.get(fmt, []) if r.reads(source, mid)]
            if not mine:
                keep("no grid point reads it")  # a format exported for other work: not prune's to judge
                continue
            missing = [r for r in mine if (mid, r.scenario_id) not in released]
            if missing:
                keep(f"{missing[0].point} not yet released" if len({r.point for r in missing}) == 1
                     else "several points not yet released")
                continue
            prunable.append((art, fmt, art.stat().st_size if written else 0, sorted(r.scenario_id for r in mine)))
    return Plan(prunable, dict(sorted(kept.items(), key=lambda kv: -kv[1])))


def prune(p: Plan, release: str) -> int:
    """Delete the planned files (those present), each leaving its sidecar first (a kill in between leaves a
    sidecar beside a file, which the next prune deletes: never a file gone without a record)."""
    for art, fmt, size, scenarios in p.prunable:
        side = dropped_sidecar(art.parent, fmt)
        art.parent.mkdir(parents=True, exist_ok=True)
        write_text(side, json.dumps({"format": fmt, "file": art.name, "bytes": size, "release": release,
                                     "scenarios": scenarios, "written": art.is_file(),
                                     "dropped": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                                    indent=1, sort_keys=True) + "\n")
        art.unlink(missing_ok=True)
    return len(p.prunable)


def restorable(cfg: Any, device: Any, models_dir: Path, artifacts_dir: Path) -> list[Path]:
    """The dropped sidecars whose files a grid point still needs: it reads that format of that
    network and the release does not hold its pair (a point added after the prune; every pair
    when ``release.reuse`` is false, since the sweep then measures released pairs again)."""
    from .release import reused_pairs

    released = reused_pairs(cfg.release, cfg.measure.stopping)
    by_fmt = _by_format(cfg, device)
    sources = _sources(models_dir)
    tail = f".{DROPPED}.json"
    out = []
    for side in sorted(artifacts_dir.glob(f"*/*{tail}")):
        mid, fmt = side.parent.name, side.name[:-len(tail)]
        source = sources.get(mid)
        if source is not None and any((mid, r.scenario_id) not in released
                                      for r in by_fmt.get(fmt, []) if r.reads(source, mid)):
            out.append(side)
    return out


def restore(sidecars: list[Path]) -> int:
    """Delete these dropped sidecars (:func:`restorable`): the next export writes their files again."""
    for side in sidecars:
        side.unlink()
    return len(sidecars)


__all__ = ["DROPPED", "Plan", "PruneError", "Reader", "dropped_sidecar", "is_dropped", "plan", "prune", "readers", "restorable", "restore"]
