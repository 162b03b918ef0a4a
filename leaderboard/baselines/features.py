"""Op features of the USC study (Li, Paolieri, Golubchik; Section 4.2, Table 2), from either
source of ops, vectorized and cached.

An *op* here is one framework operator of a network in a scenario, described by a small raw
configuration (``RAW``: input/output height and channels, kernel, stride, padding, groups,
number of inputs). Two sources produce the same description:

- the dataset's **ops table** (``Dataset.ops_for(scenario)``): measured ops with their time
  (imported USC GPU op rows, the suite's own op records); the typed columns are read, the
  JSON ``config`` only where a column is left empty (TFLite CONCATENATION's input count);
- the **IR graph** (``Dataset.graph(model_id)``) of a network without op records in the
  scenario: one op per IR node except the graph input.

Per scenario, a network's ops come from the ops table when it has rows there, else from its IR
(:func:`op_frame`). Op configurations are *interned*: every distinct (op type, raw
configuration) gets one integer id in a process-wide :class:`ConfigTable`, so features are
computed once per distinct configuration and a predictor evaluates each distinct configuration
once per batch (networks of one search space share most of theirs). The per-network lists of
config ids are cached per dataset object (IR graphs) and per scenario (ops table).

Op categories are one registry (:data:`OP_CATEGORIES`): each names its op types and its
feature columns, which are the columns of Table 2 plus ``memory`` (elements read and written:
inputs + output + parameters, the memory access cost nn-Meter and the issue ask for). FLOPs are
multiply-accumulates for convolutions and FC (the IR's definition), window reads for pooling,
and elements touched for mean and element-wise ops (as the USC PyTorch files count them);
parameters are weights + biases. All derived columns are computed from the raw columns with
the same formulas for both sources, so a model trained on ops-table rows evaluates IR ops alike.
"""
from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from foundation.registry import Registry

# The raw configuration of an op; every derived feature is a function of these.
RAW = ("in_hw", "in_channels", "out_hw", "out_channels", "kernel", "stride", "padding", "groups", "n_inputs")
# Derived columns (computed per distinct configuration, vectorized).
DERIVED = ("in_size", "out_size", "filter_size", "params", "flops", "memory", "padding_size")
COLUMNS = RAW + DERIVED


@dataclass(frozen=True)
class OpCategory:
    """One row of the USC paper's Table 2: the op types it covers and their feature columns."""

    name: str
    op_types: tuple[str, ...]
    features: tuple[str, ...]
    flops: Callable[[dict[str, np.ndarray]], np.ndarray]  # per-op FLOPs from the raw/derived columns


OP_CATEGORIES: Registry[OpCategory] = Registry("op category")
_TYPE_TO_CATEGORY: dict[str, str] = {}
DEFAULT_CATEGORY = "elementwise"  # an op type no category names is memory-bound until shown otherwise


def register_category(cat: OpCategory) -> OpCategory:
    OP_CATEGORIES.register(cat.name)(cat)
    for t in cat.op_types:
        if t in _TYPE_TO_CATEGORY:
            raise ValueError(f"op type {t!r} is in categories {_TYPE_TO_CATEGORY[t]!r} and {cat.name!r}")
        _TYPE_TO_CATEGORY[t] = cat.name
    return cat


def category_of(op_type: str) -> str:
    """The category of an op type (``elementwise`` for a type no category names)."""
    return _TYPE_TO_CATEGORY.get(op_type, DEFAULT_CATEGORY)


def _conv_flops(c):  # multiply-accumulates: output elements x (input channels per group) x k^2
    return c["out_size"] * (c["in_channels"] / c["groups"]) * c["kernel"] ** 2


_CONV = ("in_hw", "in_channels", "out_hw", "stride", "kernel", "out_channels", "in_size", "out_size", "filter_size",
         "flops", "memory")
register_category(OpCategory("conv", ("conv2d",), _CONV, _conv_flops))
register_category(OpCategory("dwconv", ("dwconv2d",), _CONV, _conv_flops))
register_category(OpCategory("group_conv", ("group_conv2d",), _CONV + ("groups",), _conv_flops))
# a fully connected layer over N rows (tokens; 1 for a CNN's classifier) and a matmul of
# activations [b, M, K] x [b, K, N] keep their rows in ``kernel`` and their batch in ``groups``
# (generators.ops.op_config)
register_category(OpCategory("fc", ("fc",), ("in_channels", "out_channels", "params", "flops", "memory"),
                             lambda c: c["kernel"] * c["in_channels"] * c["out_channels"]))
register_category(OpCategory("matmul", ("matmul",), ("in_channels", "out_channels", "kernel", "groups", "flops",
                                                     "memory"),
                             lambda c: c["groups"] * c["kernel"] * c["in_channels"] * c["out_channels"]))
register_category(OpCategory("mean", ("global_avgpool", "mean", "reduce_max", "reduce_sum"),
                             ("in_hw", "in_channels", "kernel", "in_size", "flops", "memory"), lambda c: c["in_size"]))
register_category(OpCategory("concat_split", ("concat", "split"), ("in_hw", "in_channels", "kernel", "out_channels",
                                                                   "in_size", "out_size", "memory"),
                             lambda c: np.zeros_like(c["in_size"])))
register_category(OpCategory("pool", ("avgpool", "maxpool"), ("in_hw", "in_channels", "out_hw", "stride", "kernel",
                                                              "in_size", "out_size", "flops", "memory"),
                             lambda c: c["out_size"] * c["kernel"] ** 2))
register_category(OpCategory("pad", ("pad", "crop"), ("in_hw", "in_channels", "out_hw", "padding_size", "out_size",
                                                      "memory"), lambda c: np.zeros_like(c["in_size"])))
register_category(OpCategory(
    "elementwise",
    ("add", "mul", "sub", "div", "scale", "shift", "batchnorm", "relu", "relu6", "leaky_relu", "prelu", "hswish", "hsigmoid",
     "sigmoid", "swish", "tanh", "clip", "softmax", "channel_shuffle", "upsample", "reshape", "flatten"),
    ("in_hw", "in_channels", "in_size", "memory"), lambda c: c["in_size"] * c["n_inputs"]))


# ---------------------------------------------------------------- interned configurations
class ConfigTable:
    """Distinct (op type, raw configuration) tuples, each with an integer id, and their derived
    columns (filled lazily, vectorized, for the ids added since the last call)."""

    def __init__(self) -> None:
        self._ids: dict[tuple, int] = {}
        self.op_types: list[str] = []
        self._type_codes: dict[str, int] = {}
        self._type_of: list[int] = []
        self._raw: list[tuple] = []
        self._cols: np.ndarray = np.zeros((0, len(COLUMNS)))
        self._type_arr: np.ndarray = np.zeros(0, dtype=np.int32)
        self._from_ir: np.ndarray = np.zeros(0, dtype=np.int64)  # IR config id -> id here (-1: not yet)

    def __len__(self) -> int:
        return len(self._raw)

    def intern(self, op_type: str, raw: tuple) -> int:
        key = (op_type, *raw)
        i = self._ids.get(key)
        if i is None:
            i = self._ids[key] = len(self._raw)
            code = self._type_codes.get(op_type)
            if code is None:
                code = self._type_codes[op_type] = len(self.op_types)
                self.op_types.append(op_type)
            self._type_of.append(code)
            self._raw.append(raw)
        return i

    def from_ir_ids(self, gids: np.ndarray) -> np.ndarray:
        """The ids here of IR configuration ids (:func:`generators.ops.config_id`), interning the
        configurations this table has not seen yet."""
        from generators.ops import CONFIGS as IR_CONFIGS

        if len(gids) == 0:
            return np.zeros(0, dtype=np.int64)
        top = int(gids.max()) + 1
        if top > len(self._from_ir):
            self._from_ir = np.concatenate([self._from_ir, np.full(top - len(self._from_ir), -1, dtype=np.int64)])
        ids = self._from_ir[gids]
        if (ids < 0).any():
            for g in np.unique(gids[ids < 0]):
                c = IR_CONFIGS[g]
                self._from_ir[g] = self.intern(c[0], c[1:])
            ids = self._from_ir[gids]
        return ids

    def type_code(self, op_type: str) -> int:
        """The code of an op type (-1 if no configuration of that type was seen)."""
        return self._type_codes.get(op_type, -1)

    def _fill(self) -> None:
        n_old = self._cols.shape[0]
        if n_old == len(self._raw):
            return
        raw = np.asarray(self._raw[n_old:], dtype="float64").reshape(-1, len(RAW))
        types = np.asarray(self._type_of[n_old:], dtype=np.int32)
        cats = np.asarray([category_of(self.op_types[t]) for t in types], dtype=object)
        self._cols = np.vstack([self._cols, derive(raw, cats)])
        self._type_arr = np.concatenate([self._type_arr, types])

    def type_codes(self, ids: np.ndarray) -> np.ndarray:
        self._fill()
        return self._type_arr[ids]

    def columns(self, ids: np.ndarray, names: tuple[str, ...] = COLUMNS) -> np.ndarray:
        """The named columns (raw or derived) of the given configuration ids, float64 [n, len(names)]."""
        self._fill()
        return self._cols[np.ix_(ids, [COLUMNS.index(n) for n in names])]

    def features(self, ids: np.ndarray, category: str) -> np.ndarray:
        """The feature matrix of a category (its Table 2 columns) for the given ids."""
        return self.columns(ids, OP_CATEGORIES.get(category).features)


def derive(raw: np.ndarray, cats: np.ndarray) -> np.ndarray:
    """Raw columns [n, len(RAW)] -> all COLUMNS [n, len(COLUMNS)], vectorized per category."""
    c = {name: raw[:, i] for i, name in enumerate(RAW)}
    is_conv = np.isin(cats, ["conv", "dwconv", "group_conv"])
    is_fc, is_matmul = cats == "fc", cats == "matmul"
    # a product's rows (kernel) x batch (groups) stand where a feature map has its pixels
    rows = np.where(is_fc | is_matmul, c["kernel"] * np.where(is_matmul, c["groups"], 1.0), 1.0)
    c["in_size"] = c["in_channels"] * c["in_hw"] ** 2 * rows
    c["out_size"] = c["out_channels"] * c["out_hw"] ** 2 * rows
    filt = np.where(is_conv, c["out_channels"] * (c["in_channels"] / c["groups"]) * c["kernel"] ** 2, 0.0)
    c["filter_size"] = np.where(is_fc, c["in_channels"] * c["out_channels"], filt)
    bias = np.where(is_conv | is_fc, c["out_channels"], 0.0)
    c["params"] = c["filter_size"] + bias
    c["padding_size"] = np.abs(c["out_hw"] - c["in_hw"])  # rows (= columns) added (pad) or removed (crop)
    flops = np.zeros(len(raw))
    for name in np.unique(cats):
        m = cats == name
        flops[m] = OP_CATEGORIES.get(name).flops({k: v[m] for k, v in c.items()})
    c["flops"] = flops
    # memory access in elements: every input (concat: its output is the sum of its inputs) + output + params
    # a matmul reads [b, M, K] and [b, K, N]
    ins = np.where(cats == "concat_split", c["out_size"],
                   np.where(is_matmul, c["in_size"] + c["groups"] * c["in_channels"] * c["out_channels"],
                            c["in_size"] * c["n_inputs"]))
    c["memory"] = ins + c["out_size"] + c["params"]
    return np.column_stack([c[n] for n in COLUMNS])


CONFIGS = ConfigTable()


# ---------------------------------------------------------------- from the IR
_GRAPH_IDS: "weakref.WeakKeyDictionary[Any, tuple[int, np.ndarray]]" = weakref.WeakKeyDictionary()


def ir_config_ids(graph: Any) -> np.ndarray:
    """The interned op configuration of each of a graph's nodes, in node order (the input node
    skipped); remembered per graph object, so a batch predicted in several scenarios is featurized
    once (IR graphs only grow: :meth:`Graph.add_node` is their one mutation, and a graph that
    grew is featurized again)."""
    hit = _GRAPH_IDS.get(graph)
    if hit is not None and hit[0] == len(graph.nodes):
        return hit[1]
    ids = _config_ids(graph, CONFIGS)
    _GRAPH_IDS[graph] = (len(graph.nodes), ids)
    return ids


def _config_ids(graph: Any, table: ConfigTable) -> np.ndarray:
    # The shelf's hot path for graphs from a NAS loop (~200 ops per NAS-Bench-201 cell): the IR
    # gave each node its configuration's process-wide integer (generators.ops.config_id) when it
    # inferred the node's shapes, so this gathers integers and maps them with one array look-up.
    gids = np.fromiter((node.config_id for node in graph.nodes.values()), dtype=np.int64, count=len(graph.nodes))
    return table.from_ir_ids(gids[gids >= 0])


def ir_ops(graph: Any) -> tuple[list[str], list[tuple]]:
    """(op types, raw configurations) of a graph's nodes, in node order (the input node skipped):
    :func:`ir_config_ids` read back, for reports and tests."""
    ids = ir_config_ids(graph)
    return [CONFIGS.op_types[CONFIGS._type_of[i]] for i in ids], [CONFIGS._raw[i] for i in ids]


# ---------------------------------------------------------------- from the ops table
def _config_int(cfg: str, key: str) -> int | None:
    try:
        v = json.loads(cfg).get(key)
        return int(v)
    except (ValueError, TypeError, AttributeError):
        return None


def table_ops(ops: pd.DataFrame) -> tuple[list[str], np.ndarray]:
    """(op types, raw configurations [n, len(RAW)]) of op rows; empty columns get the value the
    op implies (kernel/stride/groups 1, padding 0, out = in for shape-preserving ops)."""
    n = len(ops)

    def col(name: str) -> np.ndarray:
        return ops[name].astype("Float64").to_numpy(dtype="float64", na_value=np.nan) if n else np.zeros(0)

    cin, hin, cout, hout = col("in_channels"), col("in_hw"), col("out_channels"), col("out_hw")
    k, s, p, g = col("kernel"), col("stride"), col("padding"), col("groups")
    types = ops["op_type"].astype(str).tolist()
    t = np.asarray(types, dtype=object)
    fc = t == "fc"
    hin = np.where(fc, 1, np.where(np.isnan(hin), 1, hin))
    hout = np.where(fc, 1, np.where(np.isnan(hout), np.where(t == "global_avgpool", 1, hin), hout))
    cout = np.where(np.isnan(cout), cin, cout)
    k = np.where(t == "global_avgpool", np.where(np.isnan(k), hin, k), k)
    n_in = np.where(np.isin(t, ["add", "mul", "sub", "div"]), 2, 1).astype("float64")
    cat = np.nonzero(t == "concat")[0]
    if len(cat):  # TFLite CONCATENATION: input count is in config["Kernel"]
        cfg = ops["config"].to_numpy()
        counts = [(_config_int(cfg[i], "Kernel") or 2) for i in cat]
        k[cat] = np.where(np.isnan(k[cat]), counts, k[cat])
        n_in[cat] = k[cat]
    k, s, p = np.nan_to_num(k, nan=1), np.nan_to_num(s, nan=1), np.nan_to_num(p, nan=0)
    g = np.where(np.isnan(g), np.where(t == "dwconv2d", cin, 1), g)
    raw = np.column_stack([hin, cin, hout, cout, k, s, p, g, n_in])
    return types, raw


# ---------------------------------------------------------------- per-network op lists (cached)
@dataclass(frozen=True)
class NetOps:
    """The ops of one network in one scenario: config ids, op indices, measured times (NaN where
    none) and whether each op is fused into another op's kernel (no time of its own)."""

    config: np.ndarray
    op_index: np.ndarray
    latency: np.ndarray
    fused: np.ndarray
    measured: bool  # from the ops table (True) or the IR (False)


_IR_CACHE: "weakref.WeakKeyDictionary[Any, dict[tuple, NetOps]]" = weakref.WeakKeyDictionary()
_TABLE_CACHE: "weakref.WeakKeyDictionary[Any, dict[str, dict[str, NetOps]]]" = weakref.WeakKeyDictionary()


def ir_netops(dataset: Any, model_id: str, scenario_id: str | None = None) -> NetOps:
    """A network's ops from its IR graph as the scenario ran it (``Dataset.graph``; cached per
    dataset object, model and the scenario's graph passes)."""
    cache = _IR_CACHE.setdefault(dataset, {})
    key = (model_id, dataset.graph_passes(scenario_id) if scenario_id is not None else ())
    hit = cache.get(key)
    if hit is None:
        ids = ir_config_ids(dataset.graph(model_id, scenario_id))
        n = len(ids)
        hit = cache[key] = NetOps(ids, np.arange(n), np.full(n, np.nan), np.zeros(n, bool), False)
    return hit


def table_netops(dataset: Any, scenario_id: str) -> dict[str, NetOps]:
    """Every network's ops from the ops table of a scenario (cached per dataset and scenario)."""
    cache = _TABLE_CACHE.setdefault(dataset, {})
    hit = cache.get(scenario_id)
    if hit is None:
        ops = dataset.ops_for(scenario_id)
        types, raw = table_ops(ops)
        # a feature the record lacks (NaN: e.g. a shape torch.profiler did not report) is -1,
        # a value of its own, never a real size
        raws = [tuple(int(v) if v == v else -1 for v in r) for r in raw]
        ids = np.fromiter((CONFIGS.intern(t, r) for t, r in zip(types, raws)), dtype=np.int64, count=len(types))
        lat = ops["latency_ms"].to_numpy(dtype="float64", na_value=np.nan) if len(ops) else np.zeros(0)
        fused = ops["fused"].to_numpy(dtype=bool, na_value=False) if len(ops) else np.zeros(0, bool)
        idx = ops["op_index"].to_numpy(dtype=np.int64) if len(ops) else np.zeros(0, np.int64)
        hit = {}
        mids = ops["model_id"].to_numpy(dtype=object)
        if len(mids):
            bounds = np.flatnonzero(mids[1:] != mids[:-1]) + 1  # ops_for sorts by model, op_index
            for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(mids)]):
                hit[str(mids[lo])] = NetOps(ids[lo:hi], idx[lo:hi], lat[lo:hi], fused[lo:hi], True)
        cache[scenario_id] = hit
    return hit


@dataclass(frozen=True)
class OpFrame:
    """The ops of a batch of networks, concatenated: ``net`` is each op's position in ``X``."""

    net: np.ndarray
    config: np.ndarray
    op_index: np.ndarray
    latency: np.ndarray
    fused: np.ndarray
    measured: np.ndarray  # per network: its ops come from the ops table
    n_nets: int

    @property
    def op_type_code(self) -> np.ndarray:
        return CONFIGS.type_codes(self.config)

    def op_types(self) -> np.ndarray:
        return np.asarray(CONFIGS.op_types, dtype=object)[self.op_type_code] if len(self.config) else np.zeros(0, object)


def op_frame(X: Any, source: str = "auto") -> OpFrame:
    """The ops of every network of ``X`` (a ``Networks``): from the ops table where the network has
    rows in ``X.scenario_id`` (``source="auto"``), else from its IR; ``source="ir"`` or ``"ops"``
    forces one (``"ops"`` raises for a network without op rows)."""
    if source not in ("auto", "ir", "ops"):
        raise ValueError(f"source must be 'auto', 'ir' or 'ops', got {source!r}")
    table = table_netops(X.dataset, X.scenario_id) if source != "ir" else {}
    parts: list[NetOps] = []
    for mid in X.model_ids:
        t = table.get(mid)
        if t is None:
            if source == "ops":
                raise KeyError(f"{X.scenario_id}: no op rows for model {mid}")
            t = ir_netops(X.dataset, mid, X.scenario_id)
        parts.append(t)
    sizes = np.fromiter((len(p.config) for p in parts), dtype=np.int64, count=len(parts))
    cat = (lambda attr, dt: np.concatenate([getattr(p, attr) for p in parts]) if parts else np.zeros(0, dt))
    return OpFrame(
        net=np.repeat(np.arange(len(parts)), sizes),
        config=cat("config", np.int64),
        op_index=cat("op_index", np.int64),
        latency=cat("latency", np.float64),
        fused=cat("fused", bool),
        measured=np.fromiter((p.measured for p in parts), dtype=bool, count=len(parts)),
        n_nets=len(parts),
    )


def op_features_frame(X: Any, source: str = "auto") -> pd.DataFrame:
    """A readable table of the ops of ``X``: model_id, op_index, op_type, category, every raw and
    derived column, latency_ms (measured, NaN where none) and fused."""
    f = op_frame(X, source)
    types = f.op_types()
    df = pd.DataFrame(CONFIGS.columns(f.config), columns=list(COLUMNS))
    df.insert(0, "model_id", np.asarray(X.model_ids, dtype=object)[f.net] if len(f.net) else [])
    df.insert(1, "op_index", f.op_index)
    df.insert(2, "op_type", types)
    df.insert(3, "category", [category_of(t) for t in types])
    df["latency_ms"] = f.latency
    df["fused"] = f.fused
    return df


__all__ = ["CONFIGS", "COLUMNS", "DERIVED", "OP_CATEGORIES", "OpCategory", "OpFrame", "RAW", "NetOps",
           "category_of", "derive", "ir_config_ids", "ir_ops", "op_features_frame", "op_frame", "register_category",
           "table_ops"]
