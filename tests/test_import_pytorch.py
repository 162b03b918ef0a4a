"""The PyTorch importer: the 102 real-world CNNs of the USC dataset, and the mapping rules.

For every model: it imports and validates; the IR's parameter count equals PyTorch's
exactly; the IR's FLOPs (multiply-accumulates) are exactly half of what
``torch.utils.flop_counter.FlopCounterMode`` counts on the original module, in total and
convolution by convolution / FC by FC in execution order; the output shape matches. All 102
agree exactly (no model needed an explanation). Models are built on the ``meta`` device, so
both the import and the FLOP count run without weights or arithmetic (about 0.1-0.5 s per
model; BagNet and EfficientNet-Edge, traced with torch.export, 1-2.5 s).
"""
from __future__ import annotations

import csv

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pytorchcv")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode, flop_registry  # noqa: E402

from generators.importers import PytorchImportConfig, UnsupportedModelError, import_module, import_pytorchcv  # noqa: E402
from generators.importers.pytorch import PytorchImportSource, build_pytorchcv  # noqa: E402
from generators.sources import SOURCES  # noqa: E402

# The `model` column of usc-mobile-ml-benchmark/cnn_real_e2e_tflite.csv, in file order
# (listed here so that pytest can parametrize over them; test_usc_list_matches_csv checks it).
USC_MODELS = """
bagnet9 bninception densenet121 densenet169 diracnet18v2 dla46c efficientnet_edge_large_b
efficientnet_edge_medium_b efficientnet_edge_small_b fbnet_cb fdmobilenet_w1 fdmobilenet_w3d4
fdmobilenet_wd2 fdmobilenet_wd4 ghostnet hardnet39ds hardnet68ds hrnet_w18_small_v1 hrnet_w18_small_v2
mnasnet_a1 mnasnet_b1 mobilenet_w1 mobilenet_w3d4 mobilenet_wd2 mobilenet_wd4 mobilenetb_w1
mobilenetb_w3d4 mobilenetb_wd2 mobilenetb_wd4 mobilenetv2_w1 mobilenetv2_w3d4 mobilenetv2_wd2
mobilenetv2_wd4 mobilenetv2b_w1 mobilenetv2b_w3d4 mobilenetv2b_wd2 mobilenetv2b_wd4
mobilenetv3_large_w1 mobilenetv3_large_w3d4 mobilenetv3_large_w5d4 mobilenetv3_large_w7d20
mobilenetv3_large_wd2 mobilenetv3_small_w1 mobilenetv3_small_w3d4 mobilenetv3_small_w5d4
mobilenetv3_small_w7d20 mobilenetv3_small_wd2 peleenet preresnet10 preresnet12 preresnet14
preresnet16 preresnet18 preresnet18_w3d4 preresnet18_wd2 preresnet18_wd4 preresnetbc14b
preresnetbc26b proxylessnas_cpu proxylessnas_gpu proxylessnas_mobile proxylessnas_mobile14
regnetx002 regnetx004 regnetx006 regnetx008 regnetx016 regnety002 regnety004 regnety006 regnety008
regnety016 resnet10 resnet12 resnet14 resnet16 resnet18 resnet18_w3d4 resnet18_wd2 resnet18_wd4
resnetbc14b resnetbc26b resnext14_16x4d resnext14_32x4d resnext26_16x4d resnext26_32x4d
sepreresnet10 sepreresnet12 sepreresnet14 sepreresnet16 sepreresnet18 seresnet10 seresnet12
seresnet14 seresnet16 seresnet18 spnasnet squeezenet_v1_0 squeezenet_v1_1 squeezeresnet_v1_0
squeezeresnet_v1_1 vovnet27s
""".split()

# fx cannot trace these (BagNet: `if x.size(-1) != identity.size(-1)` then a crop;
# EfficientNet-Edge: TF "same" padding computed with float() of the input size); torch.export can.
EXPORT_TRACED = {"bagnet9", "efficientnet_edge_large_b", "efficientnet_edge_medium_b", "efficientnet_edge_small_b"}


def test_usc_list_matches_csv(shared_dir):
    with (shared_dir / "external" / "usc-mobile-ml-benchmark" / "cnn_real_e2e_tflite.csv").open(newline="") as f:
        names = [row["model"] for row in csv.DictReader(f)]
    assert names == USC_MODELS and len(names) == 102


@pytest.fixture(scope="session")
def usc_flops(shared_dir) -> dict[str, int]:
    with (shared_dir / "external" / "usc-mobile-ml-benchmark" / "cnn_real_e2e_tflite.csv").open(newline="") as f:
        return {row["model"]: int(row["FLOPS"]) for row in csv.DictReader(f)}


def torch_costs(model: nn.Module, shape: list[int]) -> tuple[int, list[int], list[int]]:
    """FlopCounterMode's total and its per-call counts (convolutions, matmuls) in call order,
    run on meta tensors; plus the output shape."""
    calls: list[int] = []

    def recording(formula):
        def count(*args, out_val=None, **kwargs):
            n = formula(*args, out_val=out_val, **kwargs)
            calls.append(n)
            return n

        count._get_raw = True  # arguments as FlopCounterMode passes them to its own formulas
        return count

    counter = FlopCounterMode(display=False, custom_mapping={k: recording(f) for k, f in flop_registry.items()})
    device = next(model.parameters()).device
    with counter, torch.no_grad():
        out = model(torch.empty(shape, device=device))
    return counter.get_total_flops(), calls, list(out.shape)


@pytest.mark.parametrize("name", USC_MODELS)
def test_usc_model(name, usc_flops):
    g = import_pytorchcv(name)  # validates
    assert (g.name, g.source) == (name, "pytorch")
    assert g.meta == {"pytorchcv": name, "tracer": "export" if name in EXPORT_TRACED else "fx"}
    model = build_pytorchcv(name)
    shape = g.nodes["input"].shape
    assert shape == [1, 3, 224, 224]

    assert g.params == sum(p.numel() for p in model.parameters())

    total, calls, out_shape = torch_costs(model, shape)
    assert g.shape(g.outputs[0]) == out_shape
    assert abs(2 * g.flops - total) <= 0.01 * total
    assert 2 * g.flops == total  # in fact exact
    per_op = [c.macs for c in g.costs() if c.op in ("conv2d", "fc")]
    assert [2 * m for m in per_op] == calls  # conv by conv, fc by fc, in execution order

    # The dataset's own FLOPS column (224x224 input) is 2 x MACs plus at most 3.4% (its
    # counter adds some element-wise work: the excess is largest for the h-swish MobileNetV3s).
    assert 0 <= usc_flops[name] / (2 * g.flops) - 1 < 0.04


# ---------------------------------------------------------------- mapping rules
def imp(module: nn.Module, shape=(1, 8, 16, 16), **kw):
    return import_module(module, shape, name=type(module).__name__, **kw)


def ops(g) -> list[str]:
    return [n.op for n in g.nodes.values() if n.op != "input"]


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def test_hswish_and_hsigmoid_patterns_become_single_ops():
    from pytorchcv.models.common import HSigmoid, HSwish

    g = imp(nn.Sequential(HSwish(), HSigmoid(), nn.Hardswish(), nn.Hardsigmoid()))
    assert ops(g) == ["hswish", "hsigmoid", "hswish", "hsigmoid"]


def test_scalar_arithmetic():
    g = imp(Lambda(lambda x: (x * 0.5) / 4 + 0))
    assert ops(g) == ["scale", "scale"]
    assert [n.attrs["factor"] for n in g.nodes.values() if n.op == "scale"] == [0.5, 0.25]
    assert ops(imp(nn.Sequential(Lambda(lambda x: x * 1 / 1), nn.Dropout(), nn.Identity()))) == []  # nothing left
    g = imp(Lambda(lambda x: torch.relu(x + 2.0)))  # a scalar add: the IR's shift
    assert ops(g) == ["shift", "relu"] and [n.attrs["value"] for n in g.nodes.values() if n.op == "shift"] == [2.0]
    g = imp(Lambda(lambda x: torch.relu(x + 3.0)))  # x + 3 outside an h-swish: a shift too
    assert ops(g) == ["shift", "relu"] and [n.attrs["value"] for n in g.nodes.values() if n.op == "shift"] == [3.0]


def test_activations_and_clamps():
    g = imp(nn.Sequential(
        nn.ReLU6(), nn.Hardtanh(0.0, 6.0), nn.Hardtanh(), nn.SiLU(), nn.Tanh(), nn.Sigmoid(),
        nn.LeakyReLU(0.2), nn.PReLU(8), Lambda(lambda x: torch.clamp(x, 0.0, 1.0)),
        Lambda(lambda x: x.clamp(min=0)), nn.Dropout(0.5), nn.Identity(),
    ))
    assert ops(g) == ["relu6", "relu6", "clip", "swish", "tanh", "sigmoid", "leaky_relu", "prelu", "clip", "relu"]
    clips = [n.attrs for n in g.nodes.values() if n.op == "clip"]
    assert clips == [{"min": -1.0, "max": 1.0}, {"min": 0.0, "max": 1.0}]
    assert next(n for n in g.nodes.values() if n.op == "leaky_relu").attrs == {"alpha": 0.2}
    assert g.params == 8


def test_reductions_and_instance_norm():
    g = imp(nn.Sequential(nn.InstanceNorm2d(8, affine=True), Lambda(lambda x: x * torch.amax(x, 1, keepdim=True)),
                          Lambda(lambda x: x + x.max(dim=2, keepdim=True)[0]), Lambda(lambda x: x.sum(3, keepdim=True)),
                          Lambda(lambda x: x + x.mean(2, keepdim=True)), nn.AdaptiveMaxPool2d(1)))
    assert ops(g) == ["instancenorm", "reduce_max", "mul", "reduce_max", "add", "reduce_sum", "mean", "add", "maxpool"]
    assert [n.attrs for n in g.nodes.values() if n.op.startswith("reduce_")] == [
        {"axis": 1, "keepdim": True}, {"axis": 2, "keepdim": True}, {"axis": 3, "keepdim": True}]
    assert g.params == 16  # the instance norm's gain and shift per channel
    with pytest.raises(UnsupportedModelError, match="instance norm other than"):
        imp(nn.InstanceNorm2d(8))
    with pytest.raises(UnsupportedModelError, match=r"reduce_sum over dims \[2, 3\]"):
        imp(Lambda(lambda x: x.sum((2, 3))))


def _macs(module: nn.Module, shape=(1, 8, 16, 16)) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        module.eval()(torch.zeros(shape))
    return int(fc.get_total_flops()) // 2


class _Gates(nn.Module):
    """CBAM's channel gate (unsqueezed twice, expanded as the map), SKNet's selection over stacked
    branches (a 5-d sum, softmax over the branches, unsqueezed weights broadcast) and split
    attention's view of one group (a transpose of a unit axis)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.b1, self.b2 = nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 1)
        self.sel = nn.Linear(8, 16)

    def forward(self, x):
        gate = torch.sigmoid(self.fc(x.mean((2, 3)))).unsqueeze(2).unsqueeze(3).expand_as(x)
        x = x * gate
        y = torch.stack([self.b1(x), self.b2(x)], dim=1)  # [1, 2, 8, H, W]
        w = self.sel(y.sum(dim=1).mean((2, 3))).view(1, 1, 2, 8)
        w = torch.softmax(torch.transpose(w, 1, 2), dim=1).view(1, 2, 8, 1, 1)
        return (y * w).sum(dim=1)


def test_gates_over_stacked_branches_and_unit_axis_views():
    g = imp(_Gates())
    assert g.shape(g.outputs[0]) == [1, 8, 16, 16] and g.flops == _macs(_Gates())
    counts = g.op_counts()
    assert counts["concat"] == 1 and counts["reduce_sum"] == 2 and counts["softmax"] == 1 and counts["mul"] == 2
    # a view of a view is one reshape of the first one's input: [1, 8] -> [1, 8, 1, 1], [1, 16] -> [1, 2, 8, 1, 1]
    assert all(g.nodes[n.inputs[0]].op != "reshape" for n in g.nodes.values() if n.op == "reshape")
    with pytest.raises(UnsupportedModelError, match=r"expand of \[1, 8, 16, 16\] to \[1, 8, 32, 16\]: the shapes do not"):
        imp(Lambda(lambda x: x.expand(1, 8, 32, 16)))
    # any other transpose or permute keeping the batch first: the IR's (DiCENet's dimension-wise convolutions)
    g = imp(Lambda(lambda x: torch.relu(x.transpose(1, 2)).permute(0, 3, 1, 2)), (1, 8, 16, 4))
    assert [n.attrs["perm"] for n in g.nodes.values() if n.op == "transpose"] == [[0, 2, 1, 3], [0, 3, 1, 2]]
    with pytest.raises(UnsupportedModelError, match=r"transpose of dims \[0, 2\] of \[1, 8, 16, 16\] \(moves the batch"):
        imp(Lambda(lambda x: x.transpose(0, 2)))


class _Channelwise(nn.Module):
    """ChannelNet's channel-wise convolution (a Conv3d over the unsqueezed map's channels)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(1, 2, (8, 1, 1), stride=(2, 1, 1), padding=(3, 0, 0), bias=False)

    def forward(self, x):
        return self.conv(x.unsqueeze(1)).view(x.shape) + x


def test_a_convolution_along_the_channels():
    g = imp(_Channelwise())
    (cw,) = [n for n in g.nodes.values() if n.op == "conv2d"]
    assert (cw.attrs["kernel"], cw.attrs["stride"], cw.attrs["padding"]) == ([8, 1], [2, 1], [3, 0])
    assert g.shape(cw.inputs[0]) == [1, 1, 8, 256] and g.flops == _macs(_Channelwise()) == 2 * 4 * 256 * 8
    with pytest.raises(UnsupportedModelError, match=r"a 3-d convolution \(weight \(2, 1, 3, 3, 3\) on \[1, 1, 8, 16, 16\]\)"):
        imp(nn.Sequential(Lambda(lambda x: x.unsqueeze(1)), nn.Conv3d(1, 2, 3, padding=1)))


class _Masked(nn.Module):
    """XDenseNet's convolution: its kernel times a constant mask, a weight computed from weights."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 8, 3, 3))
        self.register_buffer("mask", (torch.rand(4, 8, 1, 1) > 0.5).float())

    def forward(self, x):
        return F.conv2d(x, self.weight * self.mask, padding=1)


def test_a_kernel_computed_from_weights():
    g = imp(_Masked())
    assert ops(g) == ["conv2d"] and g.flops == _macs(_Masked()) and g.params == 4 * 8 * 9


def test_local_response_norm_and_division_of_tensors():
    g = imp(nn.Sequential(nn.LocalResponseNorm(5, alpha=2e-4, beta=0.5, k=2.0),
                          Lambda(lambda x: F.local_response_norm(x, 4)),  # pytorchcv's AlexNet calls the function
                          Lambda(lambda x: x / torch.sigmoid(x)), Lambda(lambda x: torch.div(x, x.mean(1, keepdim=True)))))
    assert ops(g) == ["lrn", "lrn", "sigmoid", "div", "mean", "div"]
    assert [n.attrs for n in g.nodes.values() if n.op == "lrn"] == [
        {"size": 5, "alpha": 2e-4, "beta": 0.5, "bias": 2.0}, {"size": 4, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}]
    assert g.flops == 0 and g.params == 0
    with pytest.raises(UnsupportedModelError, match="local response norm of a rank-3 tensor"):
        imp(nn.LocalResponseNorm(3), shape=(1, 8, 16))
    with pytest.raises(UnsupportedModelError, match="division with rounding_mode='floor'"):
        imp(Lambda(lambda x: torch.div(x, x, rounding_mode="floor")))


def test_nearest_resize_to_a_size():
    g = imp(Lambda(lambda x: x + F.interpolate(F.avg_pool2d(x, 3), size=x.shape[2:], mode="nearest")))  # 5 -> 16
    assert ops(g) == ["avgpool", "resize", "add"]
    assert next(n for n in g.nodes.values() if n.op == "resize").attrs == {"size": [16, 16]}
    with pytest.raises(UnsupportedModelError, match=r"bilinear resize 5x5 -> 16x16 by a non-integer factor"):
        imp(Lambda(lambda x: F.interpolate(F.avg_pool2d(x, 3), size=x.shape[2:], mode="bilinear")))


class _Pick(nn.Module):
    """CondenseNet's index_selects of a constant buffer, wrapped in the legacy Variable as it does."""

    def __init__(self):
        super().__init__()
        self.register_buffer("index", torch.tensor([7, 7, 0, 3]))
        self.register_buffer("features", torch.tensor([3, 1]))

    def forward(self, x):
        y = torch.index_select(x, dim=1, index=torch.autograd.Variable(self.index))
        return torch.index_select(y.mean((2, 3)), 1, self.features)


def test_index_select_of_a_buffer_is_a_gather():
    g = imp(_Pick())
    assert ops(g) == ["gather", "global_avgpool", "flatten", "gather"]
    assert [n.attrs for n in g.nodes.values() if n.op == "gather"] == [
        {"indices": [7, 7, 0, 3], "axis": 1}, {"indices": [3, 1], "axis": 1}]
    assert g.shape(g.outputs[0]) == [1, 2] and g.flops == 0
    with pytest.raises(UnsupportedModelError, match=r"index_select on axis 2 of a rank-4 tensor"):
        imp(Lambda(lambda x: torch.index_select(x, 2, torch.tensor([0, 1]))))
    with pytest.raises(UnsupportedModelError, match=r"index_select by an index computed from the input"):
        imp(Lambda(lambda x: torch.index_select(x, 1, torch.relu(x))))


def test_channel_padding():
    g = imp(Lambda(lambda x: F.pad(x, (0, 0, 0, 0, 0, 4)) + F.pad(x, (1, 1, 0, 0, 2, 2))[:, :, :, 1:-1]))
    assert ops(g) == ["pad", "pad", "crop", "add"]
    assert [n.attrs["pads"] for n in g.nodes.values() if n.op == "pad"] == [[0, 0, 0, 0, 0, 4], [0, 0, 1, 1, 2, 2]]
    assert g.shape(g.outputs[0]) == [1, 12, 16, 16]


class Shuffle(nn.Module):
    def forward(self, x):
        b, c, h, w = x.size()
        x = x.view(b, 4, c // 4, h, w)
        x = torch.transpose(x, 1, 2).contiguous()
        return x.view(b, c, h, w)


def test_channel_shuffle_patterns():
    g = imp(nn.Sequential(Shuffle(), nn.ChannelShuffle(2)))
    assert [(n.op, n.attrs) for n in g.nodes.values() if n.op != "input"] == [
        ("channel_shuffle", {"groups": 4}), ("channel_shuffle", {"groups": 2})
    ]
    from pytorchcv.models.common import ChannelShuffle, ChannelShuffle2

    g = imp(nn.Sequential(ChannelShuffle(8, 2), ChannelShuffle2(8, 2)))
    # channel_shuffle2 views as (channels // groups, groups): a shuffle with channels // groups groups
    assert [n.attrs["groups"] for n in g.nodes.values() if n.op == "channel_shuffle"] == [2, 4]


def test_shapes_flatten_pool_and_fc():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
            self.pool = nn.AdaptiveAvgPool2d(2)
            self.fc = nn.Linear(64, 10)
            self.bn = nn.BatchNorm1d(10)

        def forward(self, x):
            y = self.pool(self.conv(x))  # 8x8 -> 2x2: an average pool with 4x4 windows
            y = self.bn(self.fc(y.view(y.size(0), -1)))
            z = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
            m = x.mean((2, 3))
            return F.softmax(y, dim=1), z, m

    g = imp(Net())
    assert ops(g) == ["conv2d", "avgpool", "flatten", "fc", "batchnorm", "global_avgpool", "flatten",
                      "global_avgpool", "flatten", "softmax"]
    assert next(n for n in g.nodes.values() if n.op == "avgpool").attrs["kernel"] == [4, 4]
    assert next(n for n in g.nodes.values() if n.op == "softmax").attrs == {"axis": 1}
    assert [g.shape(o) for o in g.outputs] == [[1, 10], [1, 8], [1, 8]]
    assert g.params == sum(p.numel() for p in Net().parameters())


def test_pad_crop_and_upsample():
    g = imp(nn.Sequential(
        Lambda(lambda x: F.pad(x, (1, 2, 3, 4))),  # (left, right, top, bottom)
        Lambda(lambda x: x[:, :, 1:-1, :-2]),
        Lambda(lambda x: F.pad(x, (0, -1, 0, -1))),
        nn.Upsample(scale_factor=2), Lambda(lambda x: F.interpolate(x, size=(x.shape[2] * 3, x.shape[3]))),
        nn.ZeroPad2d((0, 1, 0, 1)),
    ))
    assert [(n.op, n.attrs) for n in g.nodes.values() if n.op != "input"] == [
        ("pad", {"pads": [3, 4, 1, 2], "value": 0.0}),
        ("crop", {"crops": [1, 2, 0, 3]}),  # the slice and the negative pad merge into one crop
        ("upsample", {"scale": [2, 2], "mode": "nearest"}),
        ("upsample", {"scale": [3, 1], "mode": "nearest"}),
        ("pad", {"pads": [0, 1, 0, 1], "value": 0.0}),
    ]
    assert g.shape(g.outputs[0]) == [1, 8, 121, 33]  # 16 +7 -2 -1 (x2) (x3) +1, 16 +3 -2 -1 (x2) +1
    assert [n.attrs["mode"] for n in imp(nn.Upsample(scale_factor=2, mode="bilinear")).nodes.values()
            if n.op == "upsample"] == ["bilinear"]
    assert [n.attrs["mode"] for n in imp(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)).nodes.values()
            if n.op == "upsample"] == ["bilinear_corners"]
    with pytest.raises(UnsupportedModelError, match="interpolation mode 'bicubic'"):
        imp(nn.Upsample(scale_factor=2, mode="bicubic"))


def test_split_chunk_cat():
    g = imp(Lambda(lambda x: torch.cat([t * 2 for t in torch.chunk(x, 3, dim=1)] + list(x.split([5, 3], 1)), 1)))
    split = [n for n in g.nodes.values() if n.op == "split"]
    assert [n.attrs["sections"] for n in split] == [[3, 3, 2], [5, 3]]
    assert g.shape(g.outputs[0]) == [1, 16, 16, 16]


def test_slices_of_the_channels_are_outputs_of_one_split():
    """DPN's dual path: x[:, :k] and x[:, k:] -> the two outputs of one split (the IR has no slice)."""
    g = imp(Lambda(lambda x: torch.relu(x[:, :5]) * 2 + x[:, 5:8].sum(1, keepdim=True) + x[:, :5]))
    (split,) = [n for n in g.nodes.values() if n.op == "split"]
    assert split.attrs["sections"] == [5, 3] and g.shape(g.outputs[0]) == [1, 5, 16, 16]
    with pytest.raises(UnsupportedModelError, match=r"slice along the batch dimension of shape \[1, 8, 16, 16\]"):
        imp(Lambda(lambda x: x[1:]))


def test_functional_conv_with_get_attr_weights():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(4, 2, 3, 3))

        def forward(self, x):
            return F.conv2d(x, self.w, None, 1, 1, 1, 4)

    g = imp(Net())
    conv = next(n for n in g.nodes.values() if n.op == "conv2d")
    assert conv.attrs["groups"] == 4 and conv.attrs["bias"] is False and g.params == 72


def test_export_fallback_for_untraceable_control_flow():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(8, 8, 3)

        def forward(self, x):
            y = self.conv(x)
            if y.size(-1) != x.size(-1):  # fx cannot branch on a traced size
                x = x[:, :, 1:-1, 1:-1]
            return x + y

    g = imp(Net())
    assert g.meta == {"tracer": "export"}
    assert ops(g) == ["conv2d", "crop", "add"]
    assert next(n for n in g.nodes.values() if n.op == "conv2d").block == "conv"


def test_dead_branches_are_dropped():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(8, 8, 1), nn.Conv2d(8, 8, 1)

        def forward(self, x):
            self.b(x)  # computed, never used
            return self.a(x)

    g = imp(Net())
    assert ops(g) == ["conv2d"]
    # the difference the parameter check would show: PyTorch counts the unused conv too
    assert g.params == 72 and sum(p.numel() for p in Net().parameters()) == 144


def test_shared_module_counts_its_parameters_per_call():
    conv = nn.Conv2d(8, 8, 1)
    g = imp(nn.Sequential(conv, nn.ReLU(), conv))
    assert g.params == 2 * sum(p.numel() for p in conv.parameters())  # documented difference


def test_unsupported_construct_is_one_line_naming_node_path_and_model():
    class Block(nn.Module):
        def forward(self, x):
            return x.cumsum(dim=1)

    model = nn.Sequential(nn.Conv2d(8, 8, 1), Block())
    with pytest.raises(UnsupportedModelError) as e:
        import_module(model, (1, 8, 16, 16), name="mynet")
    msg = str(e.value)
    assert msg == "mynet: fx node 'cumsum' (1): unsupported tensor method .cumsum()"
    assert isinstance(e.value, ImportError) and "\n" not in msg


def test_unsupported_module_type_names_it():
    with pytest.raises(UnsupportedModelError, match=r"^Sequential: fx node '_0' \(0\): unsupported module type torch\.nn\.modules\.activation\.GELU$"):
        imp(nn.Sequential(nn.GELU()))


def test_input_shape_mismatch_is_caught():
    with pytest.raises(UnsupportedModelError, match=r"^Sequential: fx node '_0' \(0\): input has 3 channels, the weight"):
        imp(nn.Sequential(nn.Conv2d(8, 8, 1)), (1, 3, 16, 16))


def test_non_affine_batch_norm_is_rejected():
    with pytest.raises(UnsupportedModelError, match="without affine parameters"):
        imp(nn.Sequential(nn.BatchNorm2d(8, affine=False)))


def test_import_pytorchcv_unknown_name():
    with pytest.raises(ValueError, match=r"^models: unknown pytorchcv model 'resnet9000'$"):
        import_pytorchcv("resnet9000")


def test_import_pytorchcv_can_use_the_models_input_size():
    g = import_pytorchcv("resnet20_cifar10", input_size=None)
    assert g.nodes["input"].shape == [1, 3, 32, 32] and g.shape(g.outputs[0]) == [1, 10]


# ---------------------------------------------------------------- the source
def test_source_generates_default_models():
    src = SOURCES.get("pytorch")
    assert src is PytorchImportSource and src.Config is PytorchImportConfig
    graphs = list(src.generate(PytorchImportConfig(), seed=0))
    assert [g.name for g in graphs] == ["mobilenetv2_w1", "resnet18", "squeezenet_v1_1"]
    assert all(g.source == "pytorch" and g.meta == {"pytorchcv": g.name, "tracer": "fx"} for g in graphs)
    again = [g.model_id for g in src.generate({"models": ["resnet18"]}, seed=1)]
    assert again == [graphs[1].model_id]


@pytest.mark.parametrize(
    "cfg, msg",
    [
        ({"models": ["resnet18", "nonet"]}, r"^models\[1\]: unknown pytorchcv model 'nonet'$"),
        ({"models": "resnet18"}, r"^models: expected a list"),
        ({"models": ["resnet18", "resnet18"]}, r"^models\[1\]: 'resnet18' listed twice$"),
        ({"model": ["resnet18"]}, r"^model: unknown key"),
    ],
)
def test_source_config_errors_name_the_field(cfg, msg):
    with pytest.raises(ValueError, match=msg):
        PytorchImportSource.validate_config(cfg)
    with pytest.raises(ValueError, match=msg):
        list(PytorchImportSource.generate(cfg, seed=0))


# ---------------------------------------------------------------- operators added to the IR for this importer
# (and for NAS-Bench-201's none edges): shape inference, canonical attributes, errors
def test_added_operators():
    from generators.ir import Graph, IRError

    g = Graph()
    x = g.input([1, 4, 8, 8])
    s = g.add("scale", x, factor=0)
    assert g.nodes[s].attrs == {"factor": 0.0}  # 0 and 0.0: one operator, one model_id
    c = g.add("clip", s)
    assert g.nodes[c].attrs == {"min": 0.0, "max": 1.0}
    k = g.add("crop", c, crops=[1, 0, 2, 3])
    assert g.shape(k) == [1, 4, 7, 3]
    u = g.add("upsample", k, scale=[2, 3])
    assert g.shape(u) == [1, 4, 14, 9] and g.nodes[u].attrs == {"scale": [2, 3], "mode": "nearest"}
    g.set_outputs(u).validate()
    assert g.flops == 0 and g.params == 0
    for op, attrs, msg in [
        ("scale", {"factor": float("nan")}, "factor must be a finite number"),
        ("clip", {"min": 1.0, "max": 0.0}, "min 1.0 must be below max 0.0"),
        ("crop", {"crops": [4, 4, 0, 0]}, r"crops \[4, 4, 0, 0\] leave nothing of the 8x8 input"),
        ("crop", {"crops": [1, 1]}, "crops must be four non-negative ints"),
        ("upsample", {"scale": 2, "mode": "bicubic"}, "mode must be 'nearest' or 'bilinear' or 'bilinear_corners'"),
        ("upsample", {"scale": 0}, "scale must be >= 1"),
    ]:
        with pytest.raises(IRError, match=f"^node 'bad' \\({op}\\): {msg}"):
            g.add(op, x, name="bad", **attrs)
