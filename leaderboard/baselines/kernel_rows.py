"""Kernels as table rows: the description the kernel-level baselines share, and the operators
LiteRT runs for a graph, described that way.

A kernel, however it was found (nn-Meter's fusion rules, an XNNPACK operator, a dataset op row,
an adaptive-sampling record), is one row of :data:`DESC_COLUMNS`: its type, input and output
spatial size, channels, kernel size, stride, groups and number of inputs. :func:`with_costs`
derives its MACs, weights and memory traffic from those columns by one formula, so the same
kernel gets the same features from every source.

:func:`xnnpack_kernels` lists the operators LiteRT runs for an IR graph (the deduction of
:mod:`kernels.xnnpack`) with their rows; :func:`cached_xnnpack_kernels` remembers them per
graph object. They are a property of the graph, not of one predictor: ``nnmeter_xnnpack``
(:mod:`.nnmeter_kernelwise`) predicts each operator with a forest, ``additive_mlp``
(:mod:`.additive_mlp`) with an MLP learnt from end-to-end sums.
"""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pandas as pd

#: A kernel's description: one row per kernel, in every source.
DESC_COLUMNS = ("kernel_type", "hw", "out_hw", "cin", "cout", "k", "s", "groups", "n_inputs")

#: Kernel types whose MACs and parameters :func:`with_costs` counts as a convolution's.
CONV_TYPES = ("conv", "gconv", "dwconv", "conv1x1", "dwconv_igemm")


def with_costs(desc: pd.DataFrame) -> pd.DataFrame:
    """Add ``flops`` (MACs), ``params`` (weights) and ``memory`` (elements read and written)."""
    d = desc.copy()
    t = d["kernel_type"].to_numpy()
    conv = np.isin(t, list(CONV_TYPES))
    fc = t == "fc"
    per_out = np.where(conv, d["cin"] / d["groups"].clip(lower=1) * d["k"] ** 2, 0.0)
    d["flops"] = np.where(conv, d["out_hw"] ** 2 * d["cout"] * per_out, np.where(fc, d["cin"] * d["cout"], 0.0))
    d["params"] = np.where(conv, d["cout"] * per_out, np.where(fc, d["cin"] * d["cout"], 0.0))
    d["memory"] = d["hw"] ** 2 * d["cin"] * d["n_inputs"].clip(lower=1) + d["out_hw"] ** 2 * d["cout"] + d["params"]
    return d


# ---------------------------------------------------------------- kernel descriptions
def _spatial(shape: list[int]) -> int:
    return int(shape[2]) if len(shape) == 4 else 1


def describe_kernel(kernel: Any, graph: Any) -> dict[str, Any]:
    """The :data:`DESC_COLUMNS` row of one kernel found in an IR graph (from its first node)."""
    node = graph.nodes[kernel.nodes[0]]
    ins = graph.input_shapes(node)
    x, out = ins[0], node.shape
    return {"kernel_type": kernel.type, "hw": _spatial(x), "out_hw": _spatial(out),
            "cin": int(x[1]) if len(x) > 1 else 1, "cout": int(out[1]) if len(out) > 1 else 1,
            "k": int(node.attrs.get("kernel", [1, 1])[0]), "s": int(node.attrs.get("stride", [1, 1])[0]),
            "groups": int(node.attrs.get("groups", 1)), "n_inputs": len(node.inputs)}


# ---------------------------------------------------------------- the operators LiteRT runs
def xnnpack_kernel_type(kernel: Any, graph: Any) -> str:
    """The kernel type of an XNNPACK operator or builtin kernel (a :class:`kernels.xnnpack.KernelOp`;
    ``nnmeter_xnnpack`` has a forest per type): the convolution variant XNNPACK picked, else the
    operator itself."""
    import re

    node = graph.nodes[kernel.node]
    name = kernel.name
    if not kernel.delegated:
        return "builtin_" + kernel.tflite_op.lower()
    if name.startswith("Convolution"):
        cin = graph.input_shapes(node)[0][1]
        groups = int(node.attrs.get("groups", 1))
        if groups == cin and cin > 1:
            return "dwconv" if name.endswith("DWConv") else "dwconv_igemm"
        return "gconv" if groups > 1 or name.endswith(" GEMM") else "conv"
    if name.startswith("Fully Connected"):
        return "conv1x1" if kernel.tflite_op == "CONV_2D" else "fc"
    if name.startswith("Copy"):
        return "concat" if kernel.tflite_op == "CONCATENATION" else "split"
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def xnnpack_kernels(graph: Any) -> tuple[list[Any], pd.DataFrame]:
    """The operators LiteRT runs for ``graph`` and their :data:`DESC_COLUMNS` rows (+ ``kernel``,
    the operator's name, and ``nodes``, its IR node), in execution order."""
    from kernels.nnmeter_rules import Kernel
    from kernels.xnnpack import converted_graph, deduce_kernel_ops

    # the operators name the nodes of the graph as the exporter lowers it (an n-ary add becomes
    # partial sums, NAS-Bench-201's cells: 'add_1/partial_0'), so they are described from it
    graph = converted_graph(graph)
    ops = deduce_kernel_ops(graph)
    rows = [{**describe_kernel(Kernel((k.node,), (xnnpack_kernel_type(k, graph),)), graph), "kernel": k.name,
             "nodes": k.node} for k in ops]
    return ops, pd.DataFrame(rows, columns=[*DESC_COLUMNS, "kernel", "nodes"])


_XNNPACK: "weakref.WeakKeyDictionary[Any, tuple[list[Any], pd.DataFrame]]" = weakref.WeakKeyDictionary()


def cached_xnnpack_kernels(graph: Any) -> tuple[list[Any], pd.DataFrame]:
    """:func:`xnnpack_kernels`, remembered per graph object (every fold and refit reads them) and
    recomputed if the graph has gained nodes since. The result is shared: do not modify it."""
    hit = _XNNPACK.get(graph)
    if hit is None or hit[1].attrs.get("n_nodes") != len(graph.nodes):
        hit = xnnpack_kernels(graph)
        hit[1].attrs["n_nodes"] = len(graph.nodes)
        _XNNPACK[graph] = hit
    return hit


__all__ = ["CONV_TYPES", "DESC_COLUMNS", "cached_xnnpack_kernels", "describe_kernel", "with_costs",
           "xnnpack_kernel_type", "xnnpack_kernels"]
