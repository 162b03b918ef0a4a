"""The ``export`` stage: framework artifacts for every generated network.

For each IR file under ``<data_dir>/models/`` and each configured format it writes
``<data_dir>/artifacts/<model_id>/<file>`` (see ``generators.export.formats``) and a sidecar
``<format>.facts.json`` (operator counts, parameters, shapes, versions, seconds, and the
result of checking them against the IR after the converter's known fusions). A format
that fails for a model (say an operator the int8 converter rejects) leaves
``<format>.error.json`` with the error and the stage goes on. Work already done by the same
exporter code is skipped, so a killed run resumes where it stopped; recorded failures are
retried only with ``export.retry_failed`` or when the exporter code changed.

Models run in parallel, one worker process per core (spawned, so TensorFlow and torch are
imported in the workers only), with a progress bar and ETA. ``manifest.csv`` lists the
status of every (model, format) pair after the run; the workers' own output (converter
messages) goes to ``export.log`` there.
"""
from __future__ import annotations

import csv
import errno
import io
import json
import os
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from tqdm import tqdm

from foundation.atomic import remove_orphans, write_text
from generators.export.formats import FORMATS, exporter_version

from .artifacts import dropped_sidecar, is_dropped

ENGINES = ("x86", "qnnpack")
MANIFEST_COLUMNS = ["model_id", "source", "name", "format", "status", "file", "bytes", "seconds", "checks", "error"]


@dataclass
class ExportConfig:
    formats: list[str] = field(default_factory=list)  # generators/export/formats.py; empty: what the scenario grid reads
    sources: list[str] = field(default_factory=list)  # generator sources to export; empty: all generated
    workers: int = 0  # worker processes; 0: one per core
    int8_engine: str = "x86"  # PyTorch int8 engine: x86 on the host, qnnpack for ARM targets
    calibration_samples: int = 8  # representative inputs for int8 post-training quantization
    retry_failed: bool = False  # retry (model, format) pairs whose failure is on record


def validate_config(cfg: ExportConfig) -> ExportConfig:
    unknown = [f for f in cfg.formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"formats: unknown artifact format {unknown[0]!r} (known: {', '.join(FORMATS.names())})")
    if len(set(cfg.formats)) != len(cfg.formats):
        raise ValueError(f"formats: lists a format twice: {cfg.formats}")
    if cfg.workers < 0:
        raise ValueError(f"workers: must be >= 0, got {cfg.workers}")
    if cfg.int8_engine not in ENGINES:
        raise ValueError(f"int8_engine: unknown engine {cfg.int8_engine!r} (known: {', '.join(ENGINES)})")
    if cfg.calibration_samples < 1:
        raise ValueError(f"calibration_samples: must be >= 1, got {cfg.calibration_samples}")
    return cfg


class DiskFull(RuntimeError):
    """The disk filled up while writing an artifact: not the model's failure, so nothing is recorded
    against it; the stage stops (every model after it would fail the same way) and a rerun after
    freeing space (``latbench prune``) goes on. The release sweep once recorded 28 such failures (18
    zoo networks), which no rerun would have retried."""


# ------------------------------------------------------------------ per-model work (in workers)
def _sidecar(folder: Path, fmt: str, kind: str) -> Path:
    return folder / f"{fmt}.{kind}.json"


def _write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, sort_keys=True, indent=1, default=str) + "\n")


def export_model(model_path: str, formats: list[str], out_dir: str, options: dict, version: str) -> list[dict]:
    """Export one network to the given formats; never raises for a failing format."""
    from generators.ir import Graph, IRError

    folder = Path(out_dir) / Path(model_path).stem
    folder.mkdir(parents=True, exist_ok=True)
    try:
        graph = Graph.load(model_path)
        if graph.model_id != folder.name:
            raise IRError(f"{model_path}: file name does not match its model_id {graph.model_id}")
    except IRError as e:  # the file itself is bad: every format of it fails with that reason
        err = {"exporter_version": version, "error": f"IRError: {e}", "seconds": 0.0}
        for name in formats:
            _write_json(_sidecar(folder, name, "error"), {**err, "format": name})
        return [{"format": name, "status": "failed", "error": err["error"]} for name in formats]
    results = []
    for name in formats:
        fmt = FORMATS.get(name)
        t0 = time.perf_counter()
        try:
            facts = fmt.write(graph, folder / fmt.filename, **options)
            seconds = round(time.perf_counter() - t0, 3)
            checks = fmt.verify(graph, facts)
            facts = {**facts, "format": name, "exporter_version": version, "seconds": seconds, "checks": checks}
            _write_json(_sidecar(folder, name, "facts"), facts)
            _sidecar(folder, name, "error").unlink(missing_ok=True)
            results.append({"format": name, "status": "ok"})
        except Exception as e:  # any failure of one format is recorded, the others go on
            (folder / fmt.filename).unlink(missing_ok=True)
            if _disk_full(e):
                raise DiskFull(f"{folder / fmt.filename}: no space left on device") from None
            err = {
                "format": name,
                "model_id": graph.model_id,
                "exporter_version": version,
                "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                "traceback": traceback.format_exc(limit=8),
                "seconds": round(time.perf_counter() - t0, 3),
            }
            _write_json(_sidecar(folder, name, "error"), err)
            results.append({"format": name, "status": "failed", "error": err["error"]})
    return results


def _disk_full(e: BaseException) -> bool:
    """Is ``e`` (or an exception it wraps: converters re-raise) a full disk?"""
    while e is not None:
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            return True
        e = e.__cause__ or e.__context__
    return False


def _quiet_worker(log_path: str) -> None:
    """Send a worker's native stdout/stderr (converter chatter) to a log, not over the progress bar."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


# ------------------------------------------------------------------ the stage
def _pending(folder: Path, formats: list[str], version: str, retry_failed: bool) -> list[str]:
    todo = []
    for name in formats:
        if is_dropped(folder, name):  # every point that reads it has landed (pipelines/prune.py)
            continue
        facts, error = _sidecar(folder, name, "facts"), _sidecar(folder, name, "error")
        if facts.exists() and (folder / FORMATS.get(name).filename).exists() and _version(facts) == version:
            continue
        if error.exists() and not retry_failed and _version(error) == version:
            continue
        todo.append(name)
    return todo


def export_formats(cfg: Any) -> dict[str, frozenset[str] | None]:
    """Each format to export with the generator sources it is exported for (None: all):
    ``export.formats`` for every source, or when it is empty what the measure stages of the
    scenario grid read (:func:`pipelines.measure.grid_formats`)."""
    if cfg.export.formats:
        return {f: None for f in cfg.export.formats}
    from .measure.protocol import grid_formats

    formats = grid_formats(cfg.scenario, getattr(cfg, "measure", None))
    if not formats:
        raise ValueError("export.formats is empty and the scenario grid reads no artifact format: nothing to export")
    return formats


def formats_for(formats: dict[str, frozenset[str] | None], source: str) -> list[str]:
    """The formats of :func:`export_formats` that a network of ``source`` is exported to."""
    return [f for f, sources in formats.items() if sources is None or source in sources]


def _version(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("exporter_version")
    except (OSError, ValueError):
        return None  # unreadable sidecar: redo


def run_export(cfg: Any, models_dir: str | Path | None = None, out_dir: str | Path | None = None, progress: bool = True,
               only: set[str] | None = None) -> dict[str, int]:
    """Export every generated network (``only``: just these model ids; the retest's networks);
    return counts of ok / failed / skipped (model, format) pairs."""
    ex: ExportConfig = cfg.export
    formats = export_formats(cfg)
    models_dir = Path(models_dir or Path(cfg.data_dir) / "models")
    out_dir = Path(out_dir or Path(cfg.data_dir) / "artifacts")
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_orphans(out_dir)  # half-written files of a killed run
    version = exporter_version()
    models = sorted(p for p in models_dir.glob("*/*.json") if not ex.sources or p.parent.name in ex.sources)
    tasks = []
    wanted = 0
    for p in (models if only is None else [p for p in models if p.stem in only]):
        mine = formats_for(formats, p.parent.name)
        wanted += len(mine)
        todo = _pending(out_dir / p.stem, mine, version, ex.retry_failed)
        if todo:
            tasks.append((str(p), todo))
    options = {"int8_engine": ex.int8_engine, "calibration_samples": ex.calibration_samples}
    counts = {"ok": 0, "failed": 0, "skipped": wanted - sum(len(t[1]) for t in tasks)}
    workers = ex.workers or os.cpu_count() or 1
    bar = tqdm(total=len(tasks), desc="export", unit="model", disable=not progress)
    crashed = _run_pool(tasks, out_dir, options, version, workers, bar, counts)
    # A worker that died (killed by the OS, a native crash) takes its pool down: the models in
    # flight then run again one per pool, alone (the memory is all theirs), so only a model that
    # crashes on its own is marked.
    for task in crashed:
        if _run_pool([task], out_dir, options, version, 1, bar, counts):
            for name in task[1]:
                err = {"format": name, "exporter_version": version, "error": "worker process crashed (killed or native fault)"}
                folder = out_dir / Path(task[0]).stem
                folder.mkdir(parents=True, exist_ok=True)
                _write_json(_sidecar(folder, name, "error"), err)
                counts["failed"] += 1
            bar.update(1)
    bar.close()
    write_manifest(models, formats, out_dir)
    return counts


# networks a worker exports before a fresh one replaces it: torch.export and ExecuTorch's lowering
# keep memory from network to network (a worker held 9 GB after 290 ExecuTorch exports of the
# synthetic networks, on a 24 GB machine); a fresh worker costs its imports, seconds
TASKS_PER_WORKER = 25


def _run_pool(tasks, out_dir, options, version, workers, bar, counts, work=None) -> list:
    """Run tasks in a spawned process pool, at most ``workers`` at a time; return the tasks lost
    to a worker that died.

    A dying worker (the OOM killer, a native fault) breaks the whole pool, and the pool then
    fails every task it was given. Only the tasks in flight can have caused it, so tasks are
    handed out one at a time as workers free up: the ones in flight when the pool broke are the
    lost ones, and the rest go on, in parallel, in a fresh pool. (Two VGG conversions at once
    need 28 GB; before this, one such crash left every remaining network to a pool of its own.)
    ``work`` is the function a worker runs (``export_model``; tests give one that crashes)."""
    work = work or export_model
    queue, lost = list(reversed(tasks)), []
    log = str(Path(out_dir) / "export.log")

    def finish(fut, task) -> bool:
        """Count a finished task; False when the pool broke under it."""
        try:
            results = fut.result()
        except BrokenProcessPool:
            lost.append(task)
            return False
        for r in results:
            counts[r["status"]] += 1
            if r["status"] == "failed":
                tqdm.write(f"export: {Path(task[0]).stem} {r['format']}: {r['error']}")
        bar.update(1)
        return True

    while queue:
        with ProcessPoolExecutor(max_workers=min(workers, len(queue)), mp_context=get_context("spawn"),
                                 initializer=_quiet_worker, initargs=(log,),
                                 max_tasks_per_child=TASKS_PER_WORKER) as pool:
            inflight: dict = {}
            broken = False
            while (queue or inflight) and not broken:
                while queue and len(inflight) < workers:
                    path, todo = task = queue.pop()
                    inflight[pool.submit(work, path, todo, str(out_dir), options, version)] = task
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                broken = not all([finish(fut, inflight.pop(fut)) for fut in done])
            if broken:  # the pool fails what was still in flight; a task that finished first counts
                for fut in wait(inflight).done:
                    finish(fut, inflight[fut])
    return lost


def write_manifest(models: list[Path], formats: dict[str, frozenset[str] | None], out_dir: Path) -> Path:
    """``manifest.csv``: one row per (model, format) with its status, from the sidecars on disk
    (``dropped``: deleted by ``latbench prune`` once its pairs were released)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=MANIFEST_COLUMNS, lineterminator="\n")
    w.writeheader()
    for p in models:
        source, mid = p.parent.name, p.stem
        name = json.loads(p.read_text()).get("name", "")
        for f in formats_for(formats, source):
            folder = out_dir / mid
            art = folder / FORMATS.get(f).filename
            row = {"model_id": mid, "source": source, "name": name, "format": f, "file": "", "bytes": "", "seconds": "", "checks": "", "error": ""}
            facts, error = _sidecar(folder, f, "facts"), _sidecar(folder, f, "error")
            if is_dropped(folder, f):
                d = json.loads(dropped_sidecar(folder, f).read_text())
                row |= {"status": "dropped", "bytes": d.get("bytes", ""),
                        "error": f"pruned: its pairs are released ({', '.join(d.get('scenarios', []))})"}
            elif facts.exists() and art.exists():
                d = json.loads(facts.read_text())
                failed = sorted(k for k, v in d.get("checks", {}).items() if not v)
                row |= {"status": "ok", "file": art.relative_to(out_dir).as_posix(), "bytes": art.stat().st_size,
                        "seconds": d.get("seconds", ""), "checks": "mismatch: " + ",".join(failed) if failed else "passed"}
            elif error.exists():
                d = json.loads(error.read_text())
                row |= {"status": "failed", "error": d.get("error", ""), "seconds": d.get("seconds", "")}
            else:
                row |= {"status": "missing"}
            w.writerow(row)
    return write_text(out_dir / "manifest.csv", buf.getvalue())
