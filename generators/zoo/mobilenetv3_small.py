"""MobileNetV3-Small 1.0 (Howard et al., ICCV 2019) as torchvision's ``mobilenet_v3_small``.

Stem: 3x3/2 conv 16 + hard-swish. Eleven bottlenecks (kernel, expanded width, output,
squeeze-excite, activation, stride) as below: 1x1 expand (skipped when the expanded width equals
the input's: the first block) + depthwise conv, each BN + activation, optional squeeze-excite
(bottleneck make_divisible(expanded / 4, 8), ReLU, hard-sigmoid), linear 1x1 projection + BN; a
residual add when stride 1 and the width is kept. Last: 1x1 conv 576 + hard-swish. Head: global
average pool + FC 1024 + hard-swish + FC 1000. Convs have no bias except in SE and FC; BN eps
1e-3. The first block's squeeze-excite follows a stride-2 depthwise conv, and the first block
adds no residual (its stride is 2).

Variants redraw every expanded, SE and hidden width, one output width per run of
residual-connected blocks, the stem's and the last conv's widths, and every spatial kernel.
"""
from __future__ import annotations

from ..ir import Graph
from .mobilenetv3 import body, width_keys
from .registry import register_family
from .sampler import Sampler

# kernel, expanded, out, SE, activation, stride
BLOCKS = [
    (3, 16, 16, True, "relu", 2),
    (3, 72, 24, False, "relu", 2),
    (3, 88, 24, False, "relu", 1),
    (5, 96, 40, True, "hswish", 2),
    (5, 240, 40, True, "hswish", 1),
    (5, 240, 40, True, "hswish", 1),
    (5, 120, 48, True, "hswish", 1),
    (5, 144, 48, True, "hswish", 1),
    (5, 288, 96, True, "hswish", 2),
    (5, 576, 96, True, "hswish", 1),
    (5, 576, 96, True, "hswish", 1),
]
LAST = 576
HIDDEN = 1024
WIDTH_KEYS = width_keys(BLOCKS)


@register_family("mobilenetv3_small", reference="MobileNetV3-Small 1.0 (torchvision mobilenet_v3_small)",
                 params=2_542_856)
def build(g: Graph, x: str, choose: Sampler) -> str:
    return body(g, x, choose, BLOCKS, WIDTH_KEYS, LAST, HIDDEN, stem_key="stem")
