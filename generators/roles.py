"""The part of a transformer an IR node belongs to: attention, MLP, norm or other.

The blocks that build transformers (``blocks.attention``, ``blocks.mlp``, the zoo families'
token mixers) label their nodes, and a node's default name is its block path and operator
(``stage1/block2/attn/matmul_0``, see ``Graph._fresh_name``), so the role of a measured op
whose ``node`` the assembler knows is read from that name alone:

- ``norm``: a ``layernorm`` node (every TFLite operator the converter makes of it);
- ``attention``: a node inside an ``attn`` block (qkv and projection layers, the head
  reshapes and transposes, the score matmuls, softmax) or a ``token_mixer`` block
  (EfficientFormer's pooling mixer, the attention of its 4D stages);
- ``mlp``: a node inside an ``mlp`` block (both fully connected layers and the activation);
- ``other``: everything else (stems, patch embedding, convolution stages, residual adds,
  downsampling, the head).

Names an importer gives (an ONNX node's own name) carry no block path: their nodes are
``other`` unless they are layer norms.
"""
from __future__ import annotations

ROLES = ("attention", "mlp", "norm", "other")
ATTENTION_BLOCKS = frozenset({"attn", "token_mixer"})
MLP_BLOCKS = frozenset({"mlp"})


def node_role(name: str) -> str:
    """The role (one of :data:`ROLES`) of the IR node named ``name``."""
    *blocks, last = str(name).split("/")
    if last.rsplit("_", 1)[0] == "layernorm":
        return "norm"
    if ATTENTION_BLOCKS.intersection(blocks):
        return "attention"
    if MLP_BLOCKS.intersection(blocks):
        return "mlp"
    return "other"
