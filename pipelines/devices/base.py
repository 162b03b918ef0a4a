"""What the measure stage needs of a device, and the registry of device kinds.

A device is where scenarios run: the host itself (``host.py``) or a phone over adb. The
``measure`` stage talks to every device through the same few calls, so a new kind is one
class registered with ``@register_device_kind("<kind>")``:

- ``name`` (from config; part of every scenario id), ``kind``, ``gpu`` (None: no GPU scenarios);
- ``clusters()``: its CPU clusters (``topology.Cluster``), from which scenarios are enumerated;
- ``describe()``: the device description every record carries (provenance);
- ``frameworks``: the frameworks it can run (``tflite``, ``pytorch``);
- ``run(framework, artifact, *, scenario, mode, warmup, runs, overhead_pairs, records_path,
  trace_path, timeout)``: one fresh measuring process for one artifact in one scenario,
  returning a :class:`pipelines.runners.records.NativeRun` whose records (and trace) are also
  left at ``records_path`` (``trace_path``) on this machine; failures raise
  :class:`pipelines.runners.records.NativeRunError` with a ``kind`` (model_missing, cpus,
  timeout, crashed, device, ...) and a one-line message;
- ``lock(path)``: a context manager held for a whole sweep (one sweep at a time per device).

``make_device(cfg)`` builds the device a ``device:`` config section names.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Any, Iterator

from generators.registry import Registry

DEVICE_KINDS: Registry[type] = Registry("device kind")


def register_device_kind(kind: str):
    def deco(cls: type) -> type:
        return DEVICE_KINDS.register(kind)(cls)

    return deco


def make_device(cfg: Any) -> Any:
    """The device of a ``device`` config section (``kind`` picks the class, which reads the
    fields it needs with ``from_config``)."""
    kind = getattr(cfg, "kind", None) or (cfg.get("kind") if isinstance(cfg, dict) else None) or "host"
    return DEVICE_KINDS.get(kind).from_config(cfg)


class DeviceBusy(RuntimeError):
    """Another sweep holds the device's lock."""


@contextlib.contextmanager
def sweep_lock(path: str | os.PathLike, device: str) -> Iterator[None]:
    """An exclusive, non-blocking lock file: a second sweep on the same device fails at once
    with a one-line error instead of interleaving with the first (and skewing both)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            raise DeviceBusy(f"device {device}: a sweep is already running ({holder}; lock {path})") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}")
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
