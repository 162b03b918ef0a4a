"""What the three importers (:mod:`.pytorch`, :mod:`.onnx`, :mod:`.tflite`) share.

Each walks its model's nodes in order and maps each through a table of handlers onto IR
values; a value may be *pending* (a pattern awaiting its consumer, e.g. ``x + 3`` inside an
h-swish) until an operator outside the pattern needs its IR node. Shared here:

- the errors: :class:`UnsupportedModelError` (one line naming the model, the node and the op),
  and :class:`Unsupported`, a handler's refusal, which :class:`node_errors` turns into one;
- :func:`handler_registry`, the table of handlers and its decorator;
- :func:`unique_name` for IR node names taken from the model's own;
- :func:`materialized`, the IR node of a value, made once for a pending one;
- :func:`prelu_parameters`, the IR's rule for PReLU slopes, and :func:`reciprocal`, the
  factor of the ``scale`` a division by a scalar becomes;
- :func:`finish`: the outputs set, dead nodes dropped, the graph validated.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from ..ir import Graph, IRError, split_ref

#: Python errors a handler raises on a construct it did not expect: the walker reports them
#: as "cannot map" the node rather than as a traceback
_PYTHON_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError)


class UnsupportedModelError(ImportError):
    """A model (or one construct of it) the importer cannot express in the IR; one line."""


class Unsupported(Exception):
    """Raised by a handler; the walker adds the model, the node and its op (:class:`node_errors`)."""


class node_errors:
    """``with node_errors(model, where):`` around the mapping of one node: a handler's
    :class:`Unsupported`, an IRError and (unless ``cannot_map`` is None) a Python error of an
    unexpected construct leave as one UnsupportedModelError ``<model>: <where>: <what>``.
    ``where`` and ``cannot_map`` may be callables, called only when there is an error."""

    def __init__(self, model: str, where: str | Callable[[], str],
                 cannot_map: str | Callable[[], str] | None = "cannot map it"):
        self.model, self.where, self.cannot_map = model, where, cannot_map

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: Any, e: BaseException | None, tb: Any) -> bool:
        if e is None:
            return False
        if isinstance(e, (Unsupported, IRError)):
            raise UnsupportedModelError(f"{self.model}: {_text(self.where)}: {e}") from None
        if self.cannot_map is not None and isinstance(e, _PYTHON_ERRORS):
            raise UnsupportedModelError(
                f"{self.model}: {_text(self.where)}: {_text(self.cannot_map)}: {type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''}"
            ) from e
        return False


def _text(v: str | Callable[[], str]) -> str:
    return v() if callable(v) else v


def handler_registry() -> tuple[dict[str, Callable[..., Any]], Callable[..., Any]]:
    """An empty table op name -> handler, and the decorator ``@handler("Op", ...)`` that enters
    the function it decorates under each of those names."""
    table: dict[str, Callable[..., Any]] = {}

    def handler(*names: str):
        def deco(fn):
            for n in names:
                table[n] = fn
            return fn

        return deco

    return table, handler


def unique_name(g: Graph, base: str) -> str:
    """``base`` (``node`` if empty, ``:`` made ``_``) as a name no node of ``g`` has yet: a
    second node of the same model node gets ``_1``, ``_2``, ..."""
    base = (base or "node").replace(":", "_")
    name, k = base, 1
    while name in g.nodes:
        name = f"{base}_{k}"
        k += 1
    return name


def materialized(cache: dict, v: Any, build: Callable[[Any], str]) -> str:
    """The IR reference of the tensor value ``v``: its own, or for a pending pattern the node
    ``build(v)`` adds for it (or the Unsupported it raises), made once per value (``cache``)."""
    if v.pending is None:
        return v.ref
    if v not in cache:
        cache[v] = build(v)
    return cache[v]


def prelu_parameters(x_shape: tuple[int, ...], slope_shape: tuple[int, ...], fault: Callable[[int], str]) -> int:
    """``num_parameters`` of the IR prelu for a constant slope tensor of ``slope_shape`` on an
    input of ``x_shape``: one slope, or one per channel (axis 1); else Unsupported(fault(count))."""
    n = math.prod(slope_shape)
    if n != 1 and (len(x_shape) < 2 or n != x_shape[1]):
        raise Unsupported(fault(n))
    return int(n)


def reciprocal(v: float) -> float:
    """1 / v: a division by the scalar ``v`` is a ``scale`` by this (by zero: Unsupported)."""
    if v == 0:
        raise Unsupported("division by zero")
    return 1.0 / v


def prune_dead(g: Graph) -> None:
    """Drop nodes nothing reads (a traced computation whose result is unused)."""
    live = {split_ref(r)[0] for r in g.outputs}
    for node in reversed(list(g.nodes.values())):
        if node.name in live:
            live.update(split_ref(r)[0] for r in node.inputs)
    for name in [n for n, node in g.nodes.items() if n not in live and node.op != "input"]:
        del g.nodes[name]


def finish(g: Graph, model: str, outputs: list[str]) -> Graph:
    """``g`` with its ``outputs`` set and the nodes nothing reads dropped, validated (an IR
    fault is the model's UnsupportedModelError)."""
    g.set_outputs(*outputs)
    prune_dead(g)
    try:
        g.validate()
    except IRError as e:
        raise UnsupportedModelError(f"{model}: {e}") from None
    return g
