"""USC GPU op rows keep the attributes that decide their cost (issue 17).

The PyTorch GPU file drops the ``groups`` key on its depthwise convolutions (kernels
``vulkan.conv2d_dw*``) and gives its networks' final average pools no window nor output size;
read naively, the former become dense convolutions (FLOPs x channels) and the latter 1x1 pools
that keep the map. The importer recovers both from what the rows do carry, so an op row and the
same op of the network's IR describe the same configuration."""
from __future__ import annotations

import collections

import numpy as np
import pytest

from leaderboard.baselines.features import ir_ops, table_ops
from pipelines.dataset import UscConfig, import_usc
from pipelines.dataset.usc import op_features

CONV = "vulkan_prepack::run_conv2d_context"


def test_depthwise_row_without_groups_is_depthwise():
    feat = {"input_channel": 96, "input_shape": 112, "output_channel": 96, "output_shape": 56, "kernel_size": 3,
            "stride": 2, "padding": 1, "input_size": 1204224, "output_size": 301056, "flops": 2709504,
            "filter_size": 864}
    out = op_features("pytorch", CONV, feat)
    assert out["op_type"] == "dwconv2d" and out["groups"] == 96


def test_grouped_and_dense_rows_keep_their_type():
    grouped = {"input_channel": 128, "input_shape": 28, "output_channel": 128, "output_shape": 28, "kernel_size": 3,
               "stride": 1, "padding": 1, "filter_size": 128 * 4 * 9}  # 32 groups of 4 channels, no "groups" key
    assert (op_features("pytorch", CONV, grouped)["op_type"], op_features("pytorch", CONV, grouped)["groups"]) == \
        ("group_conv2d", 32)
    dense = dict(grouped, filter_size=128 * 128 * 9, groups=1)
    assert op_features("pytorch", CONV, dense)["op_type"] == "conv2d"
    odd = dict(grouped, filter_size=1000)  # a weight size that fits no grouping: dense, as the row says nothing
    assert op_features("pytorch", CONV, odd)["groups"] == 1


def test_final_pool_without_window_pools_the_whole_map():
    out = op_features("pytorch", "aten::avg_pool2d", {"input_channel": 512, "input_shape": 7, "input_size": 25088})
    assert (out["op_type"], out["kernel"], out["out_hw"], out["out_channels"]) == ("avgpool", 7, 1, 512)
    windowed = op_features("pytorch", "aten::avg_pool2d", {"input_channel": 64, "input_shape": 56, "kernel_size": 2,
                                                          "stride": 2, "output_shape": 28})
    assert (windowed["kernel"], windowed["out_hw"]) == (2, 28)


@pytest.fixture(scope="module")
def imported(shared_dir):
    names = ["mobilenetv2_wd4", "resnet10", "mnasnet_a1"]  # 3x3 and 5x5 depthwise, final pools
    res = import_usc(UscConfig(path=str(shared_dir / "external" / "usc-mobile-ml-benchmark"), models=names,
                               devices=["pixel4"]))
    return res


_COST_TYPES = ("conv2d", "dwconv2d", "group_conv2d", "avgpool", "maxpool", "fc")


def _configs(types, raws):
    return collections.Counter((t, *map(int, r[:8])) for t, r in zip(types, raws) if t in _COST_TYPES)


def test_pytorch_gpu_rows_describe_the_ir_ops(imported):
    """Every convolution, pool and FC row of the PyTorch GPU file has the configuration of an op
    of the rebuilt IR (type, sizes, kernel, stride, padding, groups)."""
    from generators.ir import Graph

    ops = imported["ops"]
    ops = ops[ops["scenario_id"] == "usc-pixel4-pytorch-gpu-fp16"]
    assert len(ops)
    irs = dict(zip(imported["models"]["model_id"], imported["models"]["ir"]))
    for mid, rows in ops.groupby("model_id"):
        types, raw = table_ops(rows.sort_values("op_index"))
        table = _configs(types, np.nan_to_num(raw, nan=-1))
        ir = _configs(*ir_ops(Graph.from_json(irs[mid])))
        assert table == ir, (mid, table - ir, ir - table)
    dw = ops[ops["kernel_name"].fillna("").str.startswith("vulkan.conv2d_dw")]
    assert len(dw) and (dw["op_type"] == "dwconv2d").all()
    assert (dw["groups"] == dw["in_channels"]).all()
