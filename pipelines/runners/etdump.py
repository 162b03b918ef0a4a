"""Reading an ExecuTorch ETDump: per execution, its operators' times, as plain dicts.

A program loaded with ``Runtime.get().load_program(path, enable_etdump=True)`` (no debug
buffer: timing needs none) records profiling events on every ``Method.execute``;
:func:`write_etdump` writes what it holds (``Program.write_etdump_result_to_file``; each write
holds the executions since the previous one) and :func:`read_etdump` reads the file back with
ExecuTorch's own reader, ``executorch.devtools.Inspector`` (no ETRecord needed).

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

import warnings
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


def _inspector(path: Path):
    from executorch.devtools import Inspector
    from executorch.devtools.inspector import TimeScale

    with path.open("rb") as f:
        head = f.read(12)
    if head[8:12] != FILE_IDENTIFIER:  # checked here: the reader's flatc prints its usage on any bad file
        raise EtdumpError(f"{path}: not an ETDump (no {FILE_IDENTIFIER.decode()} file identifier)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Output Buffer not found": no debug buffer, by design
            return Inspector(etdump_path=str(path), source_time_scale=TimeScale.NS, target_time_scale=TimeScale.NS)
    except Exception as e:  # the reader's errors name neither the file nor the cause on one line
        first = str(e).splitlines()[0][:200] if str(e) else ""
        raise EtdumpError(f"{path}: not a readable ETDump ({type(e).__name__}: {first})") from None


def _block_runs(block) -> list[dict[str, Any]]:
    """The executions one Inspector event block holds (every run of one event signature)."""
    events = [e for e in block.events if e.perf_data is not None]
    execute = next((e for e in events if e.name == EXECUTE), None)
    if execute is None:
        return []
    runs = [{"start_ns": int(s), "duration_ns": round(d), "calls": [], "events": []}
            for s, d in zip(execute.start_time, execute.perf_data.raw)]
    for i, run in enumerate(runs):
        pending: list[dict[str, Any]] = []  # events of the call not closed yet
        for e in events:
            if e.name == EXECUTE:
                continue
            span = {"start_ns": int(e.start_time[i]), "duration_ns": round(e.perf_data.raw[i])}
            if e.is_delegated_op:
                pending.append({"name": e.name, "kind": "delegated", **span})
            elif e.name.startswith(NATIVE_PREFIX):
                pending.append({"name": e.name[len(NATIVE_PREFIX):], "kind": "portable", **span})
            elif e.name in (DELEGATE_CALL, OPERATOR_CALL):
                call = len(run["calls"])
                run["calls"].append({"call": call, "kind": "delegate" if e.name == DELEGATE_CALL else "operator", **span})
                run["events"].extend({**p, "call": call} for p in pending)
                pending = []
        run["events"].extend({**p, "call": None} for p in pending)  # outside any recorded call
    return runs


def read_etdump(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """The executions, instruction calls and operator events of an ETDump (see the module)."""
    path = Path(path)
    if not path.is_file():
        raise EtdumpError(f"{path}: no such ETDump file")
    runs = [r for block in _inspector(path).event_blocks for r in _block_runs(block)]
    runs.sort(key=lambda r: r["start_ns"])
    out: dict[str, list[dict[str, Any]]] = {"executions": [], "calls": [], "events": []}
    for k, r in enumerate(runs):
        out["executions"].append({"run": k, "start_ns": r["start_ns"], "duration_ns": r["duration_ns"]})
        out["calls"].extend({"run": k, **c} for c in r["calls"])
        out["events"].extend({"run": k, "order": j, **e} for j, e in enumerate(r["events"]))
    return out
