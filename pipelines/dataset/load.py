"""The loading API: ``load_dataset(path) -> Dataset``, typed access and the usual joins.

>>> ds = load_dataset("data/dataset")
>>> ds.scenario_ids(device="pixel4", framework="tflite", accelerator="cpu")
>>> ds.e2e_for("usc-pixel4-tflite-cpu-1large-fp32")           # one scenario
>>> ds.e2e_for("usc-pixel4-tflite-cpu-1large-fp32", features=True)  # + model costs/family
>>> ds.compare("usc-pixel4-tflite-cpu-1large-int8", "usc-pixel4-tflite-cpu-1large-fp32")
>>> ds.by_family()["mobilenetv2"]                              # e2e + features of one family
>>> ds.ops_with_features("usc-pixel4-tflite-gpu-fp16")         # op rows + model + scenario columns
>>> ds.graph(model_id)                                          # the IR (stored, or rebuilt from `arch`)
>>> ds.graph(model_id, scenario_id)                             # ... as that scenario's toolchain ran it

Tables are pandas DataFrames with the dtypes of :mod:`.schema` (checked on load).
"""
from __future__ import annotations

import difflib
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .schema import SCHEMAS, TABLES, SchemaError, check_tables, read_table, schema, write_table

MODEL_FEATURES = ["name", "source", "family", "nodes", "flops", "params", "memory_bytes_fp32", "reported_flops"]
SCENARIO_FEATURES = ["device", "framework", "accelerator", "cores", "core_count", "threads", "heterogeneous",
                     "precision", "batch"]


@dataclass(frozen=True)
class Scenario:
    """One row of the scenarios table as typed Python values (None where missing)."""

    scenario_id: str
    device: str
    device_model: str | None
    soc: str | None
    cpu: str | None
    gpu: str | None
    framework: str | None
    framework_version: str | None
    accelerator: str
    cores: str | None
    core_count: int | None
    threads: int | None
    heterogeneous: bool | None
    precision: str | None
    batch: int
    description: str
    dataset: str
    source_file: str | None
    source_row: int | None
    source_column: str | None
    source_commit: str | None
    graph_passes: str | None = None  # comma-separated generators/passes.py names (Dataset.graph_passes)


def _py(v: Any) -> Any:
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    if hasattr(v, "item"):
        return v.item()
    return v


@functools.lru_cache(maxsize=256)
def pytorchcv_graph(name: str) -> Any:
    """The IR of the pytorchcv model ``name`` at its default input (``models.arch`` of a
    ``pytorch`` row). A pure function of the name that takes a third of a second to trace, so
    it is built once per process and shared by every dataset and view that reads it (and by
    the USC importer); callers never modify it (graph passes build new graphs)."""
    from generators.importers.pytorch import import_pytorchcv

    return import_pytorchcv(name)


@functools.lru_cache(maxsize=2048)
def nasbench201_graph(arch: str) -> Any:
    """The IR of a NAS-Bench-201 cell string (``models.arch`` of a ``nasbench201`` row), built
    once per process for the same reason as :func:`pytorchcv_graph`: the HELP tracks' datasets,
    views and training runs read the same networks again. The bound keeps a process that reads
    all 15,625 from holding them twice."""
    from generators.nasbench201 import build

    return build(arch)


def save_tables(tables: Mapping[str, pd.DataFrame], out_dir: str | Path) -> Path:
    """Write the five tables as ``<out_dir>/<table>.parquet`` (each checked against its schema)."""
    out = Path(out_dir)
    check_tables(dict(tables))
    for name in TABLES:
        df = tables[name] if name in tables else schema(name).empty()
        write_table(name, df, out / f"{name}.parquet")
    return out


def _table(name: str) -> property:
    """The read-only attribute of a Dataset that is its table ``name`` (a DataFrame)."""
    return property(lambda self: self._t[name])


class Dataset:
    """The five tables with accessors and joins. Build with :func:`load_dataset` or from tables."""

    def __init__(self, tables: Mapping[str, pd.DataFrame], path: str | Path | None = None, check: bool = True):
        unknown = set(tables) - set(TABLES)
        if unknown:
            raise SchemaError(f"unknown table(s): {', '.join(sorted(unknown))} (tables: {', '.join(TABLES)})")
        self._t = {name: (tables[name] if name in tables else schema(name).empty()) for name in TABLES}
        if check:
            check_tables(self._t)
        self.path = Path(path) if path is not None else None
        self._graphs: dict[Any, Any] = {}  # model_id, or (model_id, graph passes) -> Graph
        self._passes: dict[str, tuple[str, ...]] = {}  # scenario_id -> its graph passes

    # ------------------------------------------------------------ tables (read-only attributes)
    models = _table("models")
    scenarios = _table("scenarios")
    e2e = _table("e2e")
    ops = _table("ops")
    kernels = _table("kernels")

    def tables(self) -> dict[str, pd.DataFrame]:
        return dict(self._t)

    def __repr__(self) -> str:
        counts = ", ".join(f"{n} {len(self._t[n])}" for n in TABLES)
        return f"Dataset({counts}{', ' + str(self.path) if self.path else ''})"

    def summary(self) -> dict[str, Any]:
        """Row counts per table and per source dataset."""
        out: dict[str, Any] = {"rows": {n: len(self._t[n]) for n in TABLES}}
        out["by_dataset"] = {n: self._t[n].groupby("dataset").size().to_dict() for n in TABLES if len(self._t[n])}
        return out

    # ------------------------------------------------------------ scenarios
    def scenario_ids(self, **where: Any) -> list[str]:
        """Scenario ids whose columns equal the given values (a list/tuple/set matches any of them):
        ``scenario_ids(device="pixel4", accelerator="cpu", precision=["fp32", "int8"])``."""
        df = self.scenarios
        for col, val in where.items():
            if col not in df.columns:
                raise KeyError(f"scenarios has no column {col!r} (columns: {', '.join(df.columns)})")
            if isinstance(val, (list, tuple, set, frozenset)):
                df = df[df[col].isin(list(val))]
            elif val is None:
                df = df[df[col].isna()]
            else:
                df = df[df[col] == val]
        return df["scenario_id"].tolist()

    def _check_scenario(self, scenario_id: str) -> None:
        known = self.scenarios["scenario_id"]
        if not (known == scenario_id).any():
            near = difflib.get_close_matches(scenario_id, known.tolist(), n=3)
            raise KeyError(f"unknown scenario {scenario_id!r}" + (f" (did you mean {', '.join(near)}?)" if near else ""))

    def scenario(self, scenario_id: str) -> Scenario:
        self._check_scenario(scenario_id)
        row = self.scenarios[self.scenarios["scenario_id"] == scenario_id].iloc[0]
        return Scenario(**{f.name: _py(row[f.name]) for f in fields(Scenario)})

    # ------------------------------------------------------------ e2e
    def e2e_for(self, scenario_id: str, features: bool = False) -> pd.DataFrame:
        """End-to-end rows of one scenario (ordered by model_id); with ``features`` the model
        columns (name, family, costs) are joined in."""
        self._check_scenario(scenario_id)
        df = self.e2e[self.e2e["scenario_id"] == scenario_id].sort_values("model_id", kind="stable")
        df = df.reset_index(drop=True)
        return self._with_models(df) if features else df

    def _with_models(self, df: pd.DataFrame) -> pd.DataFrame:
        # a column of the left frame keeps its name (ops.reported_flops); the model's gets "_model"
        return df.merge(self.models[["model_id", *MODEL_FEATURES]], on="model_id", how="left",
                        validate="many_to_one", suffixes=("", "_model"))

    def _with_scenarios(self, df: pd.DataFrame) -> pd.DataFrame:
        return df.merge(self.scenarios[["scenario_id", *SCENARIO_FEATURES]], on="scenario_id", how="left",
                        validate="many_to_one")

    def _e2e_in(self, ids: list[str] | None) -> pd.DataFrame:
        """The e2e rows of the scenarios ``ids`` (each must exist; None: every scenario)."""
        if ids is None:
            return self.e2e
        for s in ids:
            self._check_scenario(s)
        return self.e2e[self.e2e["scenario_id"].isin(ids)]

    def e2e_with_features(self, scenario_ids: Iterable[str] | None = None) -> pd.DataFrame:
        """e2e joined with model features and scenario columns (device, framework, cores, ...)."""
        df = self._e2e_in(None if scenario_ids is None else list(scenario_ids))
        return self._with_scenarios(self._with_models(df.reset_index(drop=True)))

    def by_family(self, scenario_id: str | None = None) -> dict[str, pd.DataFrame]:
        """e2e rows with features, grouped by model family (sorted by family name); models
        without a family are under ``""``."""
        df = self.e2e_with_features([scenario_id] if scenario_id else None)
        fam = df["family"].fillna("")
        return {k: g.reset_index(drop=True) for k, g in df.groupby(fam, sort=True)}

    def families(self) -> list[str]:
        return sorted(self.models["family"].dropna().unique().tolist())

    def latency_matrix(self, scenario_ids: Iterable[str] | None = None, value: str = "latency_ms") -> pd.DataFrame:
        """Models x scenarios table of ``value`` (missing where not measured)."""
        ids = None if scenario_ids is None else list(scenario_ids)
        m = self._e2e_in(ids).pivot(index="model_id", columns="scenario_id", values=value)
        if scenario_ids is not None:
            m = m.reindex(columns=[s for s in ids if s in m.columns])
        return m

    def compare(self, scenario_a: str, scenario_b: str) -> pd.DataFrame:
        """Per model measured in both: ``a_ms``, ``b_ms`` and ``ratio`` = a / b (e.g. int8 over
        fp32: < 1 means int8 is faster), with the model's name and family."""
        m = self.latency_matrix([scenario_a, scenario_b]).dropna()
        if scenario_a not in m.columns or scenario_b not in m.columns or m.empty:
            return pd.DataFrame(columns=["model_id", "name", "family", "a_ms", "b_ms", "ratio"])
        out = pd.DataFrame({"model_id": m.index, "a_ms": m[scenario_a].to_numpy(), "b_ms": m[scenario_b].to_numpy()})
        out["ratio"] = out["a_ms"] / out["b_ms"]
        out = out.merge(self.models[["model_id", "name", "family"]], on="model_id", how="left")
        return out[["model_id", "name", "family", "a_ms", "b_ms", "ratio"]]

    # ------------------------------------------------------------ ops / kernels
    def _rows_for(self, table: str, index: str, scenario_id: str, model_id: str | None) -> pd.DataFrame:
        """The rows of ``table`` (ops or kernels) in one scenario (and model), in ``index`` order."""
        self._check_scenario(scenario_id)
        rows = getattr(self, table)
        df = rows[rows["scenario_id"] == scenario_id]
        if model_id is not None:
            df = df[df["model_id"] == model_id]
        return df.sort_values(["model_id", index], kind="stable").reset_index(drop=True)

    def ops_for(self, scenario_id: str, model_id: str | None = None) -> pd.DataFrame:
        return self._rows_for("ops", "op_index", scenario_id, model_id)

    def kernels_for(self, scenario_id: str, model_id: str | None = None) -> pd.DataFrame:
        return self._rows_for("kernels", "kernel_index", scenario_id, model_id)

    def ops_with_features(self, scenario_id: str | None = None) -> pd.DataFrame:
        """Op rows (configuration + time) joined with model features and scenario columns, plus
        ``kernel_type`` of the executing kernel and ``share`` = the op's fraction of the summed
        op time of its model x scenario."""
        df = self.ops if scenario_id is None else self.ops_for(scenario_id)
        df = df.reset_index(drop=True)
        k = self.kernels[["model_id", "scenario_id", "kernel_index", "kernel_type"]]
        df = df.merge(k, on=["model_id", "scenario_id", "kernel_index"], how="left", validate="many_to_one")
        total = df.groupby(["model_id", "scenario_id"])["latency_ms"].transform("sum")
        df["share"] = df["latency_ms"] / total
        return self._with_scenarios(self._with_models(df))

    def op_sum(self) -> pd.DataFrame:
        """Per model x scenario with ops: summed op time, op and fused-op counts, joined with the
        e2e latency (``gap_ms`` = e2e - sum of ops, the runtime's overhead outside the ops)."""
        if self.ops.empty:
            return pd.DataFrame(columns=["model_id", "scenario_id", "ops", "fused", "sum_ms", "latency_ms", "gap_ms"])
        g = self.ops.groupby(["model_id", "scenario_id"], sort=True)
        out = pd.DataFrame({"ops": g.size(), "fused": g["fused"].sum().astype("int64"),
                            "sum_ms": g["latency_ms"].sum()}).reset_index()
        out = out.merge(self.e2e[["model_id", "scenario_id", "latency_ms"]], on=["model_id", "scenario_id"], how="left")
        out["gap_ms"] = out["latency_ms"] - out["sum_ms"]
        return out

    # ------------------------------------------------------------ models
    def model(self, model_id: str) -> dict[str, Any]:
        df = self.models[self.models["model_id"] == model_id]
        if df.empty:
            raise KeyError(f"unknown model {model_id!r}")
        return {k: _py(v) for k, v in df.iloc[0].items()}

    def graph_passes(self, scenario_id: str) -> tuple[str, ...]:
        """The graph passes of a scenario (``scenarios.graph_passes``; () for the IR as written)."""
        if scenario_id not in self._passes:
            from generators.passes import parse_passes

            self._passes[scenario_id] = parse_passes(self.scenario(scenario_id).graph_passes,
                                                     where=f"scenarios.graph_passes of {scenario_id}")
        return self._passes[scenario_id]

    def graph(self, model_id: str, scenario_id: str | None = None) -> Any:
        """The IR of a model: the stored JSON, else rebuilt from ``arch`` (pytorchcv name or
        NAS-Bench-201 cell string); a rebuilt graph must hash to the row's id. With a scenario,
        the graph that scenario's toolchain ran: its ``graph_passes`` applied (cached)."""
        passes = self.graph_passes(scenario_id) if scenario_id is not None else ()
        if passes:
            key = (model_id, passes)
            if key not in self._graphs:
                from generators.passes import apply_passes

                self._graphs[key] = apply_passes(self.graph(model_id), passes)
            return self._graphs[key]
        if model_id in self._graphs:
            return self._graphs[model_id]
        from generators.ir import Graph

        row = self.model(model_id)
        if row.get("ir"):
            g = Graph.from_json(row["ir"], where=f"models.ir of {model_id}")
        elif row.get("arch") and row["source"] == "pytorch":
            g = pytorchcv_graph(row["arch"])
        elif row.get("arch") and row["source"] == "nasbench201":
            g = nasbench201_graph(row["arch"])
        else:
            raise KeyError(f"model {model_id!r}: no IR stored and no recipe to rebuild it (source {row['source']!r})")
        if ":" not in model_id and g.model_id != model_id:
            raise SchemaError(f"model {model_id!r}: the rebuilt IR hashes to {g.model_id} (the generator changed?)")
        self._graphs[model_id] = g
        return g

    # ------------------------------------------------------------ subsets
    def buildable(self) -> set[str]:
        """The model ids :meth:`graph` can build: an IR stored, or an arch a recipe rebuilds (a
        public source's network without IR has neither: no predictor reads it)."""
        m = self._t["models"]
        arch = m["arch"].notna() & m["source"].isin(["pytorch", "nasbench201"])
        return set(m.loc[m["ir"].notna() | arch, "model_id"])

    def subset(self, dataset: str | Iterable[str]) -> "Dataset":
        """Only the rows of the given source dataset(s) (``usc-mobile-ml-benchmark`` ...)."""
        names = {dataset} if isinstance(dataset, str) else set(dataset)
        t = {}
        for n in TABLES:
            df = self._t[n]
            t[n] = df[df["dataset"].isin(names)].reset_index(drop=True)
        return Dataset(t, path=self.path, check=False)


def load_dataset(path: str | Path, check: bool = True) -> Dataset:
    """Read ``<path>/{models,scenarios,e2e,ops,kernels}.parquet``. A missing table file reads as
    empty (e.g. a dataset without op records); no table at all is an error."""
    root = Path(path)
    if not root.is_dir() and not root.is_absolute():  # a committed release, e.g. "datasets/host-v1"
        from_project = Path(__file__).resolve().parents[2] / root
        root = from_project if from_project.is_dir() else root
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such dataset folder")
    files = {n: root / f"{n}.parquet" for n in TABLES}
    if not any(p.is_file() for p in files.values()):
        raise FileNotFoundError(f"{root}: no table files ({', '.join(p.name for p in files.values())})")
    tables = {n: (read_table(n, p, check=check) if p.is_file() else SCHEMAS[n].empty()) for n, p in files.items()}
    return Dataset(tables, path=root, check=check)


__all__ = ["Dataset", "Scenario", "load_dataset", "nasbench201_graph", "pytorchcv_graph", "save_tables"]
