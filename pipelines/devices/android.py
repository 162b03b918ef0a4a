"""Talking to an Android phone through an adb server with adbutils, and reading what a phone says.

The adb device (``adb.py``) is built from these pieces:

- :func:`ensure_server` / :func:`open_phone`: the adb server named in the config (started when
  it is a loopback address and not running) and the phone with the configured serial on it. A
  serial of the form ``host:port`` that the server does not list as ready is connected first
  (``adb connect``, after ``adb disconnect`` when it is listed offline: phones on Wi-Fi
  debugging, and the test suite's adbd emulator).
- :func:`shell`: one shell command, its exit status and output (adb's shell protocol v1 has no
  exit status, so the command echoes it after a marker).
- Parsers of what phones print: ``getprop`` (``[key]: [value]`` lines), ``dumpsys
  thermalservice`` (``Thermal Status: N`` and the HAL temperatures), toybox ``df -k``, and the
  sysfs dump (``==> path <==`` blocks, as ``head`` prints several files) that
  :func:`sysfs_tree` expands into a local folder so ``topology.read_clusters`` reads a phone's
  clusters exactly as it reads this machine's.

The device catalog (``catalog.yaml``): :func:`describe_phone` describes a phone by its catalog
entry, else by what the phone says (:func:`entry_from_phone`: getprop and the sysfs clusters);
``adb.add_phone`` reads a phone over adb and writes its entry into the catalog.

Errors: a lost or refused connection raises :class:`AdbFault` (the caller decides whether to
retry); configuration mistakes (an unknown serial, an unauthorized phone) raise
:class:`PhoneError`, one line each, naming the serial and the server.
"""
from __future__ import annotations

import ipaddress
import os
import re
import shlex
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

SYSFS_CPU = "/sys/devices/system/cpu"
# what a phone's topology and clocks are read from (one shell loop prints them all)
SYSFS_GLOBS = (
    f"{SYSFS_CPU}/online", f"{SYSFS_CPU}/present", f"{SYSFS_CPU}/possible",
    f"{SYSFS_CPU}/cpu[0-9]*/cpufreq/related_cpus", f"{SYSFS_CPU}/cpu[0-9]*/cpufreq/affected_cpus",
    f"{SYSFS_CPU}/cpu[0-9]*/cpufreq/cpuinfo_max_freq", f"{SYSFS_CPU}/cpu[0-9]*/cpufreq/cpuinfo_min_freq",
    f"{SYSFS_CPU}/cpu[0-9]*/cpufreq/scaling_governor", f"{SYSFS_CPU}/cpu[0-9]*/cpu_capacity",
)
THERMAL_STATUS_NAMES = ("none", "light", "moderate", "severe", "critical", "emergency", "shutdown")
RC_MARK = "LATBENCH_RC="


class AdbFault(RuntimeError):
    """The adb connection to the phone failed (dropped, refused, offline): worth a retry."""


class PhoneError(RuntimeError):
    """The configured phone cannot be used as configured (one line; not worth a retry)."""

    def __init__(self, message: str, kind: str = "device_missing"):
        super().__init__(message)
        self.kind = kind


def fault_types() -> tuple[type, ...]:
    """Exceptions that mean "the connection failed" whichever layer raised them."""
    from adbutils.errors import AdbError

    return (AdbError, OSError, EOFError, struct.error, UnicodeDecodeError)


# ---------------------------------------------------------------- server and phone
def parse_server(addr: str) -> tuple[str, int]:
    """``host:port`` of the adb server (``adb_server`` in the config) -> (host, port)."""
    host, sep, port = str(addr).rpartition(":")
    if not sep or not host or not port.isdigit():
        raise PhoneError(f"adb_server: expected host:port such as 127.0.0.1:5037, got {addr!r}", kind="config")
    return host, int(port)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _reachable(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def ensure_server(addr: str, timeout: float = 20.0):
    """An adbutils client of the adb server at ``addr``; a loopback server that is not running is
    started (``adb -P <port> start-server``, with the adb adbutils finds: $PATH, else its own)."""
    import adbutils

    host, port = parse_server(addr)
    if not _reachable(host, port):
        if not _is_loopback(host):
            raise AdbFault(f"no adb server answers at {addr}")
        exe = adbutils.adb_path()
        try:
            subprocess.run([exe, "-P", str(port), "start-server"], capture_output=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise AdbFault(f"cannot start the adb server at {addr} with {exe}: {e}") from None
        if not _reachable(host, port, timeout=2.0):
            raise AdbFault(f"the adb server at {addr} did not start ({exe} -P {port} start-server)")
    return adbutils.AdbClient(host=host, port=port, socket_timeout=timeout)


def _looks_like_network_serial(serial: str) -> bool:
    host, sep, port = serial.rpartition(":")
    return bool(sep and host and port.isdigit())


def open_phone(client, serial: str, *, server: str, connect_timeout: float = 5.0, wait: float = 1.0):
    """The adbutils device of ``serial`` once it is in state ``device``.

    Raises :class:`PhoneError` (kind ``device_missing``) when the server does not know the serial,
    ``device_unauthorized`` when the phone has not accepted this computer's key, and
    :class:`AdbFault` when it is there but offline (or a network serial refuses the connection:
    the phone may come back, the caller retries)."""
    faults = fault_types()
    try:
        infos = {i.serial: i.state for i in client.list()}
        if infos.get(serial) != "device" and _looks_like_network_serial(serial):
            if serial in infos:  # offline: the server's own reconnection backs off; start afresh
                client.disconnect(serial)
            reply = client.connect(serial, timeout=connect_timeout)
            if "connected" not in reply or "unable" in reply or "failed" in reply:
                raise AdbFault(f"adb connect {serial}: {reply.strip()}")
        # a phone just (re)connected passes through offline/connecting states: wait a moment
        deadline = time.monotonic() + wait
        while True:
            infos = {i.serial: i.state for i in client.list()}
            state = infos.get(serial)
            if state in ("device", None, "unauthorized") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    except faults as e:
        if isinstance(e, (AdbFault, PhoneError)):
            raise
        raise AdbFault(f"adb server {server}: {one_line(e)}") from None
    if state is None:
        if _looks_like_network_serial(serial):
            raise AdbFault(f"serial {serial} is not reachable through the adb server {server}")
        attached = ", ".join(f"{s} ({st})" for s, st in sorted(infos.items())) or "none"
        raise PhoneError(f"serial: no phone with serial {serial!r} on the adb server {server} "
                         f"(attached: {attached}; `adb devices` lists them)", kind="device_missing")
    if state == "unauthorized":
        raise PhoneError(f"serial {serial}: the phone has not authorized this computer "
                         f"(accept the USB debugging prompt on the phone)", kind="device_unauthorized")
    if state != "device":
        raise AdbFault(f"serial {serial} is {state} on the adb server {server}")
    return client.device(serial)


def one_line(e: BaseException) -> str:
    text = " ".join(str(a) for a in e.args if isinstance(a, (str, int))) if e.args else ""
    text = " ".join((text or type(e).__name__).split())
    return text[:300]


# ---------------------------------------------------------------- shell
def shell(dev, command: str, *, timeout: float = 60.0) -> tuple[int, str]:
    """Runs ``command`` in the phone's shell; returns (exit status, output with stderr merged).

    Raises :class:`AdbFault` if the connection fails or the output ends without the exit marker
    (the stream was cut: the phone went away mid-command)."""
    try:
        out = dev.shell(f"{command}; echo {RC_MARK}$?", timeout=timeout, encoding="utf-8", rstrip=False)
    except fault_types() as e:
        raise AdbFault(one_line(e)) from None
    pos = out.rfind(RC_MARK)
    if pos < 0:
        raise AdbFault(f"the shell stream ended early (command: {command[:80]})")
    try:
        rc = int(out[pos + len(RC_MARK):].split()[0])
    except (ValueError, IndexError):
        raise AdbFault(f"unreadable exit status from the phone's shell: {out[pos:pos + 40]!r}") from None
    return rc, out[:pos]


def q(s: Any) -> str:
    return shlex.quote(str(s))


# ---------------------------------------------------------------- parsers
def parse_getprop(text: str) -> dict[str, str]:
    """``[ro.product.model]: [Pixel 4]`` lines -> {key: value}."""
    props = {}
    for m in re.finditer(r"^\[([^\]]+)\]:\s*\[(.*)\]\s*$", text, re.M):
        props[m.group(1)] = m.group(2)
    return props


def parse_thermal(text: str) -> dict[str, Any]:
    """``dumpsys thermalservice`` -> status (0 none ... 6 shutdown) and the hottest CPU (type 0)
    and skin (type 3) temperatures the HAL reports now (else the cached ones)."""
    m = re.search(r"Thermal Status:\s*(-?\d+)", text)
    status = int(m.group(1)) if m else None
    current = text.split("Current temperatures from HAL:", 1)
    temps_text = current[1] if len(current) == 2 else text
    temps = [(float(v), int(t), n) for v, t, n in
             re.findall(r"mValue=(-?[\d.]+),\s*mType=(-?\d+),\s*mName=([^,}]+)", temps_text)]
    cpu = [v for v, t, _ in temps if t == 0]
    skin = [v for v, t, _ in temps if t == 3]
    return {"status": status,
            "status_name": THERMAL_STATUS_NAMES[status] if status is not None and 0 <= status < 7 else None,
            "max_cpu_c": max(cpu) if cpu else None, "skin_c": max(skin) if skin else None}


def parse_df_available_kb(text: str) -> int | None:
    """Available KiB from ``df -k <path>`` (toybox and GNU print the same columns)."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    for parts in lines[1:]:
        nums = [p for p in parts if p.isdigit()]
        if len(nums) >= 3:
            return int(nums[2])
    return None


def parse_dump(text: str) -> dict[str, str]:
    """``==> /sys/... <==`` blocks followed by the file's content -> {path: content}."""
    files: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        m = re.fullmatch(r"==> (.+) <==", line.strip())
        if m:
            current = m.group(1)
            files[current] = ""
        elif current is not None and line.strip():
            files[current] += line.strip() + "\n"
    return files


def sysfs_dump_command(globs=SYSFS_GLOBS) -> str:
    """One shell loop printing every readable file of ``globs`` as a ``==> path <==`` block."""
    return f'for f in {" ".join(globs)}; do [ -r "$f" ] && echo "==> $f <==" && cat "$f"; done; true'


def sysfs_tree(dump: str, dest: str | os.PathLike) -> Path:
    """Writes the files of a sysfs dump under ``dest`` (``dest/sys/devices/system/cpu/...``) so
    ``topology.read_clusters(dest)`` can read them; returns ``dest``."""
    dest = Path(dest)
    for path, content in parse_dump(dump).items():
        if ".." in Path(path).parts:
            continue
        p = dest / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    return dest


def cpu_state_command(cpus) -> str:
    """Governor and current clock of each CPU, one ``cpuN governor khz`` line each."""
    return "; ".join(f'echo "cpu{c} $(cat {SYSFS_CPU}/cpu{c}/cpufreq/scaling_governor 2>/dev/null || echo -) '
                     f'$(cat {SYSFS_CPU}/cpu{c}/cpufreq/scaling_cur_freq 2>/dev/null || echo -)"'
                     for c in cpus)


def parse_cpu_state(text: str) -> tuple[dict[str, str | None], dict[str, int | None]]:
    gov, freq = {}, {}
    for m in re.finditer(r"^cpu(\d+) (\S+) (\S+)\s*$", text, re.M):
        c = f"cpu{m.group(1)}"
        gov[c] = None if m.group(2) == "-" else m.group(2)
        freq[c] = int(m.group(3)) if m.group(3).isdigit() else None
    return gov, freq


# ---------------------------------------------------------------- the phone in the device catalog
def entry_from_phone(name: str, props: dict[str, str], clusters, *, gpu: str | None = None):
    """A device catalog entry (``catalog.CatalogEntry``) from what a phone says about itself:
    ``getprop`` (maker, model, SoC) and its clusters as ``topology.read_clusters`` reads them from
    the phone's sysfs (core count, CPU ids, maximum clock). ``gpu`` as the device config names it
    (Android has no property for it)."""
    from .catalog import CatalogEntry, CpuCluster

    maker = (props.get("ro.product.manufacturer") or "").strip() or None
    if maker and maker.islower():
        maker = maker.capitalize()  # "samsung" -> "Samsung"
    model = (props.get("ro.product.model") or "").strip() or name
    if maker and not model.lower().startswith(maker.lower()):
        model = f"{maker} {model}"
    soc = (props.get("ro.soc.model") or props.get("ro.board.platform") or props.get("ro.hardware") or "").strip()
    soc_maker = (props.get("ro.soc.manufacturer") or "").strip()
    if soc and props.get("ro.soc.model") and soc_maker and not soc.lower().startswith(soc_maker.lower()):
        soc = f"{soc_maker} {soc}"
    cl = tuple(CpuCluster(tag=c.tag, cores=c.size, ghz=round(c.max_freq_khz / 1e6, 2) if c.max_freq_khz else None,
                          cpus=tuple(c.cpus), max_freq_khz=c.max_freq_khz) for c in clusters)
    return CatalogEntry(name=name, model=model, maker=maker, soc=soc or None, clusters=cl, gpu=gpu, os="android",
                        origin="the phone over adb: getprop (ro.product.*, ro.soc.*) and "
                               "/sys/devices/system/cpu (cpufreq related_cpus, cpuinfo_max_freq)")


def describe_phone(name: str, props: dict[str, str], clusters, *, gpu: str | None = None, catalog=None) -> dict:
    """How records describe a phone: its device catalog entry when the catalog has ``name``,
    else what the phone says (:func:`entry_from_phone`). ``catalog``: a Catalog, a path, or None
    (the suite's catalog.yaml).

    Returns ``described_by`` ("catalog" or "phone"), ``catalog`` (the file), ``device_model``,
    ``maker``, ``soc``, ``cpu`` (``1x large 2.84 GHz + ...``), ``gpu`` and, when the catalog's
    clusters (tag and core count) differ from the phone's, ``catalog_mismatch`` saying how: the
    clusters a scenario pins to are always the phone's own."""
    from .catalog import as_catalog

    cat = as_catalog(catalog)
    phone = entry_from_phone(name, props, clusters, gpu=gpu)
    entry = cat.lookup(name)
    chosen = entry or phone
    out = {"described_by": "catalog" if entry else "phone", "catalog": cat.where, "device_model": chosen.model,
           "maker": chosen.maker, "soc": chosen.soc, "cpu": chosen.cpu, "gpu": chosen.gpu or gpu}
    if entry is not None and entry.clusters:
        ours = [(c.tag, c.cores) for c in entry.clusters]
        theirs = [(c.tag, c.cores) for c in phone.clusters]
        if ours != theirs:
            out["catalog_mismatch"] = (f"{cat.where}: devices.{name} has clusters "
                                       f"{' + '.join(f'{n}x {t}' for t, n in ours)}, the phone "
                                       f"{' + '.join(f'{n}x {t}' for t, n in theirs)}")
    return out
