"""Transformer operators of the IR (layernorm, gelu, matmul, transpose, mean; fc over tokens; the
learned pos_embed and cls_token): shape inference, attribute checks, costs, and ViT- and
DeiT-like graphs against the same networks written with torch.nn (parameters,
multiply-accumulates and outputs)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from generators import blocks as B
from generators.export import torch_module as tm
from generators.export.weights import graph_weights
from generators.ir import Graph, IRError
from support.nets import deit_tiny, vit_tiny


def _one(shape: list[int], op: str, *more: str, **attrs) -> tuple[Graph, str]:
    g = Graph()
    x = g.input(shape)
    return g, g.add(op, [x, *more] if more else x, **attrs)


# ---------------------------------------------------------------- shapes and costs
def test_token_and_attention_shapes_and_costs():
    g = Graph()
    t = g.input([1, 5, 8])
    y = g.add("fc", t, out_features=6)
    assert g.shape(y) == [1, 5, 6]
    q = g.add("transpose", g.add("reshape", y, shape=[1, 5, 2, 3]), perm=[0, 2, 1, 3])
    k = g.add("transpose", g.add("reshape", y, shape=[1, 5, 2, 3]), perm=[0, 2, 3, 1])
    s = g.add("matmul", [q, k])
    n = g.add("layernorm", t, eps=1e-6)
    m = g.add("mean", t, axis=1)
    mk = g.add("mean", t, axis=-1, keepdim=True)
    u = g.add("gelu", t, approximate="tanh")
    assert g.shape(q) == [1, 2, 5, 3] and g.shape(k) == [1, 2, 3, 5] and g.shape(s) == [1, 2, 5, 5]
    assert g.shape(m) == [1, 8] and g.shape(mk) == [1, 5, 1] and g.shape(n) == g.shape(u) == [1, 5, 8]
    g.set_outputs(s, n, m, mk, u)
    cost = {c.op: c for c in g.costs()}
    assert cost["fc"].macs == 5 * 8 * 6 and cost["fc"].params == 8 * 6 + 6
    assert cost["matmul"].macs == 2 * 5 * 3 * 5 and cost["matmul"].params == 0  # batch * M * K * N
    assert cost["layernorm"].params == 2 * 8 and cost["layernorm"].macs == 0
    assert cost["gelu"].macs == cost["transpose"].macs == cost["mean"].macs == 0
    assert g.flops == 5 * 8 * 6 + 2 * 5 * 3 * 5


def test_learned_constant_tensors_shapes_and_costs():
    g = Graph()
    t = g.input([1, 5, 8])
    c = g.add("cls_token", t)
    p = g.add("pos_embed", c)
    img = g.add("pos_embed", g.input([1, 3, 4, 6], name="image"))
    g.set_outputs(p, img)
    assert g.shape(c) == [1, 6, 8] and g.shape(p) == [1, 6, 8] and g.shape(img) == [1, 3, 4, 6]
    cost = {c.name: c for c in g.costs()}
    assert (cost[c].params, cost[c].macs) == (8, 0)  # one token of C
    assert (cost[p].params, cost[p].macs) == (6 * 8, 0)  # one value per element of the tokens
    assert (cost[img].params, cost[img].macs) == (3 * 4 * 6, 0)
    assert g.params == 8 + 48 + 72 and g.flops == 0
    # memory access: input + output + parameters
    assert [cost[n].memory_elements for n in (c, p, img)] == [5 * 8 + 6 * 8 + 8, 3 * 48, 3 * 72]


def test_class_token_readout_is_split_and_reshape():
    g = deit_tiny()
    split = next(n for n in g.nodes.values() if n.op == "split" and n.attrs["axis"] == 1)
    assert split.attrs["sections"] == [1, 16] and split.shapes == [[1, 1, 16], [1, 16, 16]]
    reader = g.consumers()[split.name]
    assert [g.nodes[r].op for r in reader] == ["reshape"] and g.nodes[reader[0]].shape == [1, 16]


def test_cls_token_needs_tokens():
    g = Graph()
    with pytest.raises(IRError, match=r"node 'bad' \(cls_token\): input \(tokens \[1, N, C\]\) must have rank 3, "
                       r"got shape \[1, 4, 5, 6\]") as e:
        g.add("cls_token", g.input([1, 4, 5, 6]), name="bad")
    assert "\n" not in str(e.value)


def test_channel_layernorm_of_an_image_counts_channel_parameters():
    g, y = _one([1, 6, 4, 5], "layernorm", axis=1)
    g.set_outputs(y)
    assert g.shape(y) == [1, 6, 4, 5] and g.params == 12


def test_matmul_broadcasts_batch_dimensions():
    g = Graph()
    a, b = g.input([1, 3, 4, 5], name="a"), g.input([1, 1, 5, 2], name="b")
    y = g.add("matmul", [a, b])
    g.set_outputs(y)
    assert g.shape(y) == [1, 3, 4, 2] and g.flops == 3 * 4 * 5 * 2


@pytest.mark.parametrize("shape,op,attrs,message", [
    ([1, 4, 5], "transpose", {"perm": [0, 2]}, r"perm \[0, 2\] is not a permutation of the 3 axes"),
    ([1, 4, 5], "transpose", {"perm": [1, 0, 2]}, r"perm \[1, 0, 2\] must keep the batch axis first"),
    ([1, 4, 5], "transpose", {"perm": 3}, "perm must be a permutation of the input's axes"),
    ([1, 4, 5], "mean", {"axis": 0}, "axis must not be the batch axis 0"),
    ([1, 4, 5], "mean", {}, "missing required attribute 'axis' for mean"),
    ([1, 4, 5], "layernorm", {"axis": 3}, "axis 3 out of range for rank 3"),
    ([1, 4, 5], "gelu", {"approximate": "erf"}, "approximate must be 'none' or 'tanh', got 'erf'"),
    ([1], "fc", {"out_features": 3}, r"input of fc must have rank >= 2, got shape \[1\]"),
])
def test_bad_attributes_and_shapes_are_one_line_errors_naming_the_node(shape, op, attrs, message):
    g = Graph()
    x = g.input(shape)
    with pytest.raises(IRError, match=rf"node 'bad' \({op}\): {message}") as e:
        g.add(op, x, name="bad", **attrs)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("a,b,message", [
    ([1, 2, 4, 5], [1, 2, 4, 5], r"cannot multiply \[1, 2, 4, 5\] by \[1, 2, 4, 5\]: inner sizes 5 and 4 differ"),
    ([1, 2, 4, 5], [1, 3, 5, 2], "batch dimensions of .* do not broadcast"),
    ([1, 4, 5], [1, 2, 5, 2], "inputs must have the same rank >= 2"),
])
def test_matmul_shape_errors(a, b, message):
    g = Graph()
    x, y = g.input(a, name="x"), g.input(b, name="y")
    with pytest.raises(IRError, match=rf"node 'mm' \(matmul\): {message}"):
        g.add("matmul", [x, y], name="mm")


def test_ir_round_trip_keeps_the_transformer_graph():
    g = vit_tiny()
    again = Graph.from_json(g.to_json())
    assert again.model_id == g.model_id and again.to_json() == g.to_json()


# ---------------------------------------------------------------- the same ViT in torch.nn
class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = (t.reshape(b, n, self.heads, c // self.heads).transpose(1, 2) for t in self.qkv(x).split(c, dim=-1))
        a = ((q * self.scale) @ k.transpose(-2, -1)).softmax(-1)
        return self.proj((a @ v).transpose(1, 2).reshape(b, n, c))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    """tests/support/nets.py's vit_tiny written as timm writes a ViT (mean pooling, no class token)."""

    def __init__(self, dim: int = 16, heads: int = 2, depth: int = 2, patch: int = 4, classes: int = 10):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.blocks = nn.Sequential(*(Block(dim, heads, 2 * dim) for _ in range(depth)))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.patch(x).flatten(2).transpose(1, 2))
        return self.head(self.norm(x).mean(1))


def test_vit_graph_counts_what_torch_counts():
    g, vit = vit_tiny(), TinyViT().eval()
    assert g.params == sum(p.numel() for p in vit.parameters())
    with FlopCounterMode(display=False) as counter:
        vit(torch.zeros(1, 3, 16, 16))
    assert 2 * g.flops == counter.get_total_flops()  # FlopCounterMode counts 2 per multiply-accumulate
    assert g.op_counts()["matmul"] == 4 and g.op_counts()["layernorm"] == 5


def test_vit_graph_computes_what_the_torch_vit_computes():
    g, vit = vit_tiny(), TinyViT().eval()
    weights = graph_weights(g)
    layers = [m for m in vit.modules() if isinstance(m, (nn.Conv2d, nn.Linear, nn.LayerNorm))]
    nodes = [n for n in g.nodes.values() if weights[n.name]]
    assert [type(m).__name__ for m in layers] == [{"conv2d": "Conv2d", "fc": "Linear", "layernorm": "LayerNorm"}[n.op] for n in nodes]
    for m, n in zip(layers, nodes):
        m.load_state_dict({k: torch.from_numpy(v) for k, v in weights[n.name].items()})
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32))
    with torch.no_grad():
        np.testing.assert_allclose(tm.to_module(g)(x).numpy(), vit(x).numpy(), rtol=1e-5, atol=1e-5)


class TinyDeiT(TinyViT):
    """tests/support/nets.py's deit_tiny as timm writes it: a class token and a position
    embedding (``nn.Parameter``), read out by ``x[:, 0]``."""

    def __init__(self, dim: int = 16, tokens: int = 16):
        super().__init__(dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, tokens + 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


def test_deit_graph_counts_and_computes_what_the_torch_deit_does():
    g, deit = deit_tiny(), TinyDeiT().eval()
    assert g.params == sum(p.numel() for p in deit.parameters())
    x = torch.from_numpy(np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32))
    with FlopCounterMode(display=False) as counter:
        deit(x)
    assert 2 * g.flops == counter.get_total_flops()
    weights = graph_weights(g)
    layers = [m for m in deit.modules() if isinstance(m, (nn.Conv2d, nn.Linear, nn.LayerNorm))]
    nodes = [n for n in g.nodes.values() if weights[n.name] and n.op not in ("cls_token", "pos_embed")]
    for m, n in zip(layers, nodes, strict=True):
        m.load_state_dict({k: torch.from_numpy(v) for k, v in weights[n.name].items()})
    by_op = {n.op: weights[n.name]["weight"] for n in g.nodes.values() if n.op in ("cls_token", "pos_embed")}
    with torch.no_grad():
        deit.cls_token.copy_(torch.from_numpy(by_op["cls_token"]))
        deit.pos_embed.copy_(torch.from_numpy(by_op["pos_embed"]))
        np.testing.assert_allclose(tm.to_module(g)(x).numpy(), deit(x).numpy(), rtol=1e-5, atol=1e-5)


def test_attention_block_rejects_heads_that_do_not_divide_channels():
    g = Graph()
    with pytest.raises(ValueError, match="attention: 3 heads do not divide 16 channels"):
        B.attention(g, g.input([1, 4, 16]), heads=3)
