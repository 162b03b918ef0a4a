"""PyTorch Mobile's Vulkan convolution kernels (USC study, Algorithm B.1), deduced from a
convolution's configuration.

``SELECTCONV2DKERNEL``: a transposed convolution runs the generic ``conv2d``; a depthwise one
(groups == input channels, output channels != 1) runs ``conv2d_dw_3x3`` or ``conv2d_dw_5x5``
for those kernel shapes, else ``conv2d_dw``; any other 1x1 convolution runs the pointwise
``conv2d_pw``; everything else ``conv2d``. The executed names carry a suffix for the
pointwise tile size (``vulkan.conv2d_pw_2x2``), which :func:`kernel_stem` removes.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pandas as pd

from generators.ir import Graph, Node

CONV2D, CONV2D_PW, CONV2D_DW = "conv2d", "conv2d_pw", "conv2d_dw"
CONV2D_DW_3X3, CONV2D_DW_5X5 = "conv2d_dw_3x3", "conv2d_dw_5x5"


@dataclass(frozen=True)
class VulkanConv:
    """What Algorithm B.1 reads of a convolution (``op_info``)."""

    in_channels: int
    out_channels: int
    kernel: tuple[int, int]
    groups: int
    transposed: bool = False


def select_conv_kernel(op: VulkanConv) -> str:
    """SELECTCONV2DKERNEL of Algorithm B.1."""
    if op.transposed:
        return CONV2D
    if op.groups == op.in_channels and op.out_channels != 1:
        if op.kernel == (3, 3):
            return CONV2D_DW_3X3
        if op.kernel == (5, 5):
            return CONV2D_DW_5X5
        return CONV2D_DW
    if op.kernel == (1, 1):
        return CONV2D_PW
    return CONV2D


def from_node(node: Node, graph: Graph) -> VulkanConv:
    """The configuration of an IR ``conv2d`` node."""
    if node.op != "conv2d":
        raise ValueError(f"node {node.name!r} ({node.op}): not a convolution")
    a = node.attrs
    return VulkanConv(graph.input_shapes(node)[0][1], a["out_channels"], tuple(a["kernel"]), a["groups"])


def from_row(row) -> VulkanConv:
    """The configuration of an ops-table row (square kernels, as the USC tables give them).
    Where the row has no ``groups`` (the USC PyTorch file omits it for depthwise convolutions)
    it follows from the weight count the source's config gives: ``filter_size = out * in /
    groups * k * k``."""
    k = int(row["kernel"])
    cin, cout, groups = int(row["in_channels"]), int(row["out_channels"]), row["groups"]
    if pd.isna(groups):
        cfg = json.loads(row["config"]) if isinstance(row.get("config"), str) else {}
        size = cfg.get("filter_size")
        if not isinstance(size, int) or size <= 0 or (cin * cout * k * k) % size:
            raise ValueError(f"op row {row.get('op_index')}: no groups and no usable filter_size in its config")
        groups = cin * cout * k * k // size
    return VulkanConv(cin, cout, (k, k), int(groups))


def deduce_kernels(graph: Graph) -> dict[str, str]:
    """IR node name -> Vulkan kernel, for every convolution of ``graph``."""
    return {n.name: select_conv_kernel(from_node(n, graph)) for n in graph.nodes.values() if n.op == "conv2d"}


def kernel_stem(name: str) -> str:
    """``vulkan.conv2d_pw_2x2`` -> ``conv2d_pw``; ``vulkan.conv2d_dw_3x3`` stays ``conv2d_dw_3x3``."""
    stem = name.split(".", 1)[-1]
    if stem.startswith(CONV2D_PW):
        return CONV2D_PW
    return re.sub(r"_\d+$", "", stem)


__all__ = ["VulkanConv", "deduce_kernels", "from_node", "from_row", "kernel_stem", "select_conv_kernel"]
