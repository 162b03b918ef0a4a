"""nn-Meter's kernel detection: black-box fusion-rule tests and the kernel search.

nn-Meter (Zhang et al., MobiSys'21, section 4) does not read a backend's source to learn which
operators it fuses; it measures small *test cases* and decides from their latencies:

- operator types: every pair (op1 -> op2) with a single inbound and outbound (Fig. 4a) is
  measured alone (T(op1), T(op2), each on the tensor it sees in the pair) and connected
  (T(op1, op2)); the pair is fused when Inequation 1 holds,
  ``T(op1) + T(op2) - T(op1, op2) > alpha * min(T(op1), T(op2))``, with alpha = 0.5;
- operator connections: a multi-outbound case (op3 feeding op4 and op5, Fig. 4b) and a
  multi-inbound case (op6 and op7 feeding op8, Fig. 4c) are built from fusible operators; the
  fusion plan whose summed time is closest to the measured time is the rule (0: no fusion,
  1: fusion with the left-most in/outbound, 2: with the right-most).

The rules are stored as JSON (:class:`FusionRules`) and applied to a network by the depth-first
kernel search of Algorithm 1 (:func:`find_kernels`): a fused operator takes the type of its
predecessor and the union of both in/outbounds, and the search continues from it.

Measuring goes through the device layer (``make_device({'kind': 'host', ...}).run('tflite',
...)``, see :func:`host_measure`); deciding is a pure function of the measured times
(:func:`decide_rules`), so tests can check the decision logic on given times and the
measurement on a few real cases.

One documented deviation, switchable: every measured time includes the runtime's fixed
per-inference cost (invoke, input/output handling), which a pair pays once and two singles
twice, so on a fast CPU Inequation 1 would call nearly every pair "fused". With
``subtract_overhead`` (default) the time of a trivial network (one ReLU on 8 values) is
subtracted from every measurement first; the raw decision is kept in each rule's evidence.
"""
from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from generators.export.nnmeter_ir import rule_type
from generators.ir import Graph, Node, split_ref

RULES_DIR = Path(__file__).resolve().parent / "rules"
FORMAT = "latbench-fusion-rules"
VERSION = 1
ALPHA = 0.5  # nn-Meter's empirical coefficient (section 4.1)


# ---------------------------------------------------------------- operator types
def nnmeter_type(node: Node, graph: Graph) -> str:
    """The operator type nn-Meter's rules speak of (``conv``, ``dwconv``, ``bn``, ``relu``...):
    the ``rule_type`` of the operator's entry in the nn-Meter exporter's table."""
    return rule_type(node, graph)


# ---------------------------------------------------------------- rules
@dataclass
class FusionRules:
    """Detected fusion rules of one backend (nn-Meter's JSON, plus the evidence and provenance).

    ``pairs`` maps ``"<op1>_<op2>"`` to whether the pair fuses; a pair that was not tested is
    not fused (the stated fallback). ``multi_inbound`` / ``multi_outbound``: 0 no fusion, 1 with
    the left-most in/outbound, 2 with the right-most (nn-Meter's encoding).
    """

    pairs: dict[str, bool] = field(default_factory=dict)
    multi_inbound: int = 0
    multi_outbound: int = 0
    alpha: float = ALPHA
    backend: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)

    def fuses(self, pred: str, succ: str) -> bool:
        return bool(self.pairs.get(f"{pred}_{succ}", False))

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "backend": self.backend, "alpha": self.alpha,
                "rules": {**dict(sorted(self.pairs.items())), "multi-inbound": self.multi_inbound,
                          "multi-outbound": self.multi_outbound},
                "evidence": self.evidence, "provenance": self.provenance}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=False) + "\n")
        return path

    @classmethod
    def from_dict(cls, d: Any, where: str = "rules") -> "FusionRules":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ValueError(f"{where}: not a {FORMAT} file")
        if d.get("version") != VERSION:
            raise ValueError(f"{where}: unsupported version {d.get('version')!r} (this code reads {VERSION})")
        raw = dict(d.get("rules") or {})
        multi = {}
        for key in ("multi-inbound", "multi-outbound"):
            v = raw.pop(key, 0)
            if v not in (0, 1, 2):
                raise ValueError(f"{where}: rules.{key}: expected 0, 1 or 2, got {v!r}")
            multi[key] = v
        for k, v in raw.items():
            if not isinstance(v, bool):
                raise ValueError(f"{where}: rules.{k}: expected true or false, got {v!r}")
        return cls(pairs=raw, multi_inbound=multi["multi-inbound"], multi_outbound=multi["multi-outbound"],
                   alpha=float(d.get("alpha", ALPHA)), backend=str(d.get("backend", "")),
                   evidence=d.get("evidence") or {}, provenance=d.get("provenance") or {})

    @classmethod
    def load(cls, path: str | Path) -> "FusionRules":
        path = Path(path)
        try:
            d = json.loads(path.read_text())
        except OSError as e:
            raise FileNotFoundError(f"{path}: cannot read fusion rules: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: malformed JSON at line {e.lineno}: {e.msg}") from None
        return cls.from_dict(d, where=str(path))


def load_rules(name: str | Path = "host") -> FusionRules:
    """Rules by backend name (``rules/<name>.json`` beside this module) or by path.
    The default, ``host``, is the set detected on this project's host with the CPU (XNNPACK)
    backend by ``python -m kernels.report detect``."""
    p = Path(name)
    if p.suffix != ".json":
        p = RULES_DIR / f"{name}.json"
        if not p.is_file():
            known = sorted(q.stem for q in RULES_DIR.glob("*.json"))
            raise FileNotFoundError(f"no fusion rules named {name!r} in {RULES_DIR} (known: {', '.join(known) or 'none'})")
    return FusionRules.load(p)


# ---------------------------------------------------------------- kernel search (Algorithm 1)
@dataclass(frozen=True)
class Kernel:
    """One kernel found by the search: the IR nodes it covers (in fusion order), their nn-Meter
    operator types, and its type, which is the type of its first operator (Algorithm 1, line 5)."""

    nodes: tuple[str, ...]
    ops: tuple[str, ...]

    @property
    def type(self) -> str:
        return self.ops[0]

    @property
    def name(self) -> str:
        """nn-Meter's notation, ``conv+bn+relu``."""
        return "+".join(self.ops)


@dataclass
class _Op:
    id: int
    type: str
    nodes: list[str]
    ops: list[str]
    ins: list[int]
    outs: list[int]
    forked: bool = False  # took one outbound of several: the others stay separate


def find_kernels(graph: Graph, rules: FusionRules) -> list[Kernel]:
    """The kernels of ``graph`` under ``rules`` by nn-Meter's depth-first search (Algorithm 1).

    Operators are the IR nodes except inputs. The traversal starts at the readers of the
    graph's inputs in graph order; each operator's outbounds are visited left to right (graph
    order). A pair fuses when the pair rule holds and the predecessor has one outbound (or the
    multi-outbound rule picks this successor) and the successor has one inbound (or the
    multi-inbound rule picks this predecessor as its left-/right-most fusable inbound). Each
    operator is traversed once; fusion is still checked into an already traversed successor
    (as conv2++bn joins add++relu in the paper's Fig. 5). Kernels are returned in the order of
    their first node in the graph.
    """
    order = {name: i for i, name in enumerate(graph.nodes)}
    ops: dict[int, _Op] = {}
    by_node: dict[str, int] = {}
    for node in graph.nodes.values():
        if node.op == "input":
            continue
        i = len(ops)
        ops[i] = _Op(i, nnmeter_type(node, graph), [node.name], [nnmeter_type(node, graph)], [], [])
        by_node[node.name] = i
    for node in graph.nodes.values():
        if node.op == "input":
            continue
        me = by_node[node.name]
        for ref in node.inputs:
            src = split_ref(ref)[0]
            if src in by_node and by_node[src] not in ops[me].ins:
                ops[me].ins.append(by_node[src])
                ops[by_node[src]].outs.append(me)
    next_id = [len(ops)]

    def fusable(pred: _Op, succ: _Op) -> bool:
        return rules.fuses(pred.type, succ.type) and (len(pred.outs) == 1 or rules.multi_outbound != 0)

    def allowed(pred: _Op, succ: _Op) -> bool:
        if not fusable(pred, succ):
            return False
        if len(pred.outs) > 1:  # multi-outbound: only the chosen end of the outbounds, once
            if pred.forked:
                return False
            pick = pred.outs[0] if rules.multi_outbound == 1 else pred.outs[-1]
            if pick != succ.id:
                return False
        if len(succ.ins) > 1:  # multi-inbound: only the left-/right-most fusable inbound
            if rules.multi_inbound == 0:
                return False
            cands = [i for i in succ.ins if fusable(ops[i], succ)]
            pick = cands[0] if rules.multi_inbound == 1 else cands[-1]
            if pick != pred.id:
                return False
        return True

    def fuse(pred: _Op, succ: _Op) -> _Op:
        new = _Op(next_id[0], pred.type, pred.nodes + succ.nodes, pred.ops + succ.ops,
                  [i for i in dict.fromkeys(pred.ins + succ.ins) if i != pred.id],
                  [o for o in dict.fromkeys(pred.outs + succ.outs) if o != succ.id])
        new.forked = pred.forked or len(pred.outs) > 1
        next_id[0] += 1
        for old in (pred, succ):
            del ops[old.id]
        ops[new.id] = new
        neighbours = set(pred.ins + pred.outs + succ.ins + succ.outs) - {pred.id, succ.id}
        for other in (ops[i] for i in neighbours):  # rewire neighbours to the new operator
            for lst in (other.ins, other.outs):
                for k, v in enumerate(lst):
                    if v in (pred.id, succ.id):
                        lst[k] = new.id
                deduped = list(dict.fromkeys(lst))
                lst[:] = [v for v in deduped if v != other.id]
        return new

    visited: set[int] = set()

    def traverse(start: int) -> None:
        # Iterative form of DFStraverse (deep networks exceed Python's recursion limit).
        stack: list[tuple[int, int]] = [(start, 0)]
        visited.add(start)
        while stack:
            oid, k = stack.pop()
            if oid not in ops:
                continue  # fused away meanwhile
            pred = ops[oid]
            if k >= len(pred.outs):
                continue
            succ = ops[pred.outs[k]]
            if allowed(pred, succ):
                new = fuse(pred, succ)
                visited.add(new.id)
                stack.append((new.id, 0))  # continue from the fused operator (line 18)
                continue
            stack.append((oid, k + 1))  # then the next outbound of pred
            if succ.id not in visited:
                visited.add(succ.id)
                stack.append((succ.id, 0))

    roots = [by_node[c] for n in graph.input_nodes for c in graph.consumers()[n.name] if c in by_node]
    for r in dict.fromkeys(roots):
        if r in ops and r not in visited:
            traverse(r)
    for oid in list(ops):  # operators unreachable from an input (constants-only branches)
        if oid in ops and oid not in visited:
            traverse(oid)
    kernels = [Kernel(tuple(o.nodes), tuple(o.ops)) for o in ops.values()]
    return sorted(kernels, key=lambda kern: order[kern.nodes[0]])


# ---------------------------------------------------------------- test cases (section 4.1)
#: Operator types the test cases cover: how to add one after a tensor, and the rank it takes.
#: Binary operators take the case's input as their second operand, so the case keeps one
#: inbound per operator; ``fc`` runs on a flattened (rank-2) input.
def _binary(op: str) -> Callable[[Graph, str, str], str]:
    return lambda g, x, inp: g.add(op, [x, inp] if g.tensor_shape(x) == g.tensor_shape(inp) else [x, x])


TEST_OPS: dict[str, tuple[Callable[[Graph, str, str], str], tuple[int, ...]]] = {
    "conv": (lambda g, x, inp: g.add("conv2d", x, out_channels=g.tensor_shape(x)[1], kernel=3, padding=1), (4,)),
    "dwconv": (lambda g, x, inp: g.add("conv2d", x, out_channels=g.tensor_shape(x)[1], kernel=3, padding=1,
                                       groups=g.tensor_shape(x)[1]), (4,)),
    "fc": (lambda g, x, inp: g.add("fc", x, out_features=g.tensor_shape(x)[1]), (2,)),
    "bn": (lambda g, x, inp: g.add("batchnorm", x), (4, 2)),
    "relu": (lambda g, x, inp: g.add("relu", x), (4, 2)),
    "relu6": (lambda g, x, inp: g.add("relu6", x), (4, 2)),
    "hswish": (lambda g, x, inp: g.add("hswish", x), (4, 2)),
    "sigmoid": (lambda g, x, inp: g.add("sigmoid", x), (4, 2)),
    "add": (_binary("add"), (4, 2)),
    "mul": (_binary("mul"), (4, 2)),
    "maxpool": (lambda g, x, inp: g.add("maxpool", x, kernel=3, stride=1, padding=1), (4,)),
    "avgpool": (lambda g, x, inp: g.add("avgpool", x, kernel=3, stride=1, padding=1), (4,)),
    "gap": (lambda g, x, inp: g.add("global_avgpool", x), (4,)),
    "concat": (lambda g, x, inp: g.add("concat", [x, inp] if g.tensor_shape(x)[2:] == g.tensor_shape(inp)[2:] else [x, x]), (4,)),
}
#: Default test tensors (NCHW): small enough for well under a second per case, large enough
#: that an element-wise operator (microseconds) stands out of a 3x3 convolution's noise (at 8
#: channels tens of microseconds, so its 1% noise is well below the element-wise time).
SHAPE4 = (1, 8, 64, 64)
SHAPE2 = (1, 1024)


@dataclass
class TestCase:
    """One test network: ``kind`` single | pair | multi_outbound | multi_inbound; ``ops`` the
    operator types; ``graph`` the IR; ``key`` what its time is stored under."""

    key: str
    kind: str
    ops: tuple[str, ...]
    graph: Graph


def _rank_for(*types: str) -> int | None:
    common = set(TEST_OPS[types[0]][1])
    for t in types[1:]:
        common &= set(TEST_OPS[t][1])
    # a pair needs op2 to accept op1's output: gap keeps rank 4 ([1, C, 1, 1])
    return 4 if 4 in common else (2 if 2 in common else None)


def _single(t: str, shape: Sequence[int]) -> TestCase:
    g = Graph(f"single-{t}", source="nnmeter-test")
    x = g.input(list(shape))
    g.set_outputs(TEST_OPS[t][0](g, x, x))
    return TestCase(f"{t}@{'x'.join(map(str, shape))}", "single", (t,), g)


def pair_case(t1: str, t2: str, shape4: Sequence[int] = SHAPE4, shape2: Sequence[int] = SHAPE2) -> TestCase | None:
    """The single in/outbound case op1 -> op2 (Fig. 4a), or None when op2 cannot read op1's output."""
    rank = _rank_for(t1, t2)
    if rank is None:
        return None
    g = Graph(f"pair-{t1}-{t2}", source="nnmeter-test")
    x = g.input(list(shape4 if rank == 4 else shape2))
    y = TEST_OPS[t1][0](g, x, x)
    g.set_outputs(TEST_OPS[t2][0](g, y, x))
    return TestCase(f"{t1}_{t2}", "pair", (t1, t2), g)


def singles_for(case: TestCase) -> list[TestCase]:
    """The single-operator cases a pair's decision needs, each on the tensor it sees in the pair."""
    g = case.graph
    names = [n for n in g.nodes if g.nodes[n].op != "input"]
    out = []
    for t, name in zip(case.ops, names):
        shape = g.input_shapes(g.nodes[name])[0]
        out.append(_single(t, shape))
    return out


def multi_outbound_case(t3: str, t4: str, t5: str, shape: Sequence[int] = SHAPE4) -> TestCase:
    """op3 feeding op4 (left) and op5 (right), both network outputs (Fig. 4b)."""
    g = Graph(f"multiout-{t3}-{t4}-{t5}", source="nnmeter-test")
    x = g.input(list(shape))
    y = TEST_OPS[t3][0](g, x, x)
    g.set_outputs(TEST_OPS[t4][0](g, y, x), TEST_OPS[t5][0](g, y, x))
    return TestCase(f"multiout:{t3}>{t4},{t5}", "multi_outbound", (t3, t4, t5), g)


def multi_inbound_case(t6: str, t7: str, t8: str, shape: Sequence[int] = SHAPE4) -> TestCase:
    """op6 (left) and op7 (right) feeding the binary op8 (Fig. 4c)."""
    g = Graph(f"multiin-{t6}-{t7}-{t8}", source="nnmeter-test")
    x = g.input(list(shape))
    a = TEST_OPS[t6][0](g, x, x)
    b = TEST_OPS[t7][0](g, x, x)
    g.set_outputs(g.add({"add": "add", "mul": "mul", "concat": "concat"}[t8], [a, b]))
    return TestCase(f"multiin:{t6},{t7}>{t8}", "multi_inbound", (t6, t7, t8), g)


def overhead_case() -> TestCase:
    """The trivial network whose time stands for the fixed per-inference cost."""
    g = Graph("overhead", source="nnmeter-test")
    x = g.input([1, 8])
    g.set_outputs(g.add("relu", x))
    return TestCase("overhead", "single", ("relu",), g)


def make_test_cases(types: Iterable[str] | None = None, shape4: Sequence[int] = SHAPE4,
                    shape2: Sequence[int] = SHAPE2) -> list[TestCase]:
    """Every valid ordered pair of ``types`` (default: all of TEST_OPS) as single in/outbound
    cases, plus the single-operator cases they need (deduplicated by type and tensor)."""
    types = list(types or TEST_OPS)
    for t in types:
        if t not in TEST_OPS:
            raise KeyError(f"unknown test operator type {t!r} (known: {', '.join(TEST_OPS)})")
    cases: dict[str, TestCase] = {}
    for t1 in types:
        for t2 in types:
            c = pair_case(t1, t2, shape4, shape2)
            if c is None:
                continue
            cases[c.key] = c
            for s in singles_for(c):
                cases.setdefault(s.key, s)
    return list(cases.values())


# ---------------------------------------------------------------- deciding (Inequation 1)
def pair_fused(t1: float, t2: float, t12: float, alpha: float = ALPHA) -> bool:
    """Inequation 1: T(op1) + T(op2) - T(op1, op2) > alpha * min(T(op1), T(op2))."""
    return t1 + t2 - t12 > alpha * min(t1, t2)


def closest_plan(measured: float, plans: Sequence[float]) -> int:
    """Index of the fusion plan whose summed time is closest to the measured one (section 4.1)."""
    return min(range(len(plans)), key=lambda i: abs(plans[i] - measured))


def decide_rules(times: dict[str, float], cases: Sequence[TestCase], alpha: float = ALPHA,
                 overhead: float = 0.0) -> FusionRules:
    """Rules from measured times (ms, keyed by ``TestCase.key``); ``overhead`` is subtracted
    from every time first (0 for nn-Meter's raw decision). Multi-in/outbound cases use the
    pair times of their fused candidates (which must be among the measured pairs)."""
    def t(key: str) -> float:
        return max(times[key] - overhead, 0.0)

    rules = FusionRules(alpha=alpha)
    for c in cases:
        if c.kind != "pair":
            continue
        s1, s2 = (s.key for s in singles_for(c))
        fused = pair_fused(t(s1), t(s2), t(c.key), alpha)
        raw = pair_fused(times[s1], times[s2], times[c.key], alpha)
        rules.pairs[c.key] = fused
        rules.evidence[c.key] = {"t_op1_ms": times[s1], "t_op2_ms": times[s2], "t_pair_ms": times[c.key],
                                 "fused": fused, "fused_without_overhead_correction": raw}
    for c in cases:
        if c.kind not in ("multi_outbound", "multi_inbound"):
            continue
        a, b, z = c.ops
        ta, tb, tz = (t(s.key) for s in _case_singles(c))
        if c.kind == "multi_outbound":  # a -> b (left), a -> z (right)
            plans = [ta + tb + tz, t(f"{a}_{b}") + tz, t(f"{a}_{z}") + tb]
        else:  # a (left), b (right) -> z
            plans = [ta + tb + tz, t(f"{a}_{z}") + tb, t(f"{b}_{z}") + ta]
        choice = closest_plan(t(c.key), plans)
        setattr(rules, c.kind, choice)
        rules.evidence[c.key] = {"t_case_ms": times[c.key], "plans_ms": [p + overhead for p in plans],
                                 "plans": ["no fusion", "left-most", "right-most"], "choice": choice}
    return rules


def _case_singles(c: TestCase) -> list[TestCase]:
    g = c.graph
    names = [n for n in g.nodes if g.nodes[n].op != "input"]
    return [_single(t, g.input_shapes(g.nodes[n])[0]) for t, n in zip(c.ops, names)]


def connection_cases(rules: FusionRules, shape: Sequence[int] = SHAPE4) -> list[TestCase]:
    """The multi-outbound and multi-inbound cases, built from pairs detected as fused (four
    fusible operators, as section 4.1 says), with the single cases they need; empty when no
    suitable pair fused. Preference: conv first (the common producer in CNNs)."""
    fused = [k.split("_") for k, v in rules.pairs.items() if v]
    out: list[TestCase] = []
    # multi-outbound: a producer fused with two different successors (or one, twice)
    by_pred: dict[str, list[str]] = {}
    for a, b in fused:
        if _rank_for(a, b) == 4 and b not in ("add", "mul", "concat"):
            by_pred.setdefault(a, []).append(b)
    preds = sorted(by_pred, key=lambda a: (a != "conv", a))
    if preds:
        a = preds[0]
        succ = by_pred[a]
        c = multi_outbound_case(a, succ[0], succ[1] if len(succ) > 1 else succ[0], shape)
        out += [c] + _case_singles(c)
    # multi-inbound: two producers each fused with the same binary operator
    by_bin: dict[str, list[str]] = {}
    for a, b in fused:
        if b in ("add", "mul") and _rank_for(a, b) == 4 and a not in ("gap",):
            by_bin.setdefault(b, []).append(a)
    for z, srcs in sorted(by_bin.items()):
        srcs = sorted(srcs, key=lambda a: (a != "conv", a))
        c = multi_inbound_case(srcs[0], srcs[1] if len(srcs) > 1 else srcs[0], z, shape)
        out += [c] + _case_singles(c)
        break
    return out


# ---------------------------------------------------------------- measuring on the host
def host_measure(workdir: str | Path, runs: int = 30, warmup: int = 5, repeats: int = 1,
                 cpus: tuple[int, ...] = (0,), device: str = "host") -> Callable[[TestCase], float]:
    """A measuring function for :func:`detect_rules`: exports the case to TFLite fp32 under
    ``workdir`` and runs it end to end through the device layer, one pinned core, one thread,
    in ``repeats`` fresh processes; returns the median over processes of the median run time,
    in ms (the median of one process drifts by a few percent between processes, more than
    the difference a fused element-wise operator makes). Records are kept beside the model.
    Its ``many(cases)`` measures a batch in rounds, one process per case a round (what
    :func:`detect_rules` uses)."""
    from generators.export.tflite import export_tflite
    from pipelines.devices import make_device
    from pipelines.scenarios import Scenario

    workdir = Path(workdir)
    dev = make_device({"kind": "host", "name": device})
    scenario = Scenario(device, "tflite", "cpu", "fp32", cores="1large", cpus=cpus, threads=1)

    def model_of(case: TestCase) -> tuple[str, Path]:
        # the model id in the name: a case of another tensor shape never reuses a stale file
        safe = case.key.replace(":", "-").replace(">", "-to-").replace(",", "-").replace("@", "-at-")
        safe = f"{safe}-{case.graph.model_id}"
        model = workdir / f"{safe}.tflite"
        if not model.is_file():
            export_tflite(case.graph, model)
        return safe, model

    def many(cases: Sequence[TestCase]) -> dict[str, float]:
        """The cases' times, measured in rounds: a round runs each case once, so a slow episode
        of the machine (everything slower for seconds to minutes on a shared VM, docs/measure.md) falls on
        the cases of a round alike, not on one case's processes only, which decided a pair's
        inequality when each case's processes ran back to back."""
        models = {c.key: model_of(c) for c in cases}
        medians: dict[str, list[float]] = {k: [] for k in models}
        for r in range(repeats):
            for key, (safe, model) in models.items():
                run = dev.run("tflite", model, scenario=scenario, mode="e2e", warmup=warmup, runs=runs,
                              records_path=workdir / f"{safe}.{r}.records.jsonl")
                medians[key].append(statistics.median(run.durations_ns()) / 1e6)
        return {k: statistics.median(v) for k, v in medians.items()}

    def measure(case: TestCase) -> float:
        return many([case])[case.key]

    measure.many = many  # type: ignore[attr-defined]  # detect_rules measures a batch in rounds
    return measure


def detect_rules(measure: Callable[[TestCase], float], types: Iterable[str] | None = None,
                 alpha: float = ALPHA, subtract_overhead: bool = True, shape4: Sequence[int] = SHAPE4,
                 shape2: Sequence[int] = SHAPE2, connections: bool = True, backend: str = "",
                 progress: Callable[[str], None] | None = None) -> FusionRules:
    """Measure the test cases with ``measure`` (a TestCase -> ms function) and decide the rules.
    Pairs first; then the multi-in/outbound cases built from the detected fusible pairs."""
    started = time.time()
    cases = make_test_cases(types, shape4, shape2)
    times: dict[str, float] = {}

    # a measure with a ``many`` (host_measure's) takes a batch in rounds; a plain one, case by case
    many = getattr(measure, "many", None)

    def run(cs: Sequence[TestCase]) -> None:
        todo = list({c.key: c for c in cs if c.key not in times}.values())
        got = many(todo) if many is not None else {c.key: measure(c) for c in todo}
        for c in todo:
            times[c.key] = got[c.key]
            if progress:
                progress(f"{c.key}: {times[c.key]:.4f} ms")

    oh = overhead_case()
    run([oh, *cases])  # the overhead case in the same rounds as the pairs it is subtracted from
    overhead = times[oh.key] if subtract_overhead else 0.0
    rules = decide_rules(times, cases, alpha, overhead)
    if connections:
        extra = connection_cases(rules, shape4)
        run(extra)
        rules = decide_rules(times, cases + extra, alpha, overhead)
    rules.backend = backend
    rules.evidence["overhead_ms"] = times[oh.key]
    rules.evidence["subtract_overhead"] = subtract_overhead
    rules.provenance.update({"cases": len(times), "seconds": round(time.time() - started, 1),
                             "shape4": list(shape4), "shape2": list(shape2)})
    return rules


__all__ = ["ALPHA", "FusionRules", "Kernel", "TEST_OPS", "TestCase", "closest_plan", "connection_cases",
           "decide_rules", "detect_rules", "find_kernels", "host_measure", "load_rules", "make_test_cases",
           "multi_inbound_case", "multi_outbound_case", "nnmeter_type", "pair_case", "pair_fused"]
