"""The ``generate`` stage: IR files for every selected generator source.

Writes ``<data_dir>/models/<source>/<model_id>.json`` and an index
``<data_dir>/models/index.csv`` (one row per network: id, source, name, costs, metadata).
Deterministic: the same parameters give byte-identical files. A network that a second
source produces again (same ``model_id``) is written once; the index says which sources
made it.

The stage owns only what it writes: IR files ``<source>/<model_id>.json`` of a registered
source whose content says so (format ``latbench-ir``, that source, that id), and its index.
A later run with a smaller configuration removes such files it no longer produces; any other
file under the folder (``--out`` may point anywhere) is never touched.
"""
from __future__ import annotations

import csv
import io
import json
import re
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from foundation.atomic import remove_orphans, write_text
from generators.ir import Graph

INDEX_COLUMNS = ["model_id", "source", "name", "nodes", "flops", "params", "memory_bytes_fp32", "also_from", "meta"]


def run_generate(cfg: Any, out_dir: str | Path | None = None, progress: bool = True) -> dict[str, int]:
    """Generate every selected source; return the number of networks written per source."""
    from generators.catalog import SOURCES

    gen = cfg.generator
    out = Path(out_dir or Path(cfg.data_dir) / "models")
    _check_index_is_ours(out / "index.csv")
    out.mkdir(parents=True, exist_ok=True)
    remove_orphans(out)  # half-written files of a killed run
    rows: dict[str, dict] = {}
    written: dict[str, int] = {}
    for name in SOURCES.names():
        section = getattr(gen, name)
        if section is None:
            continue
        source = SOURCES.get(name)
        t0 = time.perf_counter()
        count = 0
        bar = tqdm(source.generate(section, gen.seed), desc=f"generate {name}", unit="net", disable=not progress, leave=True)
        for graph in bar:
            mid = graph.model_id
            if mid in rows:
                rows[mid]["also_from"].append(f"{name}:{graph.name}")
                continue
            graph.save(out / name / f"{mid}.json")
            rows[mid] = _index_row(graph, mid)
            count += 1
        written[name] = count
        if progress:
            tqdm.write(f"generate {name}: {count} networks in {time.perf_counter() - t0:.1f} s")
    _remove_stale(out, set(rows), set(SOURCES.names()))
    _write_index(out / "index.csv", rows.values())
    return written


def _index_row(graph: Graph, mid: str) -> dict:
    s = graph.summary()
    return {
        "model_id": mid,
        "source": graph.source,
        "name": graph.name,
        "nodes": s["nodes"],
        "flops": s["flops"],
        "params": s["params"],
        "memory_bytes_fp32": s["memory_bytes"]["fp32"],
        "also_from": [],
        "meta": graph.meta,
    }


_MODEL_ID = re.compile(r"[0-9a-f]{16}")


def owned_ir_file(f: Path, sources: set[str]) -> bool:
    """Whether ``f`` is an IR file this stage writes: ``<source>/<model_id>.json`` of a registered
    source, holding a latbench-ir document of that source and id (a file of the same name that
    says anything else, or cannot be read, is someone else's)."""
    from generators.ir import FORMAT
    from foundation.safeload import LoadError, load_json

    if f.parent.name not in sources or not _MODEL_ID.fullmatch(f.stem) or f.is_symlink() or not f.is_file():
        return False
    try:
        d = load_json(f)
    except LoadError:
        return False
    return isinstance(d, dict) and d.get("format") == FORMAT and d.get("source") == f.parent.name \
        and d.get("model_id") == f.stem


def _remove_stale(out: Path, keep: set[str], sources: set[str]) -> None:
    """Drop IR files a previous run wrote that this configuration no longer produces (only
    files :func:`owned_ir_file` recognises as the stage's own)."""
    for name in sorted(sources):
        folder = out / name
        if folder.is_symlink() or not folder.is_dir():
            continue
        for f in folder.glob("*.json"):
            if f.stem not in keep and owned_ir_file(f, sources):
                f.unlink()


def _check_index_is_ours(path: Path) -> None:
    """Refuse to overwrite an ``index.csv`` that this stage did not write."""
    from .config import ConfigError

    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise ConfigError(f"{path}: not a regular file; refusing to write the index there")
    if path.is_file():
        with open(path, "rb") as fh:
            head = fh.readline(4096).decode("utf-8", "replace").strip()
        if not head.startswith("model_id,source,name,"):  # (this or an earlier version's columns)
            raise ConfigError(f"{path}: exists and is not an index written by `latbench generate`; refusing to "
                              "overwrite it (choose another --out)")


def _write_index(path: Path, rows) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=INDEX_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in sorted(rows, key=lambda r: (r["source"], r["name"])):
        w.writerow({**r, "also_from": ";".join(r["also_from"]), "meta": json.dumps(r["meta"], sort_keys=True)})
    write_text(path, buf.getvalue())
