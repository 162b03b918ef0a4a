"""Ground truth for the TFLite-GPU kernel deduction: the kernels LiteRT's GPU accelerator really
generated on this host, against what the USC paper's rules (Algorithms B.2 fusion and B.3
convolution kernel selection, :mod:`.gpu_tflite`) deduce from the IR.

The executed side comes from a GPU kernel-mode run of the instrumented runtime: every dispatch
labelled with its kind and fused parts from the accelerator's generated programs
(:mod:`pipelines.gpu.programs`). The host transfers (``layout_in``, ``layout_out``, ``copy``)
are not kernels of the network and are left out.

The deduced side maps each deduced kernel to the dispatches it should be (:data:`EXPECTED`):
a Winograd convolution is three (input transform, batched matmul, output transform), any other
kernel one of its kind; an element-wise op left unlinked by B.2 is one ``elementwise``
dispatch. What is compared, per network:

- the dispatch multiset (kinds; what a kernel-wise predictor sums over) and the order;
- Winograd: how many convolutions the rules send to Winograd and how many ran it;
- fusion: the parts linked into each kernel (B.2) against the fused parts of the dispatch
  aligned with it (generic names: a ReLU6 clamp is ``relu`` as in the delegate's kernel names,
  an add of a constant ``add``).

``vendor`` picks B.3's thresholds; the lavapipe device has none of its own, so the default
(Mali / PowerVR / other) thresholds apply.
"""
from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from generators.ir import Graph

from . import gpu_tflite as gt

#: deduced kernel -> the dispatch kinds it runs as (pipelines.gpu.programs.KERNEL_KINDS)
EXPECTED: dict[str, tuple[str, ...]] = {
    gt.WINOGRAD: ("winograd_input", "winograd_matmul", "winograd_output"),
    gt.CONV2D: ("conv",),
    gt.GROUPED: ("conv",),
    "depthwise_convolution": ("depthwise_conv",),
    "fully_connected": ("fully_connected",),
    "mean": ("mean",),
    "pooling_2d": ("pool",),
    "concat": ("concat",),
    "split": ("split",),
    "gather": ("gather",),
}
#: host transfers, not kernels of the network
TRANSFERS = ("layout_in", "layout_out", "copy")
#: fused part of a dispatch -> the delegate's name of the linked op
FUSED_AS_LINKED = {"add": "add", "add_const": "add", "mul": "mul", "mul_const": "mul", "relu": "relu",
                   "clamp": "relu", "hard_swish": "hard_swish"}


def expected_kinds(kernel: gt.GpuKernel) -> tuple[str, ...]:
    if kernel.kernel in EXPECTED:
        return EXPECTED[kernel.kernel]
    if kernel.kernel in gt.LINKABLE:
        return ("elementwise",)
    return (kernel.kernel,)  # no rule for it here: compared by name, so it shows as a difference


@dataclass
class Token:
    """One dispatch, deduced or executed: its kind and the generic names of its fused ops."""

    kind: str
    linked: frozenset[str]
    what: str  # for reports: the deduced kernel and its IR nodes, or the executed dispatch


def deduced_tokens(graph: Graph, vendor: str = "other", order: str = "dfs") -> list[Token]:
    out = []
    for k in gt.deduce_kernels(graph, vendor, order=order):
        kinds = expected_kinds(k)
        generic = set(FUSED_AS_LINKED.values())
        # an element-wise kernel's program shows its own operation the way it shows linked ones
        own = {k.kernel} if kinds == ("elementwise",) and k.kernel in generic else set()
        linked = frozenset(l for l in (*k.linked, *own) if l in generic)
        for j, kind in enumerate(kinds):
            # Winograd links into its output transform
            out.append(Token(kind, linked if j == len(kinds) - 1 else frozenset(),
                             f"{k.kernel_type} ({', '.join(k.nodes)})"))
    return out


def executed_tokens(kernels: Iterable[dict[str, Any]]) -> list[Token]:
    """One run's GPU kernel records (in execution order) as tokens, transfers left out."""
    out = []
    for k in kernels:
        kind = k.get("kernel_kind")
        if kind is None:
            raise ValueError(f"GPU kernel {k.get('name')!r} has no kernel_kind (not labelled: "
                             "run it through pipelines.runners.litert.run_native in kernel mode)")
        if kind in TRANSFERS:
            continue
        linked = frozenset(FUSED_AS_LINKED[f] for f in k.get("fused", []) if f in FUSED_AS_LINKED)
        out.append(Token(kind, linked, f"{kind}{'+' + '+'.join(k['fused']) if k.get('fused') else ''} {k.get('name', '')}"))
    return out


@dataclass
class NetworkTruth:
    name: str
    deduced: list[Token]
    executed: list[Token]
    differences: list[str] = field(default_factory=list)
    fusion_checked: int = 0
    fusion_agree: int = 0
    moved: int = 0  # dispatches that ran in another place of the order than deduced

    @property
    def multiset_share(self) -> float:
        """Dispatches in the kind multisets' intersection / the larger count."""
        a, b = Counter(t.kind for t in self.deduced), Counter(t.kind for t in self.executed)
        return sum((a & b).values()) / max(1, max(len(self.deduced), len(self.executed)))

    @property
    def same_order(self) -> bool:
        return [t.kind for t in self.deduced] == [t.kind for t in self.executed]

    @property
    def winograd(self) -> tuple[int, int]:
        """(convolutions the rules send to Winograd, Winograd convolutions that ran)."""
        return (sum(t.kind == "winograd_input" for t in self.deduced),
                sum(t.kind == "winograd_input" for t in self.executed))

    def row(self) -> dict[str, Any]:
        wd, we = self.winograd
        return {"network": self.name, "deduced": len(self.deduced), "executed": len(self.executed),
                "multiset_share": round(self.multiset_share, 4), "same_order": self.same_order, "moved": self.moved,
                "winograd_deduced": wd, "winograd_executed": we, "fusion_checked": self.fusion_checked,
                "fusion_agree": self.fusion_agree, "differences": list(self.differences)}


def compare(name: str, graph: Graph, kernels: Sequence[dict[str, Any]], vendor: str = "other",
            order: str = "dfs") -> NetworkTruth:
    """The deduction for ``graph`` against one run's executed GPU kernels."""
    res = NetworkTruth(name, deduced_tokens(graph, vendor, order), executed_tokens(kernels))
    a, b = [t.kind for t in res.deduced], [t.kind for t in res.executed]
    pairs: list[tuple[Token, Token]] = []
    lone_d: list[Token] = []
    lone_e: list[Token] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            pairs += zip(res.deduced[i1:i2], res.executed[j1:j2])
        else:
            lone_d += res.deduced[i1:i2]
            lone_e += res.executed[j1:j2]
    # a dispatch that ran elsewhere in the order is the same kernel, scheduled differently
    for d in list(lone_d):
        e = next((e for e in lone_e if e.kind == d.kind), None)
        if e is not None:
            pairs.append((d, e))
            lone_d.remove(d)
            lone_e.remove(e)
            res.moved += 1
    for d, e in pairs:
        res.fusion_checked += 1
        if d.linked == e.linked:
            res.fusion_agree += 1
        else:
            res.differences.append(f"fusion: deduced {d.what} links {sorted(d.linked) or 'nothing'}, "
                                   f"ran {e.what} with {sorted(e.linked) or 'nothing'}")
    for what in dict.fromkeys(d.what for d in lone_d):
        kinds = ", ".join(t.kind for t in lone_d if t.what == what)
        res.differences.append(f"deduced {what} as {kinds}: no such dispatch ran")
    for kind, n in sorted(Counter(e.kind for e in lone_e).items()):
        res.differences.append(f"ran {n} {kind} dispatch(es) the rules do not deduce")
    return res


# ---------------------------------------------------------------- networks that probe B.3
def probe_networks() -> list[tuple[str, Graph]]:
    """Single 3x3 convolutions (+ ReLU) on either side of every B.3 threshold of the default
    vendor (channel slices 16, 32 output tiles, stride, groups), and fusion probes (residual
    add + ReLU into a convolution, batch norm folding, concat, an unlinked add of two convolution
    outputs)."""
    nets = []

    def conv(label: str, cin: int, cout: int, hw: int, stride: int = 1, groups: int = 1) -> None:
        g = Graph(f"probe-{label}", source="probe")
        x = g.input([1, cin, hw, hw])
        g.set_outputs(g.add("relu", g.add("conv2d", x, out_channels=cout, kernel=3, stride=stride, padding=1,
                                          groups=groups)))
        nets.append((g.name, g))

    conv("64-64@24", 64, 64, 24)  # 16 slices each way, 36 tiles: Winograd
    conv("64-64@20", 64, 64, 20)  # 25 tiles: below 32
    conv("60-64@24", 60, 64, 24)  # 15 source slices
    conv("64-60@24", 64, 60, 24)  # 15 destination slices
    conv("128-128@28", 128, 128, 28)
    conv("32-32@56", 32, 32, 56)
    conv("64-64@48s2", 64, 64, 48, stride=2)
    conv("64-64@24g2", 64, 64, 24, groups=2)

    g = Graph("probe-residual", source="probe")
    x = g.input([1, 16, 16, 16])
    c = g.add("relu", g.add("batchnorm", g.add("conv2d", x, out_channels=16, kernel=3, padding=1)))
    d = g.add("batchnorm", g.add("conv2d", c, out_channels=16, kernel=3, padding=1))
    g.set_outputs(g.add("relu", g.add("add", [d, c])))
    nets.append((g.name, g))

    g = Graph("probe-branches", source="probe")
    x = g.input([1, 16, 16, 16])
    a = g.add("conv2d", x, out_channels=16, kernel=1)
    b = g.add("conv2d", x, out_channels=16, kernel=3, padding=1)
    s = g.add("add", [a, b])
    g.set_outputs(g.add("concat", [g.add("relu", s), g.add("avgpool", x, kernel=3, padding=1, count_include_pad=False)]))
    nets.append((g.name, g))
    return nets


__all__ = ["EXPECTED", "FUSED_AS_LINKED", "NetworkTruth", "Token", "compare", "deduced_tokens", "executed_tokens",
           "expected_kinds", "probe_networks"]
