"""The USC GPU rules against the kernels the USC phones executed (public ops tables).

For each network and GPU scenario, the kernels deduced from the network's IR
(:func:`gpu_tflite.deduce_kernels`) are aligned with the op rows of the imported USC table
(``ops`` rows carry the executed ``kernel_name``): the k-th row of a configuration (operator,
channels, kernel, stride, groups, output size) is paired with the k-th deduced kernel of the
same configuration, so the two orders may differ between branches. Per aligned row three
properties are compared, each read from the executed name: *fused* (ops linked into the
kernel), *Winograd*, *grouped*; ``exact`` also compares the whole kernel type (which ops are
linked, ``fully_connected`` or ``mean`` after the delegate's rewrites).

PyTorch Vulkan rows are checked op by op (Algorithm B.1 needs only the row's configuration).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

import pandas as pd

from generators.ir import Graph
from pipelines.dataset.usc import kernel_type as executed_type

from . import gpu_tflite, gpu_vulkan

#: Row fields that identify an op's configuration, per TFLite operator (as the USC rows give them).
KEY_FIELDS: dict[str, tuple[str, ...]] = {
    "CONV_2D": ("in_channels", "out_channels", "kernel", "stride", "out_hw"),
    "CONV_2D_GROUP": ("in_channels", "out_channels", "kernel", "stride", "groups", "out_hw"),
    "DEPTHWISE_CONV_2D": ("in_channels", "out_channels", "kernel", "stride", "out_hw"),
    "FULLY_CONNECTED": ("in_channels", "out_channels"),
    "MEAN": ("in_channels",),
    "AVERAGE_POOL_2D": ("in_channels", "kernel", "stride", "out_hw"),
    "MAX_POOL_2D": ("in_channels", "kernel", "stride", "out_hw"),
    "CONCATENATION": ("out_channels", "out_hw"),
}


def kernel_fields(k: gpu_tflite.GpuKernel | gpu_tflite.GpuOp, graph: Graph) -> dict[str, int]:
    """The configuration fields of a deduced kernel's (or op's) first op, named as the ops
    table's columns."""
    node = graph.nodes[k.nodes[0]]
    ins = graph.input_shapes(node)
    if k.conv is not None:
        c = k.conv
        return {"in_channels": c.in_channels, "out_channels": c.out_channels, "kernel": c.kernel[0],
                "stride": c.stride[0], "groups": c.groups, "out_hw": c.out_h}
    f = {"in_channels": ins[0][1] if ins else None, "out_channels": node.shape[1]}
    if ins and len(ins[0]) == 4:
        f["in_hw"] = ins[0][2]
    if len(node.shape) == 4:
        f["out_hw"] = node.shape[2]
    if node.op in ("avgpool", "maxpool"):
        f["kernel"], f["stride"] = node.attrs["kernel"][0], node.attrs["stride"][0]
    return f


def _key(op: str, fields: dict[str, Any]) -> tuple:
    # A global average pool is MEAN in some of the source's models and AVERAGE_POOL_2D (run
    # as the delegate's mean) in others: one key for both.
    if op == "AVERAGE_POOL_2D" and not pd.isna(fields.get("kernel")) and not pd.isna(fields.get("in_hw")) \
            and fields.get("kernel") == fields.get("in_hw"):
        op = "MEAN"
    return (op,) + tuple(None if pd.isna(fields.get(f)) else int(fields.get(f)) for f in KEY_FIELDS.get(op, ()))


@dataclass
class Flags:
    fused: bool
    winograd: bool
    grouped: bool
    kernel_type: str

    @classmethod
    def executed(cls, name: str) -> "Flags":
        t = executed_type(name)
        return cls("+" in t, "winograd" in t, "grouped" in t, t)

    @classmethod
    def deduced(cls, k: gpu_tflite.GpuKernel) -> "Flags":
        return cls(k.fused and not k.winograd, k.winograd, k.grouped, k.kernel_type)


@dataclass
class Comparison:
    """Counts over aligned rows of one scenario (or a whole device)."""

    rows: int = 0
    aligned: int = 0
    fused: int = 0
    winograd: int = 0
    grouped: int = 0
    all3: int = 0
    exact: int = 0
    mismatches: list[dict[str, Any]] = field(default_factory=list)

    def share(self, what: str) -> float:
        return getattr(self, what) / self.aligned if self.aligned else float("nan")

    def add(self, other: "Comparison") -> None:
        for f in ("rows", "aligned", "fused", "winograd", "grouped", "all3", "exact"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.mismatches += other.mismatches


def align(rows: pd.DataFrame, kernels: list, graph: Graph) -> list[tuple[int, Any]]:
    """Pairs (row position, deduced kernel or delegate op): the k-th row of a configuration
    with the k-th kernel of that configuration. Rows without a partner are left out."""
    pool: dict[tuple, list[gpu_tflite.GpuKernel]] = defaultdict(list)
    for k in kernels:
        op = k.tflite_op
        if op in KEY_FIELDS:
            pool[_key(op, kernel_fields(k, graph))].append(k)
    used: dict[tuple, int] = defaultdict(int)
    out = []
    for pos, (_, r) in enumerate(rows.iterrows()):
        key = _key(r["framework_op"], r)
        cands = pool.get(key, [])
        if used[key] < len(cands):
            out.append((pos, cands[used[key]]))
            used[key] += 1
    return out


def row_order(rows: pd.DataFrame, graph: Graph) -> list[str]:
    """The IR nodes of the rows' ops, in the rows' order (the model file's op order): aligned
    with the delegate ops of the IR in ``dfs`` order by configuration."""
    ops = gpu_tflite.delegate_ops(graph, "dfs")
    return [op.main_node for _, op in align(rows, ops, graph)]


def compare_tflite(rows: pd.DataFrame, graph: Graph, gpu: str, order: str = "dfs", **deduce: Any) -> Comparison:
    """One network in one TFLite GPU scenario: ``rows`` are its op rows with a kernel name.
    ``order``: ``dfs`` or ``ir`` (from the IR alone), or ``rows``: the main ops in the rows'
    order (the op order of the model file the source ran), the others as soon as computable."""
    rows = rows[rows["kernel_name"].notna()].reset_index(drop=True)
    kernels = gpu_tflite.deduce_kernels(graph, gpu, order=row_order(rows, graph) if order == "rows" else order, **deduce)
    c = Comparison(rows=len(rows))
    for pos, k in align(rows, kernels, graph):
        r = rows.iloc[pos]
        obs, ded = Flags.executed(r["kernel_name"]), Flags.deduced(k)
        c.aligned += 1
        ok = {f: getattr(obs, f) == getattr(ded, f) for f in ("fused", "winograd", "grouped")}
        for f, v in ok.items():
            setattr(c, f, getattr(c, f) + int(v))
        c.all3 += int(all(ok.values()))
        c.exact += int(obs.kernel_type == ded.kernel_type)
        if not all(ok.values()):
            c.mismatches.append({"op_index": int(r["op_index"]), "framework_op": r["framework_op"],
                                 "executed": obs.kernel_type, "deduced": ded.kernel_type, "nodes": k.nodes})
    return c


def check_tflite(dataset: Any, scenario_ids: Iterable[str] | None = None, models: Iterable[str] | None = None,
                 **deduce: Any) -> dict[str, Comparison]:
    """Per TFLite GPU scenario of ``dataset`` (a loaded Dataset), the comparison over its networks
    (all, or the pytorchcv ``models`` given by name)."""
    sc = dataset.scenarios
    if scenario_ids is None:
        sel = sc[(sc["accelerator"] == "gpu") & (sc["framework"] == "tflite")]
        scenario_ids = [s for s in sel["scenario_id"] if s in set(dataset.ops["scenario_id"])]
    names = dict(zip(dataset.models["model_id"], dataset.models["name"]))
    wanted = set(models) if models is not None else None
    out: dict[str, Comparison] = {}
    for sid in scenario_ids:
        gpu = str(sc.loc[sc["scenario_id"] == sid, "gpu"].iloc[0])
        total = Comparison()
        ops = dataset.ops_for(sid)
        for mid, rows in ops.groupby("model_id", sort=True):
            if wanted is not None and names.get(mid) not in wanted:
                continue
            c = compare_tflite(rows, dataset.graph(mid), gpu, **deduce)
            for m in c.mismatches:
                m["model"] = names.get(mid, mid)
            total.add(c)
        out[sid] = total
    return out


def check_vulkan(dataset: Any, scenario_ids: Iterable[str] | None = None) -> dict[str, Comparison]:
    """Per PyTorch Vulkan GPU scenario, Algorithm B.1 on every convolution row against the
    executed kernel (``winograd``/``grouped``/``fused`` do not apply; ``exact`` counts)."""
    sc = dataset.scenarios
    if scenario_ids is None:
        sel = sc[(sc["accelerator"] == "gpu") & (sc["framework"] == "pytorch")]
        scenario_ids = [s for s in sel["scenario_id"] if s in set(dataset.ops["scenario_id"])]
    out = {}
    for sid in scenario_ids:
        ops = dataset.ops_for(sid)
        conv = ops[(ops["framework_op"] == "vulkan_prepack::run_conv2d_context") & ops["kernel_name"].notna()]
        conv = conv[conv["kernel_name"].str.startswith("vulkan.")]
        c = Comparison(rows=len(conv), aligned=len(conv))
        for _, r in conv.iterrows():
            ded, obs = gpu_vulkan.select_conv_kernel(gpu_vulkan.from_row(r)), gpu_vulkan.kernel_stem(r["kernel_name"])
            if ded == obs:
                c.exact += 1
            else:
                c.mismatches.append({"op_index": int(r["op_index"]), "model_id": r["model_id"], "executed": obs, "deduced": ded})
        out[sid] = c
    return out


__all__ = ["Comparison", "Flags", "KEY_FIELDS", "align", "check_tflite", "check_vulkan", "compare_tflite", "kernel_fields"]
