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
- :func:`finish`: the outputs set, dead nodes dropped, the graph validated;
- the bounds on a model file from outside (:mod:`foundation.limits`), checked before the
  expensive part: :func:`read_model_file` (its size before it is read), :func:`check_elements`
  and :func:`check_graph_nodes` (a graph's declared tensors and node count before it is
  imported), :func:`check_zip` (a zip archive's central directory before anything inflates
  it: ``.pt``/``.ptl`` files; :func:`check_torch_file` for ``torch.save`` files). Each refusal
  is one UnsupportedModelError naming the file and the bound (``limits.<NAME>``).
"""
from __future__ import annotations

import math
import os
import struct
from pathlib import Path
from typing import Any, Callable, Iterable

from foundation import limits
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


# ---------------------------------------------------------------- bounds on model files from outside
def quoted(name: Any, width: int = 80) -> str:
    """A name taken from a file, quoted on one line (repr escapes line breaks and control
    characters), cut to ``width`` characters."""
    text = repr(name if isinstance(name, str) else str(name))
    return text if len(text) <= width else text[: width - 4] + "...'"


def _shape_text(shape: list[int]) -> str:
    dims = [str(d) for d in shape[:8]] + (["..."] if len(shape) > 8 else [])
    return "[" + ", ".join(dims) + "]"


def file_size(path: str | os.PathLike, what: str = "model file") -> int:
    """The size of the model file ``path`` in bytes; UnsupportedModelError (one line naming the
    file) when it is not a file or larger than ``limits.MODEL_FILE_BYTES``."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as e:
        raise UnsupportedModelError(f"{p}: cannot read the {what}: {e.strerror or e}") from None
    if not p.is_file():
        raise UnsupportedModelError(f"{p}: not a file")
    if size > limits.MODEL_FILE_BYTES:
        raise UnsupportedModelError(f"{p}: {size} bytes, more than a {what} may have ({limits.MODEL_FILE_BYTES} "
                                    "bytes, limits.MODEL_FILE_BYTES); not read")
    return size


def read_model_file(path: str | os.PathLike, what: str = "model file") -> bytes:
    """The bytes of ``path``, its size checked (:func:`file_size`) before it is read; reads what
    the check saw (a buffer of that size, not of the bound), and refuses a file that grew since."""
    size = file_size(path, what)
    with open(path, "rb") as fh:
        data = fh.read(size)
        if fh.read(1):
            raise UnsupportedModelError(f"{path}: the file grew while it was read; not read")
    return data


def check_bytes(data: bytes | bytearray | memoryview, model: str) -> None:
    """A model given as bytes: at most ``limits.MODEL_FILE_BYTES`` of them."""
    if len(data) > limits.MODEL_FILE_BYTES:
        raise UnsupportedModelError(f"{model}: {len(data)} bytes, more than a model file may have "
                                    f"({limits.MODEL_FILE_BYTES} bytes, limits.MODEL_FILE_BYTES)")


def elements(dims: Iterable[int]) -> int:
    """The element count of a declared shape, as an exact integer (no int64 overflow); a
    dimension below 1 (free: -1, or unknown: 0 in a signature) counts as 1. Stops multiplying
    once past ``limits.TENSOR_ELEMENTS`` (the count is then only known to be larger)."""
    n = 1
    for d in dims:
        d = int(d)
        if d > 1:
            n *= d
            if n > limits.TENSOR_ELEMENTS:
                return n
    return n


def check_elements(dims: Iterable[int], model: str, what: str | Callable[[], str]) -> None:
    """UnsupportedModelError ``<model>: <what> [...] has more than N elements
    (limits.TENSOR_ELEMENTS)`` when the shape ``dims`` has more elements than the bound.
    ``what`` names the tensor and the kind of shape (``input 'x' of shape``; a callable:
    called on refusal only)."""
    fault = too_many_elements(dims, what)
    if fault:
        raise UnsupportedModelError(f"{model}: {fault}; refused before importing")


def too_many_elements(dims: Iterable[int], what: str | Callable[[], str]) -> str | None:
    """``<what> [...] has more than N elements (limits.TENSOR_ELEMENTS)`` when the shape
    ``dims`` has more elements than the bound, else None."""
    dims = list(dims)
    if elements(dims) <= limits.TENSOR_ELEMENTS:
        return None
    return (f"{_text(what)} {_shape_text([int(d) for d in dims[:9]])} has more than {limits.TENSOR_ELEMENTS} elements "
            "(limits.TENSOR_ELEMENTS)")


def check_graph_nodes(n: int, model: str, what: str = "nodes") -> None:
    """UnsupportedModelError when a graph has more than ``limits.GRAPH_NODES`` nodes (``n``;
    callers that stop counting at the bound pass bound + 1)."""
    if n > limits.GRAPH_NODES:
        raise UnsupportedModelError(f"{model}: more than {limits.GRAPH_NODES} {what} (limits.GRAPH_NODES); "
                                    "refused before importing")


# -------- zip archives (TorchScript .pt/.ptl, torch.save files)
_EOCD = struct.Struct("<4s4H2LH")  # end of central directory record
_EOCD64_LOCATOR = struct.Struct("<4sLQL")
_EOCD64 = struct.Struct("<4sQ2H2L4Q")
_CENTRAL = struct.Struct("<4s6H3L5H2L")  # a central directory file header (46 bytes)
_STORED = 0


def is_zip(path: str | os.PathLike) -> bool:
    """The file starts as a zip archive does (a local file header)."""
    with open(path, "rb") as fh:
        return fh.read(4) == b"PK\x03\x04"


def check_zip(path: str | os.PathLike) -> None:
    """Refuse a zip archive before anything inflates it: its size (``limits.MODEL_FILE_BYTES``),
    then from its central directory (read as a stream, entry by entry) the number of members
    (``limits.ARCHIVE_MEMBERS``, from the end record before the directory is read), the sum of
    the unpacked sizes the members declare (``limits.ARCHIVE_UNPACKED_BYTES``; what a reader such
    as torch's allocates is what the directory declares), the ratio of unpacked to packed size
    of each compressed member (``limits.ARCHIVE_RATIO``), a stored member whose two sizes
    differ, and a member whose data would lie past the end of the file. One
    UnsupportedModelError naming the file, the member and the bound."""
    p = Path(path)
    size = file_size(p, "zip archive")
    where = f"{p}: zip archive"
    with open(p, "rb") as fh:
        tail = min(size, _EOCD.size + 0xFFFF)
        fh.seek(size - tail)
        end = fh.read(tail)
        at = end.rfind(b"PK\x05\x06")
        if at < 0 or len(end) - at < _EOCD.size:
            raise UnsupportedModelError(f"{where}: no end of central directory record (not a zip archive, or cut off)")
        _, disk, cd_disk, _, count, cd_size, cd_offset, _ = _EOCD.unpack_from(end, at)
        eocd_pos = size - tail + at
        if 0xFFFF in (count, disk, cd_disk) or 0xFFFFFFFF in (cd_size, cd_offset):  # zip64
            if eocd_pos < _EOCD64_LOCATOR.size:
                raise UnsupportedModelError(f"{where}: zip64 end record missing")
            fh.seek(eocd_pos - _EOCD64_LOCATOR.size)
            sig, _, rec_pos, _ = _EOCD64_LOCATOR.unpack(fh.read(_EOCD64_LOCATOR.size))
            if sig != b"PK\x06\x07" or rec_pos + _EOCD64.size > eocd_pos:
                raise UnsupportedModelError(f"{where}: damaged zip64 end record")
            fh.seek(rec_pos)
            sig, *_, count, cd_size, cd_offset = _EOCD64.unpack(fh.read(_EOCD64.size))
            if sig != b"PK\x06\x06":
                raise UnsupportedModelError(f"{where}: damaged zip64 end record")
            eocd_pos = rec_pos
        if count > limits.ARCHIVE_MEMBERS:
            raise UnsupportedModelError(f"{where}: {count} members, more than {limits.ARCHIVE_MEMBERS} "
                                        "(limits.ARCHIVE_MEMBERS); not unpacked")
        if cd_offset + cd_size > eocd_pos:
            raise UnsupportedModelError(f"{where}: the central directory lies past its end record (damaged)")
        fh.seek(cd_offset)
        left = cd_size
        total = 0
        for k in range(count):
            head = fh.read(_CENTRAL.size)
            left -= _CENTRAL.size
            if len(head) < _CENTRAL.size or head[:4] != b"PK\x01\x02" or left < 0:
                raise UnsupportedModelError(f"{where}: damaged central directory (member {k + 1} of {count})")
            (_, _, _, flags, method, _, _, _, packed, unpacked, name_len, extra_len, comment_len, _, _, _,
             offset) = _CENTRAL.unpack(head)
            raw_name, extra = fh.read(name_len), fh.read(extra_len)
            fh.seek(comment_len, os.SEEK_CUR)
            left -= name_len + extra_len + comment_len
            if left < 0 or len(raw_name) < name_len or len(extra) < extra_len:
                raise UnsupportedModelError(f"{where}: damaged central directory (member {k + 1} of {count})")
            if 0xFFFFFFFF in (packed, unpacked, offset):
                sizes = _zip64_sizes(extra, unpacked, packed, offset)
                if sizes is None:
                    raise UnsupportedModelError(f"{where}: damaged central directory (member {k + 1} of {count}: "
                                                "zip64 sizes without their extra field)")
                unpacked, packed, offset = sizes
            name = quoted(raw_name.decode("utf-8" if flags & 0x800 else "cp437", errors="replace"))
            if offset + packed > size:
                raise UnsupportedModelError(f"{where}: member {name} declares {packed} packed bytes past the end of "
                                            f"the file ({size} bytes; damaged or forged)")
            if method == _STORED and packed != unpacked:
                raise UnsupportedModelError(f"{where}: stored member {name} declares {unpacked} bytes unpacked from "
                                            f"{packed} stored (damaged or forged)")
            if method != _STORED and unpacked > limits.ARCHIVE_RATIO * packed:
                ratio = f"{unpacked / packed:.0f}x" if packed else "from 0 bytes"
                raise UnsupportedModelError(f"{where}: member {name} inflates {packed} bytes to {unpacked} ({ratio}), "
                                            f"more than {limits.ARCHIVE_RATIO}x (limits.ARCHIVE_RATIO); not unpacked")
            total += unpacked
            if total > limits.ARCHIVE_UNPACKED_BYTES:
                raise UnsupportedModelError(f"{where}: its members unpack to more than {limits.ARCHIVE_UNPACKED_BYTES} "
                                            f"bytes (limits.ARCHIVE_UNPACKED_BYTES; past it at member {name}); "
                                            "not unpacked")


def check_torch_file(path: str | os.PathLike) -> None:
    """A ``torch.save`` / TorchScript file before ``torch.load`` reads it: its size, and when
    it is in the zip format (every file torch >= 1.6 writes) its archive directory
    (:func:`check_zip`). The legacy (pre-zip) format is held to the size bound only."""
    file_size(path, "torch file")
    if is_zip(path):
        check_zip(path)


def _zip64_sizes(extra: bytes, unpacked: int, packed: int, offset: int) -> tuple[int, int, int] | None:
    """The 64-bit sizes and offset of the zip64 extra field (id 1) for those saturated at
    2**32-1; None when the field is missing or short."""
    i = 0
    while i + 4 <= len(extra):
        tag, n = struct.unpack_from("<2H", extra, i)
        body = extra[i + 4: i + 4 + n]
        if tag == 1:
            vals = [v for (v,) in struct.iter_unpack("<Q", body[: len(body) // 8 * 8])]
            out = []
            for v in (unpacked, packed, offset):
                if v == 0xFFFFFFFF:
                    if not vals:
                        return None
                    v = vals.pop(0)
                out.append(v)
            return out[0], out[1], out[2]
        i += 4 + n
    return None
