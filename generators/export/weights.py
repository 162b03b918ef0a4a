"""Random but deterministic weights and inputs, derived from the model id alone.

Both exporters take their parameters from here, in PyTorch's layout (conv weight
``[out, in/groups, kh, kw]``, fc weight ``[out, in]``, layer norm ``weight``/``bias`` over
its axis, a position embedding's ``weight`` in the input's shape ``[1, ...]``, a class token's
``[1, 1, C]``); the TFLite exporter transposes.
So the two exports of one network compute the same function, and re-exporting gives
the same file. Each node draws from its own stream (model id, node position), so a
node's weights do not depend on how many numbers other nodes drew.

Scales keep activations O(1) through deep random networks: fan-in scaled weights with
ReLU gain, batch norm statistics near identity.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import Graph, Node


def _rng(model_id: str, index: int) -> np.random.Generator:
    return np.random.default_rng([int(model_id, 16) & 0xFFFFFFFF, int(model_id, 16) >> 32, index])


def node_weights(graph: Graph, node: Node, index: int, model_id: str | None = None) -> dict[str, np.ndarray]:
    """Parameters of one node (empty for parameter-free operators), float32."""
    model_id = model_id or graph.model_id
    rng = _rng(model_id, index)
    a = node.attrs
    if node.op == "conv2d":
        cin = graph.tensor_shape(node.inputs[0])[1]
        kh, kw = a["kernel"]
        fan_in = (cin // a["groups"]) * kh * kw
        w = rng.normal(0.0, math.sqrt(2.0 / fan_in), size=(a["out_channels"], cin // a["groups"], kh, kw))
        out = {"weight": w}
        if a["bias"]:
            out["bias"] = rng.normal(0.0, 0.05, size=(a["out_channels"],))
    elif node.op == "fc":
        fin = graph.tensor_shape(node.inputs[0])[-1]
        out = {"weight": rng.normal(0.0, math.sqrt(1.0 / fin), size=(a["out_features"], fin))}
        if a["bias"]:
            out["bias"] = rng.normal(0.0, 0.05, size=(a["out_features"],))
    elif node.op == "batchnorm":
        c = graph.tensor_shape(node.inputs[0])[1]
        out = {
            "weight": rng.uniform(0.8, 1.2, size=(c,)),
            "bias": rng.normal(0.0, 0.05, size=(c,)),
            "running_mean": rng.normal(0.0, 0.05, size=(c,)),
            "running_var": rng.uniform(0.8, 1.2, size=(c,)),
        }
    elif node.op == "layernorm":
        x = graph.tensor_shape(node.inputs[0])
        c = x[a["axis"] % len(x)]
        out = {"weight": rng.uniform(0.8, 1.2, size=(c,)), "bias": rng.normal(0.0, 0.05, size=(c,))}
    elif node.op == "instancenorm":
        c = graph.tensor_shape(node.inputs[0])[1]
        out = {"weight": rng.uniform(0.8, 1.2, size=(c,)), "bias": rng.normal(0.0, 0.05, size=(c,))}
    elif node.op == "pos_embed":  # a visible shift of the tokens, which stay O(1)
        out = {"weight": rng.normal(0.0, 0.2, size=tuple(graph.tensor_shape(node.inputs[0])))}
    elif node.op == "cls_token":  # a token of the tokens' scale (a near-zero one reads out noise)
        c = graph.tensor_shape(node.inputs[0])[-1]
        out = {"weight": rng.normal(0.0, 1.0, size=(1, 1, c))}
    elif node.op == "prelu":
        out = {"weight": rng.uniform(0.1, 0.3, size=(a["num_parameters"],))}
    else:
        out = {}
    return {k: v.astype(np.float32) for k, v in out.items()}


def graph_weights(graph: Graph) -> dict[str, dict[str, np.ndarray]]:
    mid = graph.model_id
    return {n.name: node_weights(graph, n, i, mid) for i, n in enumerate(graph.nodes.values())}


def example_input(graph: Graph, sample: int = 0) -> dict[str, np.ndarray]:
    """A deterministic NCHW float32 input per input node (``sample`` picks another draw)."""
    mid = graph.model_id
    return {
        n.name: _rng(mid, 1_000_000 + sample * 1000 + i).standard_normal(n.shape).astype(np.float32)
        for i, n in enumerate(graph.input_nodes)
    }
