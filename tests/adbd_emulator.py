#!/usr/bin/env python3
"""A small adbd (the phone side of adb) for tests: the real adb server and the real adbutils
client talk to it as to a phone reached over TCP (``adb connect 127.0.0.1:<port>``).

What it speaks (the adb wire protocol, 24-byte little-endian message headers):

- ``CNXN`` without authentication (the banner names a device and its properties);
- streams (``OPEN``/``OKAY``/``WRTE``/``CLSE``, one ``WRTE`` in flight per stream, as the
  protocol's flow control requires);
- ``shell:<command>`` (protocol v1: stdout and stderr merged, no exit status; adbutils appends
  ``; echo X4EXIT:$?`` when it wants one);
- ``sync:`` with ``STAT``, ``LIST``, ``SEND``, ``RECV`` and ``QUIT``.

What it plays: a sandbox folder (``--root``) is the phone's file system. Shell commands run on
this machine with ``/bin/sh``; absolute phone paths under ``/data``, ``/sdcard``, ``/sys`` and
``/system`` are mapped into the sandbox (and mapped back in the output), so ``/data/local/tmp``
and the cpufreq files the device layer reads live in the sandbox. ``PATH`` holds only
``<root>/system/bin``: links to a few of this machine's tools (``taskset`` among them, unless
``--no-taskset``) plus emulated Android tools answering as a phone does: ``getprop``,
``dumpsys thermalservice``, ``cmd power set-fixed-performance-mode-enabled`` and toybox-style
``df``. Programs started through the shell are this machine's (an x86-64 "phone" runs the
host's latbench-run): the point is the protocol and the flow, not the instruction set.

Phones (``--profile``):

- ``host`` (default): the CPUs this process may use become the phone's CPUs (at most
  ``--cpus``, default 2), split into a slow and a fast cluster so that ``taskset`` masks pin
  real CPUs; ``ro.product.cpu.abi`` is this machine's.
- ``<name>`` of a recorded sysfs dump ``tests/data/sysfs/<name>.txt`` (Snapdragon 855, ...):
  the phone's topology for reading clusters over adb; programs still run on this machine.

``--data-kb`` sets the size of the ``/data`` partition (``df`` and ``SEND`` honour it: a push
past it fails as on a full phone).

Run it: ``python tests/adbd_emulator.py --root DIR --port PORT`` (prints ``listening
127.0.0.1:PORT`` once it accepts). Use a port outside 5555-5585: the adb server scans that
range for Android emulators by itself. Tests start it through :class:`EmulatorProcess`.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYSFS_DIR = HERE / "data" / "sysfs"

A_SYNC, A_CNXN, A_OPEN, A_OKAY, A_CLSE, A_WRTE, A_AUTH, A_STLS = (
    0x434E5953, 0x4E584E43, 0x4E45504F, 0x59414B4F, 0x45534C43, 0x45545257, 0x48545541, 0x534C5453)
A_VERSION = 0x01000001  # skips data checksums (we send correct ones anyway)
MAX_PAYLOAD = 256 * 1024
SYNC_DATA_MAX = 64 * 1024
PHONE_DIRS = ("data", "sdcard", "sys", "system", "storage")
HOST_TOOLS = ("sh", "cat", "ls", "rm", "mkdir", "rmdir", "chmod", "cp", "mv", "echo", "printf", "test", "[",
              "head", "tail", "grep", "wc", "sleep", "kill", "id", "uname", "env", "true", "false", "which",
              "stat", "touch", "sed", "cut", "tr", "sort", "dirname", "basename", "readlink", "md5sum",
              "sha256sum", "nproc", "date")
EMULATED_TOOLS = ("getprop", "dumpsys", "cmd", "df")
THERMAL_NAMES = ("NONE", "LIGHT", "MODERATE", "SEVERE", "CRITICAL", "EMERGENCY", "SHUTDOWN")


# ================================================================ the phone (sandbox)
def host_abi() -> str:
    return {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64-v8a", "arm64": "arm64-v8a"}.get(
        platform.machine().lower(), platform.machine())


def parse_dump(text: str) -> dict[str, str]:
    """``==> /sys/... <==`` blocks (the output of ``head`` on several files) -> {path: content}."""
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


def host_sysfs(max_cpus: int) -> tuple[dict[str, str], list[int]]:
    """A phone tree over this machine's CPUs: a slow cluster below a fast one, so taskset masks pin
    real CPUs. Clock values are those of a Snapdragon 855's small and prime cores."""
    cpus = sorted(os.sched_getaffinity(0))[:max_cpus]
    half = max(len(cpus) // 2, 1) if len(cpus) > 1 else len(cpus)
    small, large = cpus[:half], cpus[half:] or cpus[:half]
    files = {"/sys/devices/system/cpu/online": ",".join(map(str, cpus)) + "\n",
             "/sys/devices/system/cpu/present": ",".join(map(str, cpus)) + "\n"}
    for group, khz in ((small, 1785600), (large, 2841600)):
        for c in group:
            d = f"/sys/devices/system/cpu/cpu{c}/cpufreq/"
            files[d + "related_cpus"] = " ".join(map(str, group)) + "\n"
            files[d + "affected_cpus"] = " ".join(map(str, group)) + "\n"
            files[d + "cpuinfo_max_freq"] = f"{khz}\n"
            files[d + "cpuinfo_min_freq"] = "300000\n"
            files[d + "scaling_cur_freq"] = f"{khz}\n"
            files[d + "scaling_governor"] = "schedutil\n"
    return files, cpus


def default_props(profile: str) -> dict[str, str]:
    props = {
        "ro.product.model": "Pixel 4" if profile in ("host", "snapdragon855") else profile,
        "ro.product.manufacturer": "Google",
        "ro.product.name": "flame",
        "ro.product.device": "flame",
        "ro.build.version.release": "12",
        "ro.build.version.sdk": "31",
        "ro.build.fingerprint": "google/flame/flame:12/SQ3A.220705.003/8671607:user/release-keys",
        "ro.soc.manufacturer": "Qualcomm",
        "ro.soc.model": "SM8150",
        "ro.board.platform": "msmnile",
        "ro.hardware": "flame",
        "ro.product.cpu.abi": host_abi(),  # the programs it runs are this machine's
        "ro.serialno": "EMULATED0001",
    }
    return props


def setup_phone(root: Path, profile: str = "host", *, max_cpus: int = 2, has_taskset: bool = True,
                data_kb: int = 64 * 1024 * 1024, sdk: int | None = None, thermal_status: int = 0) -> dict:
    """Creates (or refreshes) the sandbox of a phone; returns its state (also in <root>/.emu)."""
    root = Path(root)
    (root / "data" / "local" / "tmp").mkdir(parents=True, exist_ok=True)
    (root / "sdcard").mkdir(exist_ok=True)
    if profile == "host":
        files, _ = host_sysfs(max_cpus)
    else:
        dump = SYSFS_DIR / f"{profile}.txt"
        if not dump.is_file():
            raise SystemExit(f"adbd_emulator: no recorded sysfs dump {dump}")
        files = parse_dump(dump.read_text())
    sysroot = root / "sys"
    if sysroot.exists():
        shutil.rmtree(sysroot)
    for path, content in files.items():
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    bindir = root / "system" / "bin"
    if bindir.exists():
        shutil.rmtree(bindir)
    bindir.mkdir(parents=True)
    for tool in HOST_TOOLS + (("taskset",) if has_taskset else ()):
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    for tool in EMULATED_TOOLS:
        script = bindir / tool
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" tool {tool} "$@"\n')
        script.chmod(0o755)
    props = default_props(profile)
    if sdk is not None:
        props["ro.build.version.sdk"] = str(sdk)
        props["ro.build.version.release"] = {29: "10", 30: "11", 31: "12", 33: "13", 34: "14"}.get(sdk, str(sdk))
    state = {"profile": profile, "props": props, "data_kb": int(data_kb), "thermal_status": int(thermal_status),
             "fixed_performance_mode": False}
    (root / ".emu").mkdir(exist_ok=True)
    (root / ".emu" / "state.json").write_text(json.dumps(state, indent=1))
    return state


def load_state(root: Path) -> dict:
    return json.loads((Path(root) / ".emu" / "state.json").read_text())


def save_state(root: Path, state: dict) -> None:
    tmp = Path(root) / ".emu" / f"state.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, Path(root) / ".emu" / "state.json")


def data_used_kb(root: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(Path(root) / "data"):
        for n in names:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:
                pass
    return total // 1024 + 1


# ---------------------------------------------------------------- emulated Android tools
def tool_getprop(root: Path, args: list[str]) -> int:
    props = load_state(root)["props"]
    if args:
        print(props.get(args[0], args[1] if len(args) > 1 else ""))
    else:
        for k in sorted(props):
            print(f"[{k}]: [{props[k]}]")
    return 0


def tool_dumpsys(root: Path, args: list[str]) -> int:
    if not args or args[0] != "thermalservice":
        print(f"Can't find service: {args[0] if args else ''}")
        return 0
    st = load_state(root)
    status = st["thermal_status"]
    temp = 31.0 + 4 * status
    print("IsStatusOverride: false")
    print("ThermalEventListeners:\n\tcallbacks: 1\n\tkilled: false\n\tbroadcasts count: -1")
    print("ThermalStatusListeners:\n\tcallbacks: 1\n\tkilled: false\n\tbroadcasts count: -1")
    print(f"Thermal Status: {status}")
    print("Cached temperatures:")
    print(f"\tTemperature{{mValue={temp + 2:.1f}, mType=3, mName=skin-therm, mStatus={status}}}")
    print("HAL Ready: true")
    print("HAL connection:\n\tThermalHAL 2.0 connected: yes")
    print("Current temperatures from HAL:")
    for i, name in enumerate(("cpu0-silver-usr", "cpu4-gold-usr", "cpu7-gold-usr")):
        print(f"\tTemperature{{mValue={temp + 5 + i:.1f}, mType=0, mName={name}, mStatus={status}}}")
    print(f"\tTemperature{{mValue={temp + 2:.1f}, mType=3, mName=skin-therm, mStatus={status}}}")
    print(f"\tTemperature{{mValue={temp - 3:.1f}, mType=2, mName=battery, mStatus=0}}")
    return 0


def tool_cmd(root: Path, args: list[str]) -> int:
    if not args:
        print("cmd: No service specified; use -l to list all running services.", file=sys.stderr)
        return 20
    service, rest = args[0], args[1:]
    if service != "power":
        print(f"cmd: Can't find service: {service}", file=sys.stderr)
        return 20
    st = load_state(root)
    sdk = int(st["props"]["ro.build.version.sdk"])
    if rest[:1] == ["set-fixed-performance-mode-enabled"] and sdk >= 30:
        if len(rest) < 2 or rest[1] not in ("true", "false", "1", "0"):
            print("Error: expected true or false", file=sys.stderr)
            return 255
        st["fixed_performance_mode"] = rest[1] in ("true", "1")
        save_state(root, st)
        return 0
    print(f"Unknown command: {rest[0] if rest else ''}", file=sys.stderr)
    return 255


def tool_df(root: Path, args: list[str]) -> int:
    st = load_state(root)
    size = st["data_kb"]
    used = min(data_used_kb(root), size)
    paths = [a for a in args if not a.startswith("-")] or ["/data"]
    print("Filesystem        1K-blocks    Used Available Use% Mounted on")
    for _ in paths:
        pct = 100 * used // max(size, 1)
        print(f"/dev/block/dm-8 {size:>12} {used:>7} {size - used:>9} {pct:>3}% /data")
    return 0


TOOLS = {"getprop": tool_getprop, "dumpsys": tool_dumpsys, "cmd": tool_cmd, "df": tool_df}


# ================================================================ the wire protocol
def packet(cmd: int, arg0: int, arg1: int, data: bytes = b"") -> bytes:
    return struct.pack("<6I", cmd, arg0, arg1, len(data), sum(data) & 0xFFFFFFFF, cmd ^ 0xFFFFFFFF) + data


class Stream:
    """One adb stream: bytes from the server arrive in ``inbox``; ``write`` waits for the
    server's OKAY after every WRTE (the protocol's flow control)."""

    def __init__(self, conn: "Connection", local_id: int, remote_id: int):
        self.conn, self.local_id, self.remote_id = conn, local_id, remote_id
        self.inbox: queue.Queue[bytes | None] = queue.Queue()
        self.ready = threading.Event()
        self.ready.set()
        self.closed = threading.Event()
        self._buf = b""

    def write(self, data: bytes) -> bool:
        for i in range(0, len(data), self.conn.max_payload):
            chunk = data[i:i + self.conn.max_payload]
            while not self.ready.wait(0.2):
                if self.closed.is_set() or self.conn.dead.is_set():
                    return False
            if self.closed.is_set():
                return False
            self.ready.clear()
            self.conn.send(A_WRTE, self.local_id, self.remote_id, chunk)
        return True

    def read_exact(self, n: int) -> bytes | None:
        while len(self._buf) < n:
            item = self.inbox.get()
            if item is None:
                return None
            self._buf += item
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def close(self) -> None:
        if not self.closed.is_set():
            self.closed.set()
            self.conn.send(A_CLSE, self.local_id, self.remote_id)
            self.conn.streams.pop(self.local_id, None)


class Connection:
    """One transport (the adb server's TCP connection)."""

    def __init__(self, sock: socket.socket, phone: "Phone"):
        self.sock, self.phone = sock, phone
        self.lock = threading.Lock()
        self.streams: dict[int, Stream] = {}
        self.next_id = 1
        self.max_payload = MAX_PAYLOAD
        self.dead = threading.Event()

    def send(self, cmd: int, a0: int, a1: int, data: bytes = b"") -> None:
        try:
            with self.lock:
                self.sock.sendall(packet(cmd, a0, a1, data))
        except OSError:
            self.dead.set()

    def _recv_exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def serve(self) -> None:
        try:
            while True:
                head = self._recv_exact(24)
                if head is None:
                    break
                cmd, a0, a1, length, _, magic = struct.unpack("<6I", head)
                if magic != cmd ^ 0xFFFFFFFF:
                    break
                data = self._recv_exact(length) if length else b""
                if data is None:
                    break
                self.dispatch(cmd, a0, a1, data)
        finally:
            self.dead.set()
            for s in list(self.streams.values()):
                s.closed.set()
                s.inbox.put(None)
            try:
                self.sock.close()
            except OSError:
                pass

    def dispatch(self, cmd: int, a0: int, a1: int, data: bytes) -> None:
        if cmd == A_CNXN:
            self.max_payload = max(min(a1 or MAX_PAYLOAD, MAX_PAYLOAD), 4096)
            self.send(A_CNXN, A_VERSION, self.max_payload, self.phone.banner())
        elif cmd == A_OPEN:
            service = data.rstrip(b"\0").decode("utf-8", "replace")
            local = self.next_id
            self.next_id += 1
            stream = Stream(self, local, a0)
            self.streams[local] = stream
            handler = self.phone.service(service)
            if handler is None:  # unknown service: refuse the stream
                self.streams.pop(local, None)
                self.send(A_CLSE, 0, a0)
                return
            self.send(A_OKAY, local, a0)
            threading.Thread(target=self._run_service, args=(handler, stream), daemon=True).start()
        elif cmd == A_OKAY:
            s = self.streams.get(a1)
            if s:
                s.ready.set()
        elif cmd == A_WRTE:
            s = self.streams.get(a1)
            if s:
                s.inbox.put(data)
                self.send(A_OKAY, a1, a0)
            else:
                self.send(A_CLSE, 0, a0)
        elif cmd == A_CLSE:
            s = self.streams.pop(a1, None)
            if s:
                s.closed.set()
                s.inbox.put(None)

    @staticmethod
    def _run_service(handler, stream: Stream) -> None:
        try:
            handler(stream)
        finally:
            stream.close()


# ================================================================ services
class Phone:
    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self._root_s = str(self.root)
        self._path_re = re.compile(r"(?<![\w.~/-])/(?:%s)(?=/|\s|$|[;&|)'\"<>])" % "|".join(PHONE_DIRS))

    # -- paths
    def host_path(self, phone_path: str) -> Path:
        """The sandbox file a phone path names (everything lives under the sandbox)."""
        p = os.path.normpath("/" + phone_path.lstrip("/"))
        return self.root / p.lstrip("/")

    def map_command(self, command: str) -> str:
        return self._path_re.sub(lambda m: self._root_s + m.group(0), command)

    def unmap_output(self, data: bytes) -> bytes:
        root = self._root_s.encode()
        return re.sub(re.escape(root) + rb"(?=/)", b"", data).replace(root, b"/")

    def banner(self) -> bytes:
        props = load_state(self.root)["props"]
        return (f"device::ro.product.name={props['ro.product.name']};ro.product.model={props['ro.product.model']};"
                f"ro.product.device={props['ro.product.device']};features=cmd\0").encode()

    def service(self, name: str):
        if name.startswith("shell:"):
            return lambda s: self.shell(s, name[len("shell:"):])
        if name.startswith("sync:"):
            return self.sync
        return None

    # -- shell (v1)
    def shell(self, stream: Stream, command: str) -> None:
        if not command.strip():
            stream.write(b"adbd emulator: interactive shells are not offered\n")
            return
        env = {"PATH": str(self.root / "system" / "bin"), "ADBD_EMU_ROOT": self._root_s, "HOME": "/",
               "ANDROID_DATA": "/data", "TMPDIR": str(self.root / "data" / "local" / "tmp")}
        proc = subprocess.Popen(["/bin/sh", "-c", self.map_command(command)], cwd=self._root_s, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        stopper = threading.Thread(target=self._kill_on_close, args=(stream, proc), daemon=True)
        stopper.start()
        fd = proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            if not stream.write(self.unmap_output(chunk)):
                break
        proc.stdout.close()
        proc.wait()

    @staticmethod
    def _kill_on_close(stream: Stream, proc: subprocess.Popen) -> None:
        while proc.poll() is None:
            if stream.closed.wait(0.2) or stream.conn.dead.is_set():
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return

    # -- sync
    def sync(self, stream: Stream) -> None:
        while True:
            head = stream.read_exact(8)
            if head is None:
                return
            ident, n = head[:4], struct.unpack("<I", head[4:])[0]
            if ident == b"QUIT":
                return
            arg = stream.read_exact(n) if n else b""
            if arg is None:
                return
            path = arg.decode("utf-8", "replace")
            if ident == b"STAT":
                stream.write(b"STAT" + self._stat(path))
            elif ident == b"LIST":
                self._list(stream, path)
            elif ident == b"SEND":
                if not self._send(stream, path):
                    return
            elif ident == b"RECV":
                self._recv(stream, path)
            else:
                self._fail(stream, f"unknown sync command {ident!r}")
                return

    def _stat(self, path: str) -> bytes:
        try:
            st = os.stat(self.host_path(path))
        except OSError:
            return struct.pack("<III", 0, 0, 0)
        return struct.pack("<III", st.st_mode & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF, int(st.st_mtime))

    def _list(self, stream: Stream, path: str) -> None:
        d = self.host_path(path)
        names = sorted(os.listdir(d)) if d.is_dir() else []
        out = b""
        for name in [".", ".."] + names:
            try:
                st = os.stat(d / name)
            except OSError:
                continue
            raw = name.encode()
            out += b"DENT" + struct.pack("<IIII", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime), len(raw)) + raw
        stream.write(out + b"DONE" + struct.pack("<IIII", 0, 0, 0, 0))

    @staticmethod
    def _fail(stream: Stream, msg: str) -> None:
        raw = msg.encode()
        stream.write(b"FAIL" + struct.pack("<I", len(raw)) + raw)

    def _send(self, stream: Stream, spec: str) -> bool:
        path, _, mode = spec.rpartition(",")
        if not path:
            path, mode = spec, str(0o100644)
        target = self.host_path(path)
        state = load_state(self.root)
        free = (state["data_kb"] - data_used_kb(self.root)) * 1024
        written, error = 0, None
        tmp = target.with_name(f".{target.name}.adbd-tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            f = open(tmp, "wb")
        except OSError as e:
            f, error = None, f"couldn't create file: {e.strerror}"
        try:
            while True:
                head = stream.read_exact(8)
                if head is None:
                    return False
                ident, n = head[:4], struct.unpack("<I", head[4:])[0]
                if ident == b"DATA":
                    data = stream.read_exact(n)
                    if data is None:
                        return False
                    written += len(data)
                    if error is None and written > free:
                        error = "write failed: No space left on device"
                    if error is None:
                        f.write(data)
                elif ident == b"DONE":
                    break
                else:
                    error = error or f"unexpected sync message {ident!r} during SEND"
                    break
        finally:
            if f:
                f.close()
        if error is None:
            os.replace(tmp, target)
            try:
                os.chmod(target, int(mode) & 0o7777)
                os.utime(target, (n, n))  # DONE carries the mtime
            except (OSError, ValueError):
                pass
            stream.write(b"OKAY" + struct.pack("<I", 0))
        else:
            tmp.unlink(missing_ok=True)
            self._fail(stream, error)
        return True

    def _recv(self, stream: Stream, path: str) -> None:
        p = self.host_path(path)
        try:
            with open(p, "rb") as f:
                while True:
                    chunk = f.read(SYNC_DATA_MAX)
                    if not chunk:
                        break
                    if not stream.write(b"DATA" + struct.pack("<I", len(chunk)) + chunk):
                        return
        except OSError as e:
            self._fail(stream, f"open failed: {e.strerror}")
            return
        stream.write(b"DONE" + struct.pack("<I", 0))


def serve(root: Path, port: int, host: str = "127.0.0.1") -> None:
    phone = Phone(root)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, port))
    srv.listen(8)
    print(f"listening {host}:{srv.getsockname()[1]}", flush=True)
    while True:
        sock, _ = srv.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=Connection(sock, phone).serve, daemon=True).start()


# ================================================================ for tests
def free_port() -> int:
    """A loopback port the kernel picks (ephemeral range, well above adb's 5555-5585)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmulatorProcess:
    """The emulator in its own process, so a test can kill it mid-sweep and start it again on
    the same port (the serial ``127.0.0.1:<port>`` stays the same)."""

    def __init__(self, root: Path, *, port: int | None = None, profile: str = "host", **phone):
        self.root, self.profile, self.phone = Path(root), profile, phone
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        setup_phone(self.root, profile, **phone)

    @property
    def serial(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "EmulatorProcess":
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--root", str(self.root),
                                      "--port", str(self.port), "--no-setup"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening"):
            raise RuntimeError(f"adbd emulator did not start (port {self.port})")
        return self

    def kill(self) -> None:
        """SIGKILL: the phone vanishes as when its cable is pulled (the TCP connection drops)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def set_state(self, **changes) -> None:
        st = load_state(self.root)
        st.update(changes)
        save_state(self.root, st)

    def state(self) -> dict:
        return load_state(self.root)

    def __enter__(self) -> "EmulatorProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()


class AdbServer:
    """A private adb server (the real one: $PATH's adb, else the one adbutils bundles) on its own
    port, so tests never touch the user's server on 5037."""

    def __init__(self, port: int | None = None):
        import adbutils

        self.exe = adbutils.adb_path()
        self.port = port or free_port()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "AdbServer":
        subprocess.run([self.exe, "-P", str(self.port), "start-server"], capture_output=True, timeout=30, check=True)
        return self

    def stop(self) -> None:
        subprocess.run([self.exe, "-P", str(self.port), "kill-server"], capture_output=True, timeout=30)


def export_networks(data: Path, n: int) -> dict:
    """``n`` NAS-Bench-201 networks generated into the data folder ``data`` and exported to fp32
    .tflite by the real stages (one export worker); the export's counts. The phones of the adb
    tests and of benchmarks/bench_farm.py measure these."""
    from pipelines.config import compose, validate
    from pipelines.export import run_export
    from pipelines.generate import run_generate

    cfg = validate(compose(["generator=[nasbench201]", f"generator.nasbench201.n={n}", f"data_dir={data}",
                            "export.formats=[tflite_fp32]", "export.workers=1"]))
    run_generate(cfg, progress=False)
    return run_export(cfg, progress=False)


def exported_models(tmp_path_factory, n: int = 2) -> Path:
    """A data folder with ``n`` NAS-Bench-201 networks generated and exported to fp32 .tflite by
    the real stages, made once per pytest session (the adb and cross-build tests share it: the
    export's TensorFlow start-up is the slowest part of them)."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    data = base / f"adb-exported-{n}" / "data"
    with open(base / f".adb-exported-{n}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (data / ".done").is_file():
            counts = export_networks(data, n)
            if counts["ok"] != n:
                raise RuntimeError(f"export of the test networks failed: {counts}")
            (data / ".done").write_text("ok\n")
    return data


def model_files(data: Path) -> list[Path]:
    return sorted((data / "artifacts").glob("*/tflite_fp32.tflite"))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["tool"]:  # an emulated Android tool, called from <root>/system/bin
        root = Path(os.environ["ADBD_EMU_ROOT"])
        return TOOLS[argv[1]](root, argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="sandbox folder that plays the phone's file system")
    ap.add_argument("--port", type=int, required=True, help="loopback port (outside 5555-5585)")
    ap.add_argument("--profile", default="host", help="host, or a recorded dump in tests/data/sysfs/")
    ap.add_argument("--cpus", type=int, default=2, help="host profile: CPUs of the phone")
    ap.add_argument("--no-taskset", action="store_true", help="a phone without taskset")
    ap.add_argument("--data-kb", type=int, default=64 * 1024 * 1024, help="size of /data in KiB")
    ap.add_argument("--sdk", type=int, default=None, help="Android API level (30+: fixed performance mode)")
    ap.add_argument("--no-setup", action="store_true", help="serve an existing sandbox as it is")
    a = ap.parse_args(argv)
    if 5555 <= a.port <= 5585:
        ap.error("ports 5555-5585 are scanned by the adb server as Android emulators; pick another")
    if not a.no_setup:
        setup_phone(Path(a.root), a.profile, max_cpus=a.cpus, has_taskset=not a.no_taskset, data_kb=a.data_kb,
                    sdk=a.sdk)
    try:
        serve(Path(a.root), a.port)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
