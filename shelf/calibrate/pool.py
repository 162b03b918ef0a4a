"""The candidate pool a calibration chooses from: networks of the suite's generator sources drawn
with a seed of the calibration's own, so none of them is a network of the release (seed 0).

A pool is a pure function of (the generator sections, the seed, the sizes): the same call
gives the same networks, which is what lets a stopped calibration resume. Each network's IR is
written to ``<work>/models/<source>/<model_id>.json`` (the layout the export and assemble
stages read) and ``pool.json`` lists them with the features sampling works on
(:func:`features`).
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from . import CalibrateError

#: The sources a pool may draw from and the config field their size sets (a random space's
#: network count; the zoo's variants per family).
SIZE_FIELDS = {"synthetic": "n", "transformer": "n", "nasbench201": "n", "zoo": "variants"}
DEFAULT_SIZES = {"synthetic": 600, "zoo": 8, "transformer": 150}
DEFAULT_SEED = 1  # the release's networks are drawn with seed 0
POOL_FILE = "pool.json"


def parse_sizes(items: list[str] | None) -> dict[str, int]:
    """``["synthetic=600", "zoo=8"]`` -> {source: size}; None or empty: :data:`DEFAULT_SIZES`."""
    if not items:
        return dict(DEFAULT_SIZES)
    out: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in SIZE_FIELDS or not value.isdigit() or int(value) < 1:
            raise CalibrateError(f"--pool {item!r}: expected SOURCE=N with SOURCE one of {', '.join(SIZE_FIELDS)} "
                                 "and N >= 1 (zoo: variants per family)")
        out[name] = int(value)
    return out


def features(graph: Any, op_types: list[str]) -> np.ndarray:
    """A network as sampling sees it: log FLOPs, log params, log memory traffic, then per operator
    type of ``op_types`` the log1p of its MACs (millions) and of its op count. Distances in this
    space decide the spread of the first round; the uncertainty model fits on it."""
    costs = [c for c in graph.costs() if c.op != "input"]
    macs = {t: 0 for t in op_types}
    count = {t: 0 for t in op_types}
    for c in costs:
        if c.op in macs:
            macs[c.op] += c.macs
            count[c.op] += 1
    total = [sum(c.macs for c in costs), sum(c.params for c in costs), sum(c.memory_elements for c in costs)]
    head = [math.log1p(v / 1e6) for v in total]
    return np.asarray(head + [math.log1p(macs[t] / 1e6) for t in op_types] + [math.log1p(count[t]) for t in op_types],
                      dtype="float64")


@dataclass
class Pool:
    """The pool as written to ``pool.json``: spec (sizes, seed), op types, one row per network."""

    folder: Path  # the work folder; IR files under folder/models
    sizes: dict[str, int]
    seed: int
    op_types: list[str]
    rows: list[dict[str, Any]]  # model_id, source, name, flops, features

    @property
    def ids(self) -> list[str]:
        return [r["model_id"] for r in self.rows]

    def matrix(self) -> np.ndarray:
        return np.asarray([r["features"] for r in self.rows], dtype="float64")

    def source_of(self, model_id: str) -> str:
        return self._by_id[model_id]["source"]

    def ir_path(self, model_id: str) -> Path:
        return self.folder / "models" / self.source_of(model_id) / f"{model_id}.json"

    def graph(self, model_id: str) -> Any:
        from generators.ir import Graph

        return Graph.load(self.ir_path(model_id))

    def __post_init__(self) -> None:
        self._by_id = {r["model_id"]: r for r in self.rows}


def _sections(generator: Any, sizes: Mapping[str, int]) -> dict[str, Any]:
    out = {}
    for name, n in sizes.items():
        section = getattr(generator, name, None)
        if section is None:
            from generators.catalog import SOURCES

            section = SOURCES.get(name).Config()
        out[name] = dataclasses.replace(section, **{SIZE_FIELDS[name]: n})
    return out


def _write(folder: Path, spec: dict[str, Any], graphs: list[Any]) -> Pool:
    if not graphs:
        raise CalibrateError("--pool: no networks drawn")
    for g in graphs:
        g.save(folder / "models" / g.source / f"{g.model_id}.json")
    op_types = sorted({n.op for g in graphs for n in g.nodes.values()} - {"input"})
    rows = [{"model_id": g.model_id, "source": g.source, "name": g.name, "flops": g.summary()["flops"],
             "features": [round(float(v), 6) for v in features(g, op_types)]} for g in graphs]
    f = folder / POOL_FILE
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps({**spec, "op_types": op_types, "rows": rows}) + "\n")
    return Pool(folder, spec.get("sizes") or {}, int(spec.get("seed") or 0), op_types, rows)


def graph_pool(folder: Path, graphs: list[Any]) -> Pool:
    """A pool of given graphs (a benchmark's evaluation networks), written under ``folder`` as
    :func:`build_pool` writes its own; each graph's ``source`` names its subfolder."""
    seen: dict[str, Any] = {}
    for g in graphs:
        seen.setdefault(g.model_id, g)
    return _write(Path(folder), {"sizes": None, "seed": None, "given": len(seen)}, list(seen.values()))


def build_pool(folder: Path, generator: Any, sizes: Mapping[str, int], seed: int = DEFAULT_SEED,
               progress: Callable[[str], None] | None = None) -> Pool:
    """The pool of ``sizes`` networks drawn with ``seed`` from the ``generator`` config's source
    sections, written under ``folder`` (or read back when ``pool.json`` there has this spec; a
    different spec is refused: a calibration keeps its pool)."""
    from generators.catalog import SOURCES

    folder = Path(folder)
    f = folder / POOL_FILE
    spec = {"sizes": dict(sizes), "seed": int(seed)}
    if f.is_file():
        d = json.loads(f.read_text())
        if {"sizes": d.get("sizes"), "seed": d.get("seed")} != spec:
            raise CalibrateError(f"{f}: this calibration's pool is {d.get('sizes')} with seed {d.get('seed')}, not "
                                 f"{spec['sizes']} with seed {spec['seed']}: resume it with its own --pool/--seed, "
                                 "or give another --work folder")
        return Pool(folder, d["sizes"], d["seed"], d["op_types"], d["rows"])
    graphs = []
    seen: set[str] = set()
    for name, section in _sections(generator, sizes).items():
        count = 0
        for g in SOURCES.get(name).generate(section, seed):
            if g.model_id not in seen:
                seen.add(g.model_id)
                graphs.append(g)
                count += 1
        if progress:
            progress(f"pool: {count} {name} networks")
    return _write(folder, spec, graphs)


__all__ = ["DEFAULT_SEED", "DEFAULT_SIZES", "Pool", "SIZE_FIELDS", "build_pool", "features", "graph_pool", "parse_sizes"]
