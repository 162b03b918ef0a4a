"""The architecture IR: one framework-neutral DAG of typed operators with shapes (batch 1).

A node's output tensors are referred to as ``"name"`` (its first output) or ``"name:k"``.
Nodes are kept in topological order; ``Graph.add`` infers shapes as it goes, so a builder
always knows the shape of what it just made, and every error names the node at fault.

The canonical JSON form (``to_json``) is byte-stable; ``model_id`` hashes only the
structure (operators, attributes, wiring, outputs), not node names, block labels or
metadata, so the same network always gets the same id whichever generator made it.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from foundation import limits
from foundation.atomic import write_text
from .ops import OpError, config_id, op_config, op_spec, normalize_attrs
from foundation.safeload import MAX_BYTES, LoadError, load_json_text, read_text

FORMAT = "latbench-ir"
VERSION = 1
MAX_NODES = limits.IR_NODES
MAX_FILE_BYTES = MAX_BYTES
BYTES_PER_ELEMENT = {"fp32": 4, "fp16": 2, "int8": 1}


class IRError(ValueError):
    """Invalid IR; the message names the node (and file, when loaded from one)."""


@dataclass
class Node:
    name: str
    op: str
    inputs: list[str]
    attrs: dict[str, Any]
    block: str | None = None
    shapes: list[list[int]] = field(default_factory=list)  # one per output tensor
    # the op configuration (ops.op_config) and its process-wide integer (ops.config_id), set with
    # the shapes; derived, so not compared
    config: tuple | None = field(default=None, compare=False, repr=False)
    config_id: int = field(default=-1, compare=False, repr=False)

    @property
    def shape(self) -> list[int]:
        return self.shapes[0]


@dataclass(frozen=True)
class NodeCost:
    name: str
    op: str
    macs: int
    params: int
    input_elements: int
    output_elements: int

    @property
    def memory_elements(self) -> int:
        return self.input_elements + self.output_elements + self.params


def split_ref(ref: str) -> tuple[str, int]:
    name, sep, idx = ref.rpartition(":")
    if sep and idx.isdigit():
        return name, int(idx)
    return ref, 0


def _prod(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class Graph:
    def __init__(self, name: str = "", source: str = "", meta: dict | None = None):
        self.name = name
        self.source = source
        self.meta: dict[str, Any] = dict(meta or {})
        self.nodes: dict[str, Node] = {}
        self.outputs: list[str] = []
        self._block: list[str] = []
        self._counter: dict[str, int] = {}

    # ------------------------------------------------------------ building
    @contextlib.contextmanager
    def block(self, label: str) -> Iterator[None]:
        """Label every node added inside with the block it came from (nested: ``a/b``)."""
        self._block.append(label)
        try:
            yield
        finally:
            self._block.pop()

    def _fresh_name(self, op: str) -> str:
        prefix = "/".join(self._block + [op]) if self._block else op
        while True:
            k = self._counter.get(prefix, 0)
            self._counter[prefix] = k + 1
            name = f"{prefix}_{k}"
            if name not in self.nodes:
                return name

    def add(self, op: str, inputs: list[str] | str = (), name: str | None = None, block: str | None = None, **attrs) -> str:
        """Append a node; return the reference of its (first) output."""
        return self.add_node(op, inputs, name=name, block=block, attrs=attrs)

    def add_node(self, op: str, inputs: list[str] | str = (), name: str | None = None, block: str | None = None,
                 attrs: dict[str, Any] | None = None) -> str:
        """:meth:`add` with the attributes as one dict: any attribute name, even ``name`` or
        ``inputs``, reaches the operator's schema (which refuses what it does not know)."""
        if isinstance(inputs, str):
            inputs = [inputs]
        name = name or self._fresh_name(op)
        if name in self.nodes:
            raise IRError(f"node {name!r}: duplicate node name")
        if block is None and self._block:
            block = "/".join(self._block)
        node = Node(name=name, op=op, inputs=list(inputs), attrs=dict(attrs or {}), block=block)
        self._infer(node)
        self.nodes[name] = node
        return name

    def add_multi(self, op: str, inputs: list[str] | str, name: str | None = None, **attrs) -> list[str]:
        """Append a node with several outputs (split); return one reference per output."""
        ref = self.add(op, inputs, name=name, **attrs)
        n = len(self.nodes[ref].shapes)
        return [f"{ref}:{k}" for k in range(n)]

    def input(self, shape: list[int], name: str = "input") -> str:
        return self.add("input", [], name=name, shape=list(shape))

    def set_outputs(self, *refs: str) -> "Graph":
        for r in refs:
            if not isinstance(r, str):
                raise IRError(f"output {r!r}: expected a tensor reference (a node name)"[:200])
            self.tensor_shape(r)
        self.outputs = list(refs)
        return self

    # ------------------------------------------------------------ shapes
    def tensor_shape(self, ref: str) -> list[int]:
        name, idx = split_ref(ref)
        node = self.nodes.get(name)
        if node is None:
            raise IRError(f"reference {ref!r}: no such node")
        if idx >= len(node.shapes):
            raise IRError(f"reference {ref!r}: node {name!r} has {len(node.shapes)} output(s)")
        return node.shapes[idx]

    shape = tensor_shape

    def _infer(self, node: Node) -> None:
        where = f"node {node.name!r} ({node.op})"
        try:
            spec = op_spec(node.op)
            node.attrs = normalize_attrs(spec, node.attrs)
            lo, hi = spec.arity
            if len(node.inputs) < lo or (hi is not None and len(node.inputs) > hi):
                want = f"{lo}" if lo == hi else f"{lo}..{hi if hi is not None else 'n'}"
                raise OpError(f"takes {want} input(s), got {len(node.inputs)}")
            in_shapes = []
            for ref in node.inputs:
                src, idx = split_ref(ref)
                if src not in self.nodes:
                    raise OpError(f"dangling input {ref!r}: no node of that name before it")
                shapes = self.nodes[src].shapes
                if idx >= len(shapes):
                    raise OpError(f"input {ref!r}: node {src!r} has {len(shapes)} output(s)")
                in_shapes.append(shapes[idx])
            node.shapes = spec.infer(node.attrs, in_shapes)
            node.config = op_config(node.op, node.attrs, in_shapes, node.shapes)
            node.config_id = config_id(node.config)
        except OpError as e:
            raise IRError(f"{where}: {e}") from None

    def input_shapes(self, node: Node) -> list[list[int]]:
        return [self.tensor_shape(r) for r in node.inputs]

    @property
    def input_nodes(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.op == "input"]

    def consumers(self) -> dict[str, list[str]]:
        """Map each node name to the names of the nodes that read any of its outputs."""
        out: dict[str, list[str]] = {n: [] for n in self.nodes}
        for node in self.nodes.values():
            for ref in node.inputs:
                out[split_ref(ref)[0]].append(node.name)
        return out

    # ------------------------------------------------------------ validation
    def validate(self) -> "Graph":
        """Check the whole graph; raise IRError naming the first node at fault."""
        if not self.input_nodes:
            raise IRError("graph has no input node")
        if not self.outputs:
            raise IRError("graph has no outputs")
        for ref in self.outputs:
            self.tensor_shape(ref)
        # Re-run inference in order: catches edits made after building.
        seen: dict[str, Node] = {}
        nodes, self.nodes = self.nodes, seen
        try:
            for node in nodes.values():
                self._infer(node)
                seen[node.name] = node
        finally:
            self.nodes = nodes
        used = {split_ref(r)[0] for n in nodes.values() for r in n.inputs} | {split_ref(r)[0] for r in self.outputs}
        for node in nodes.values():
            if node.name not in used:
                raise IRError(f"node {node.name!r} ({node.op}): output is never used (dead node)")
        return self

    # ------------------------------------------------------------ costs
    def costs(self) -> list[NodeCost]:
        out = []
        for node in self.nodes.values():
            spec = op_spec(node.op)
            ins = self.input_shapes(node)
            out.append(
                NodeCost(
                    name=node.name,
                    op=node.op,
                    macs=int(spec.macs(node.attrs, ins, node.shapes)),
                    params=int(spec.params(node.attrs, ins, node.shapes)),
                    input_elements=sum(_prod(s) for s in ins),
                    output_elements=sum(_prod(s) for s in node.shapes) if node.op != "input" else 0,
                )
            )
        return out

    @property
    def flops(self) -> int:
        """Multiply-accumulates of conv and FC layers (nn-Meter's FLOPs)."""
        return sum(c.macs for c in self.costs())

    @property
    def params(self) -> int:
        return sum(c.params for c in self.costs())

    def memory_access(self, precision: str = "fp32") -> int:
        """Bytes read and written: input + output feature maps + parameters of every node."""
        if precision not in BYTES_PER_ELEMENT:
            raise IRError(f"unknown precision {precision!r} (known: {', '.join(BYTES_PER_ELEMENT)})")
        return sum(c.memory_elements for c in self.costs()) * BYTES_PER_ELEMENT[precision]

    def summary(self) -> dict[str, Any]:
        costs = self.costs()
        elems = sum(c.memory_elements for c in costs)
        return {
            "nodes": len(self.nodes),
            "flops": sum(c.macs for c in costs),
            "params": sum(c.params for c in costs),
            "memory_elements": elems,
            "memory_bytes": {p: elems * b for p, b in BYTES_PER_ELEMENT.items()},
        }

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes.values():
            if n.op != "input":
                counts[n.op] = counts.get(n.op, 0) + 1
        return dict(sorted(counts.items()))

    # ------------------------------------------------------------ canonical form
    def structure(self) -> dict[str, Any]:
        """The id-defining part: nodes as indices, no names, labels or metadata."""
        index = {name: i for i, name in enumerate(self.nodes)}

        def ref(r: str) -> list[int]:
            name, k = split_ref(r)
            return [index[name], k]

        return {
            "nodes": [[n.op, n.attrs, [ref(r) for r in n.inputs]] for n in self.nodes.values()],
            "outputs": [ref(r) for r in self.outputs],
        }

    @property
    def model_id(self) -> str:
        blob = json.dumps(self.structure(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "model_id": self.model_id,
            "name": self.name,
            "source": self.source,
            "meta": self.meta,
            "summary": self.summary(),
            "inputs": [n.name for n in self.input_nodes],
            "outputs": list(self.outputs),
            "nodes": [
                {"name": n.name, "op": n.op, "inputs": n.inputs, "attrs": n.attrs, "block": n.block, "shapes": n.shapes}
                for n in self.nodes.values()
            ],
        }

    def to_json(self) -> str:
        """Canonical text: sorted keys, one node per line, so files diff well and are byte-stable."""
        d = self.to_dict()
        nodes = d.pop("nodes")
        head = json.dumps(d, sort_keys=True, separators=(",", ":"))
        lines = [json.dumps(n, sort_keys=True, separators=(",", ":")) for n in nodes]
        return head[:-1] + ',"nodes":[\n' + ",\n".join(lines) + "\n]}\n"

    def save(self, path: str | Path) -> Path:
        """Write atomically (a killed run never leaves half a file)."""
        return write_text(path, self.to_json())

    # ------------------------------------------------------------ loading
    @classmethod
    def from_dict(cls, d: Any, where: str = "IR") -> "Graph":
        if not isinstance(d, dict):
            raise IRError(f"{where}: expected a JSON object, got {type(d).__name__}")
        if d.get("format") != FORMAT:
            raise IRError(f"{where}: not a {FORMAT} file (format={d.get('format')!r})")
        if d.get("version") != VERSION:
            raise IRError(f"{where}: unsupported IR version {d.get('version')!r} (this code reads {VERSION})")
        raw_nodes = d.get("nodes")
        if not isinstance(raw_nodes, list):
            raise IRError(f"{where}: 'nodes' must be a list")
        if len(raw_nodes) > MAX_NODES:
            raise IRError(f"{where}: {len(raw_nodes)} nodes (at most {MAX_NODES})")
        for key in ("name", "source"):
            if not isinstance(d.get(key, ""), str):
                raise IRError(f"{where}: {key!r} must be a string, got {type(d[key]).__name__}")
        if d.get("meta") is not None and not isinstance(d["meta"], dict):
            raise IRError(f"{where}: 'meta' must be an object, got {type(d['meta']).__name__}")
        parsed: dict[str, dict] = {}
        for i, n in enumerate(raw_nodes):
            if not isinstance(n, dict) or not isinstance(n.get("name"), str) or not isinstance(n.get("op"), str) \
                    or not n["name"]:
                raise IRError(f"{where}: nodes[{i}] needs a non-empty string 'name' and a string 'op'")
            if n["name"] in parsed:
                raise IRError(f"{where}: node {n['name']!r}: duplicate node name")
            if not isinstance(n.get("inputs", []), list) or not isinstance(n.get("attrs", {}), dict):
                raise IRError(f"{where}: node {n['name']!r}: 'inputs' must be a list and 'attrs' an object")
            if n.get("block") is not None and not isinstance(n["block"], str):
                raise IRError(f"{where}: node {n['name']!r}: 'block' must be a string or null")
            parsed[n["name"]] = n
        order = _topological_order(parsed, where)
        g = cls(name=d.get("name", ""), source=d.get("source", ""), meta=d.get("meta") or {})
        try:
            for name in order:
                n = parsed[name]
                g.add_node(n["op"], n.get("inputs", []), name=name, block=n.get("block"), attrs=n.get("attrs", {}))
                stored = n.get("shapes")
                if stored is not None and stored != g.nodes[name].shapes:
                    raise IRError(f"node {name!r} ({n['op']}): stored shapes {stored} differ from inferred {g.nodes[name].shapes}")
            outputs = d.get("outputs")
            if not isinstance(outputs, list) or not outputs:
                raise IRError("'outputs' must be a non-empty list")
            g.set_outputs(*outputs)
            g.validate()
        except IRError as e:
            raise IRError(f"{where}: {e}") from None
        stored_id = d.get("model_id")
        if stored_id is not None and stored_id != g.model_id:
            raise IRError(f"{where}: model_id {stored_id} does not match the content (computed {g.model_id})")
        return g

    @classmethod
    def from_json(cls, text: str, where: str = "IR") -> "Graph":
        """Parse IR text through the bounded loader (size, depth, integers: see
        :mod:`foundation.safeload`); every fault is one IRError line naming ``where``."""
        if len(text) > MAX_FILE_BYTES:
            raise IRError(f"{where}: larger than {MAX_FILE_BYTES} bytes")
        try:
            d = load_json_text(text, where)
        except LoadError as e:
            raise IRError(str(e)) from None
        return cls.from_dict(d, where)

    @classmethod
    def load(cls, path: str | Path) -> "Graph":
        path = Path(path)
        try:
            text = read_text(path, MAX_FILE_BYTES)
        except LoadError as e:
            raise IRError(str(e)) from None
        return cls.from_json(text, where=str(path))


def _topological_order(nodes: dict[str, dict], where: str) -> list[str]:
    """Order nodes so every input comes first, keeping file order wherever it already is.

    A node is emitted right after its not-yet-emitted inputs (depth-first, iterative), so a
    file that is already topological loads in exactly its own order (and keeps its id).
    Names dangling inputs and cycles.
    """
    deps: dict[str, list[str]] = {}
    for name, n in nodes.items():
        srcs = []
        for ref in n.get("inputs", []):
            if not isinstance(ref, str):
                raise IRError(f"{where}: node {name!r}: input {ref!r} is not a string")
            src = split_ref(ref)[0]
            if src not in nodes:
                raise IRError(f"{where}: node {name!r} ({n['op']}): dangling input {ref!r}: no such node")
            srcs.append(src)
        deps[name] = srcs
    order: list[str] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: emitted
    for root in nodes:
        if state.get(root) == 2:
            continue
        stack = [(root, iter(deps[root]))]
        state[root] = 1
        while stack:
            name, it = stack[-1]
            for dep in it:
                if state.get(dep) == 2:
                    continue
                if state.get(dep) == 1:
                    path = [s[0] for s in stack]
                    raise IRError(f"{where}: cycle through nodes {' -> '.join(path[path.index(dep):] + [dep])}")
                state[dep] = 1
                stack.append((dep, iter(deps[dep])))
                break
            else:
                stack.pop()
                state[name] = 2
                order.append(name)
    return order
