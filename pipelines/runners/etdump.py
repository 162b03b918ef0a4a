"""Reading an ExecuTorch ETDump: per execution, its operators' times, as plain dicts.

A program loaded with ``Runtime.get().load_program(path, enable_etdump=True)`` (no debug
buffer: timing needs none) records profiling events on every ``Method.execute``;
:func:`write_etdump` writes what it holds (``Program.write_etdump_result_to_file``; each write
holds the executions since the previous one) and :func:`read_etdump` reads the file back with
ExecuTorch's own deserialiser (``executorch.devtools.etdump.serialize``: the flatbuffer as the
schema's dataclasses), imported without ``executorch.devtools``' and ``executorch.exir``'s
package ``__init__`` (the Inspector, pandas and the compiler: seconds of a measuring process,
and pandas' allocator starts a thread). Each ``Execute`` block of the file is one run; its
events come in the order the runtime closed them (an instruction's operators before its call,
the call before ``Method::execute``), the grouping ExecuTorch's Inspector makes of them too
(``tests/test_etdump.py`` checks the two agree).

:func:`read_etdump` returns ``{"executions", "calls", "events"}``, lists of dicts ordered by run:

- ``executions``: ``run``, ``start_ns``, ``duration_ns`` of each ``Method::execute``;
- ``calls``: each instruction the method executed, ``run``, ``call`` (its position in the
  run), ``kind`` (``delegate``: an XNNPACK ``DELEGATE_CALL``; ``operator``: an
  ``OPERATOR_CALL`` of a portable kernel), ``start_ns``, ``duration_ns``;
- ``events``: one per operator, ``run``, ``order`` (position in the run), ``call``, ``name``,
  ``kind`` and ``start_ns``, ``duration_ns``. ``kind`` ``delegated``: an XNNPACK runtime
  operator, named as XNNPACK names it and numbered per delegate call ("Convolution (NHWC,
  F32) IGEMM #1"); ``portable``: a kernel of ExecuTorch's portable library, by its kernel name
  (``max_pool2d_with_indices.out``: the runtime's ``native_call_<name>`` event).

What the times are: ``Method::execute``, the calls and the portable kernels are spans of the
runtime's clock (steady_clock nanoseconds since the runtime's platform layer started, not
CLOCK_MONOTONIC's zero: align by the ``Method::execute`` spans). A delegated event's duration
is XNNPACK's own measurement of that operator, in whole microseconds (converted to ns); its
start is synthesised by the delegate (operators placed back to back from the call's start),
not measured. The runs' run index follows the ``Method::execute`` start times.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

EXECUTE = "Method::execute"
DELEGATE_CALL = "DELEGATE_CALL"
OPERATOR_CALL = "OPERATOR_CALL"
NATIVE_PREFIX = "native_call_"
FILE_IDENTIFIER = b"ED00"  # a size-prefixed flatbuffer: bytes 8-11


class EtdumpError(ValueError):
    """The ETDump cannot be read; the message is one line naming the file."""


def write_etdump(program: Any, path: str | Path) -> Path:
    """Write the ETDump of ``program`` (an ``executorch.runtime.Program`` loaded with
    ``enable_etdump=True``) to ``path``; the debug-buffer file it names is written only when
    the program has a debug buffer."""
    path = Path(path)
    program.write_etdump_result_to_file(str(path), str(path.with_name(path.name + ".debug")))
    if not path.is_file():
        raise EtdumpError(f"{path}: the runtime wrote no ETDump (was the program loaded with enable_etdump=True?)")
    return path


def _deserialised(path: Path):
    """The file as ExecuTorch's ETDump dataclasses (``ETDumpFlatCC``)."""
    from .bare import bare_package

    with path.open("rb") as f:
        head = f.read(12)
    if head[8:12] != FILE_IDENTIFIER:  # checked here: the reader's flatc prints its usage on any bad file
        raise EtdumpError(f"{path}: not an ETDump (no {FILE_IDENTIFIER.decode()} file identifier)")
    bare_package("executorch.exir")
    bare_package("executorch.devtools")
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    try:
        return deserialize_from_etdump_flatcc(path.read_bytes())
    except Exception as e:  # the reader's errors name neither the file nor the cause on one line
        first = str(e).splitlines()[0][:200] if str(e) else ""
        raise EtdumpError(f"{path}: not a readable ETDump ({type(e).__name__}: {first})") from None


def _block_run(events: list) -> dict[str, Any] | None:
    """One ``Execute`` block's run: its ``Method::execute`` span, calls and operator events."""
    profile = [e.profile_event for e in events or [] if e.profile_event is not None]
    execute = next((p for p in profile if p.name == EXECUTE), None)
    if execute is None:
        return None
    run = {"start_ns": int(execute.start_time), "duration_ns": int(execute.end_time - execute.start_time),
           "calls": [], "events": []}
    pending: list[dict[str, Any]] = []  # events of the call not closed yet
    for p in profile:
        span = {"start_ns": int(p.start_time), "duration_ns": int(p.end_time - p.start_time)}
        if p.name == EXECUTE:
            continue
        if p.delegate_debug_id_str or (p.delegate_debug_id_int is not None and p.delegate_debug_id_int >= 0):
            name = p.delegate_debug_id_str or str(p.delegate_debug_id_int)
            pending.append({"name": name, "kind": "delegated", **span})
        elif p.name and p.name.startswith(NATIVE_PREFIX):
            pending.append({"name": p.name[len(NATIVE_PREFIX):], "kind": "portable", **span})
        elif p.name in (DELEGATE_CALL, OPERATOR_CALL):
            call = len(run["calls"])
            run["calls"].append({"call": call, "kind": "delegate" if p.name == DELEGATE_CALL else "operator", **span})
            run["events"].extend({**q, "call": call} for q in pending)
            pending = []
    run["events"].extend({**q, "call": None} for q in pending)  # outside any recorded call
    return run


def read_etdump(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """The executions, instruction calls and operator events of an ETDump (see the module)."""
    path = Path(path)
    if not path.is_file():
        raise EtdumpError(f"{path}: no such ETDump file")
    runs = [r for r in (_block_run(block.events) for block in _deserialised(path).run_data) if r is not None]
    runs.sort(key=lambda r: r["start_ns"])
    out: dict[str, list[dict[str, Any]]] = {"executions": [], "calls": [], "events": []}
    for k, r in enumerate(runs):
        out["executions"].append({"run": k, "start_ns": r["start_ns"], "duration_ns": r["duration_ns"]})
        out["calls"].extend({"run": k, **c} for c in r["calls"])
        out["events"].extend({"run": k, "order": j, **e} for j, e in enumerate(r["events"]))
    return out
