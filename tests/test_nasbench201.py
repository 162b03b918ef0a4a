"""NAS-Bench-201: index decoding against HELP's table, the networks, costs, the source."""
from __future__ import annotations

import csv
import time

import pytest

from generators import nasbench201 as nb
from generators.sources import SOURCES

ALL_3X3 = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|"


def uniform(op: str) -> str:
    return ALL_3X3.replace("nor_conv_3x3", op)


# ---------------------------------------------------------------- decoding
def test_decoding_matches_every_row_of_help_table(shared_dir):
    path = shared_dir / "external" / "help-nasbench201" / "latency.csv"
    with path.open(newline="") as f:
        rows = [(int(r["nb201_index"]), r["arch_str"]) for r in csv.DictReader(f)]
    assert len(rows) == nb.NUM_ARCHS == 15625
    for index, arch in rows:
        assert nb.arch_str(index) == arch, index
        assert nb.index_of(arch) == index, arch


def test_arch_strings_are_a_permutation_of_the_space():
    strings = {nb.arch_str(i) for i in range(nb.NUM_ARCHS)}
    assert len(strings) == nb.NUM_ARCHS
    assert nb.cell_ops(0) == ("avg_pool_3x3", "nor_conv_1x1", "skip_connect", "nor_conv_1x1", "skip_connect", "skip_connect")


@pytest.mark.parametrize("bad", [-1, nb.NUM_ARCHS, 10**9])
def test_index_out_of_range_is_one_line(bad):
    with pytest.raises(ValueError, match=r"^index: .* out of range \[0, 15625\)$"):
        nb.arch_str(bad)
    with pytest.raises(ValueError, match=r"^index: "):
        nb.build(bad)


@pytest.mark.parametrize(
    "bad, msg",
    [
        ("|nor_conv_5x5~0|+|none~0|none~1|+|none~0|none~1|none~2|", "unknown op 'nor_conv_5x5'"),
        ("|none~0|+|none~0|none~1|", "is not a cell string"),
        ("|none~0|+|none~1|none~0|+|none~0|none~1|none~2|", "must list inputs ~0..~1 in order"),
        ("nonsense", "is not a cell string"),
        (True, "expected"),
    ],
)
def test_bad_arch_str_is_one_line(bad, msg):
    with pytest.raises(ValueError, match="^(arch_str|index): ") as e:
        nb.build(bad) if isinstance(bad, str) else nb.arch_str(bad)
    assert msg in str(e.value) and "\n" not in str(e.value)


# ---------------------------------------------------------------- networks
@pytest.mark.parametrize("index", [0, 1, 3, 9, 123, nb.index_of(ALL_3X3), nb.index_of(uniform("none")), 15624])
def test_networks_validate(index):
    g = nb.build(index).validate()
    assert g.name == f"nb201-{index:05d}" and g.source == "nasbench201"
    assert g.meta == {"index": index, "arch_str": nb.arch_str(index)}
    assert g.shape(g.outputs[0]) == [1, 10]
    assert g.nodes["input"].shape == [1, 3, 32, 32]
    # 3 stages of 5 cells at 32/16/8 px with 16/32/64 channels
    spatial = {n.block.split("/")[0]: n.shape[1:] for n in g.nodes.values() if n.block and "/cell" in n.block}
    assert spatial == {"stage1": [16, 32, 32], "stage2": [32, 16, 16], "stage3": [64, 8, 8]}


def test_cell_structure_of_index_0():
    # |avg_pool_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|nor_conv_1x1~0|skip_connect~1|skip_connect~2|
    g = nb.build(0)
    cell = [n for n in g.nodes.values() if n.block and (n.block + "/").startswith("stage2/cell3/")]
    assert [n.op for n in cell] == ["avgpool", "relu", "conv2d", "batchnorm", "add", "relu", "conv2d", "batchnorm", "add"]
    pool = cell[0]
    assert pool.attrs == {"kernel": [3, 3], "stride": [1, 1], "padding": [1, 1], "ceil_mode": False, "count_include_pad": False}
    assert cell[2].attrs["bias"] is False and cell[2].attrs["kernel"] == [1, 1]
    # node 3 = conv1x1(node0) + node1 + node2 (skip edges are plain references)
    assert len(cell[-1].inputs) == 3 and cell[-1].inputs[1] == pool.name and cell[-1].inputs[2] == cell[4].name


def test_none_edges_are_computed_zeros():
    """A none edge is NAS-Bench-201's Zero (x * 0); ops on zero nodes still run (see module doc)."""
    arch = "|none~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|none~0|none~1|none~2|"  # output cut off from the input
    g = nb.build(arch).validate()
    counts = g.op_counts()
    assert counts["scale"] == 15 * 4 and all(n.attrs == {"factor": 0.0} for n in g.nodes.values() if n.op == "scale")
    assert counts["conv2d"] == 15 * 2 + 1 + 2 * 3  # cell convs + stem + reductions (2 convs + 1 shortcut each)
    # the conv on the dead node 1 runs, on zeros
    assert g.flops == nb.build(arch.replace("nor_conv_3x3~1", "none~1")).flops + sum(
        c * c * 9 * hw * hw for c, hw in ((16, 32), (32, 16), (64, 8))
    ) * 5


def test_flops_and_params_of_the_extremes():
    """The smallest and largest networks of NAS-Bench-201 (its CIFAR-10 cost range: 7.78-220.11
    MFLOPs, 0.073-1.53 M params)."""
    big = nb.build(ALL_3X3)
    assert (big.flops, big.params) == (220_119_680, 1_531_546)
    small = nb.build(uniform("skip_connect"))
    assert (small.flops, small.params) == (7_783_040, 73_306)
    flops = {op: nb.build(uniform(op)).flops for op in nb.OPS}
    assert flops["nor_conv_3x3"] > flops["nor_conv_1x1"] > flops["skip_connect"]
    assert flops["skip_connect"] == flops["avg_pool_3x3"] == flops["none"]
    # each conv edge adds C*C*k*k*H*W per cell
    per_cell = sum(c * c * hw * hw for c, hw in ((16, 32), (32, 16), (64, 8))) * 5
    assert flops["nor_conv_1x1"] - flops["skip_connect"] == 6 * per_cell
    assert flops["nor_conv_3x3"] - flops["skip_connect"] == 6 * 9 * per_cell


def _torch_reference(ops):
    """An independent PyTorch model of the network as described in NAS-Bench-201's paper."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    def rcb(cin, cout, k, s=1):
        return nn.Sequential(nn.ReLU(), nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout))

    class Zero(nn.Module):
        def forward(self, x):
            return x.mul(0.0)

    def edge(op, c):
        return {
            "none": Zero, "skip_connect": nn.Identity, "nor_conv_1x1": lambda: rcb(c, c, 1),
            "nor_conv_3x3": lambda: rcb(c, c, 3),
            "avg_pool_3x3": lambda: nn.AvgPool2d(3, 1, 1, count_include_pad=False),
        }[op]()

    class Cell(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.edges = nn.ModuleList(edge(op, c) for op in ops)

        def forward(self, x):
            nodes, k = [x], 0
            for j in range(1, 4):
                terms = [self.edges[k + i](nodes[i]) for i in range(j)]
                k += j
                nodes.append(sum(terms[1:], terms[0]))
            return nodes[-1]

    class Reduction(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.a, self.b = rcb(cin, cout, 3, 2), rcb(cout, cout, 3)
            self.short = nn.Sequential(nn.AvgPool2d(2, 2), nn.Conv2d(cin, cout, 1, bias=False))

        def forward(self, x):
            return self.short(x) + self.b(self.a(x))

    layers = [nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)]
    for s, c in enumerate((16, 32, 64)):
        if s:
            layers.append(Reduction(c // 2, c))
        layers += [Cell(c) for _ in range(5)]
    layers += [nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers).eval()


@pytest.mark.parametrize("index", [0, 7, 42, 1000, nb.index_of(ALL_3X3)])
def test_costs_match_a_pytorch_model(index):
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):  # shapes only: no weights, no arithmetic
        model = _torch_reference(nb.cell_ops(index))
    g = nb.build(index)
    assert g.params == sum(p.numel() for p in model.parameters())
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        out = model(torch.empty(1, 3, 32, 32, device="meta"))
    assert list(out.shape) == g.shape(g.outputs[0])
    assert g.flops * 2 == counter.get_total_flops()


@pytest.mark.parametrize("offset", [0, 16, 32, 48])
def test_every_network_builds_sample(offset):
    """A deterministic sample of ~1,000 (every 16th index, in 4 parts that xdist can spread).
    Building and validating all 15,625 (with model ids) takes about 55 s on one idle core
    (2.6 ms build + 0.9 ms validate + 1 ms model_id each): too long for the suite."""
    sample = list(range(offset, nb.NUM_ARCHS, 64))
    t0 = time.perf_counter()
    ids = set()
    for i in sample:
        g = nb.build(i).validate()
        ids.add(g.model_id)
    elapsed = time.perf_counter() - t0
    assert len(ids) == len(sample)  # distinct networks
    assert elapsed < 30, f"{len(sample)} networks took {elapsed:.1f} s"


def test_build_is_deterministic():
    a, b = nb.build(4321), nb.build(nb.arch_str(4321))
    assert a.to_json() == b.to_json()


# ---------------------------------------------------------------- the source
def test_source_is_registered_and_deterministic():
    src = SOURCES.get("nasbench201")
    assert src.Config is nb.NasBench201Config
    cfg = nb.NasBench201Config(n=5)
    first = [g.name for g in src.generate(cfg, seed=3)]
    assert first == [g.name for g in src.generate(cfg, seed=3)]
    assert first != [g.name for g in src.generate(cfg, seed=4)]
    assert len(set(first)) == 5
    more = [g.name for g in src.generate(nb.NasBench201Config(n=8), seed=3)]
    assert more[:5] == first  # a larger n only appends
    g = next(src.generate({"indices": [17]}, seed=0))
    assert (g.name, g.source, g.meta) == ("nb201-00017", "nasbench201", {"index": 17, "arch_str": nb.arch_str(17)})


def test_source_explicit_indices_and_all():
    assert nb.selected_indices(nb.NasBench201Config(n=3, indices=[5, 2]), seed=0) == [5, 2]
    assert nb.selected_indices(nb.NasBench201Config(all=True), seed=0) == list(range(nb.NUM_ARCHS))


@pytest.mark.parametrize(
    "cfg, msg",
    [
        ({"indices": [1, 15625]}, r"^indices\[1\]: 15625 out of range \[0, 15625\)$"),
        ({"indices": [-3]}, r"^indices\[0\]: -3 out of range"),
        ({"indices": [4, 4]}, r"^indices\[1\]: 4 listed twice$"),
        ({"indices": ["x"]}, r"^indices\[0\]: expected an int"),
        ({"n": -1}, r"^n: expected an int in \[0, 15625\]"),
        ({"n": 20000}, r"^n: "),
        ({"all": "maybe"}, r"^all: expected true or false"),  # "yes" is true to the schema, as in YAML
        ({"all": True, "indices": [1]}, r"^all: "),
        ({"bogus": 1}, r"^bogus: unknown key"),
    ],
)
def test_config_errors_name_the_field(cfg, msg):
    with pytest.raises(ValueError, match=msg):
        nb.NasBench201Source.validate_config(cfg)
    with pytest.raises(ValueError, match=msg):
        list(nb.NasBench201Source.generate(cfg, seed=0))
