"""An Android phone over adb: the same measurements as on the host, on a real device.

Config (the ``device`` section; see conf/device/pixel4.yaml)::

    name: pixel4                  # first part of every scenario id
    kind: adb
    serial: ???                   # the phone's serial from `adb devices` (never hard-coded)
    adb_server: 127.0.0.1:5037    # the adb server (a loopback one is started if not running)
    work_dir: /data/local/tmp/latbench

How a run goes (``run``): the runtime (``latbench-run`` built for the phone's ABI, see
:func:`find_runtime`) and its shared libraries are pushed to ``work_dir`` once per connection,
the model for every run; the binary runs under ``taskset <hex mask>`` of the scenario's core set
with the scenario's thread count (and ``--cpus``, so the runtime checks every thread's CPU set
as on the host); records and trace are pulled back to ``records_path`` / ``trace_path`` and the
phone's copies removed. The sweep's lock removes ``work_dir`` at the end.

Provenance: the ``meta`` record of every run gains a ``device`` object: serial, model,
manufacturer, Android release and SDK, SoC, ABI, build fingerprint, the governor and current
clock of the used cores before and after the run, the thermal status (``dumpsys
thermalservice``) before and after, and whether fixed performance mode is on (``cmd power
set-fixed-performance-mode-enabled true`` is issued before every run; Android 11+ accepts it,
older phones say no and the record says ``false``), and ``host``: the machine the phone is attached
to and driven from (this machine's hostname; a farm host's id in a farm sweep, docs/farm.md), so
local and farm records have one form. The measure stage keeps ``meta.device`` in every record
(``runtime.device``).

Faults: a connection that drops or is refused mid-run is retried ``retries`` times (reconnecting,
``adb connect`` for network serials, waiting ``retry_wait`` x attempt seconds in between); then
the run fails with kind ``device`` and every later run of the sweep fails at once the same way
(one quick reconnect attempt each), so the sweep records the rest as failed and moves on; a
rerun resumes. Clear one-line errors for an unknown serial (``device_missing``), a phone without
``taskset`` (``no_taskset``) and a full phone disk (``disk_full``).

The device catalog: :func:`add_phone` (``latbench devices add``) reads a phone as its device does
and writes the phone's entry into catalog.yaml.
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from foundation.atomic import atomic_path, write_text

from ..runners import phone_frameworks
from ..runners.litert import litert_version
from ..runners.records import EXIT_KINDS, NativeRun, NativeRunError, read_records
from .android import (RC_MARK, AdbFault, PhoneError, cpu_state_command, ensure_server, fault_types, one_line,
                      open_phone, parse_cpu_state, parse_df_available_kb, parse_getprop, parse_thermal, q, shell,
                      sysfs_dump_command, sysfs_tree, describe_phone, entry_from_phone)
from .base import check_run, register_device_kind, sweep_lock
from .topology import Cluster, CoreSet, core_combinations, read_clusters

if TYPE_CHECKING:
    from pipelines.scenarios import Scenario

ROOT = Path(__file__).resolve().parents[2]
# scripts/cross-build.sh writes one folder per target: latbench-run, libLiteRt.so, LITERT_VERSION
CROSS_BUILD_DIR = ROOT / "build"
CROSS_TARGETS = {"arm64-v8a": "native-android-arm64"}
PID_MARK = "LATBENCH_PID="
DISK_MARGIN_KB = 16 * 1024  # room for records and trace beyond the model
PROPS = {"model": "ro.product.model", "manufacturer": "ro.product.manufacturer",
         "android_release": "ro.build.version.release", "sdk": "ro.build.version.sdk",
         "soc": "ro.soc.model", "platform": "ro.board.platform", "abi": "ro.product.cpu.abi",
         "fingerprint": "ro.build.fingerprint"}


# ---------------------------------------------------------------- the runtime a phone runs
@dataclass(frozen=True)
class Runtime:
    """The files pushed to the phone: the binary and the shared libraries beside it."""

    binary: Path
    libraries: tuple[Path, ...]
    version: str | None
    origin: str


def _host_abi() -> str:
    return {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64-v8a"}.get(platform.machine().lower(), "")


def find_runtime(abi: str) -> Runtime:
    """The runtime for a phone of ABI ``abi`` (``getprop ro.product.cpu.abi``), first found of:

    1. ``$LATBENCH_ADB_RUNTIME_DIR``: a folder with ``latbench-run`` and its ``lib*.so``;
    2. ``build/native-android-arm64/`` (``x86_64``: ``build/native-android-x86_64/``), written by
       ``scripts/cross-build.sh --android`` (see docs/android.md);
    3. for a "phone" whose ABI is this machine's (the test suite's adbd emulator runs programs on
       this machine), the host build ``native/build/latbench-run`` with the wheel's libLiteRt.so.

    Raises NativeRunError (kind ``not_built``) naming what to build."""
    folders = []
    if os.environ.get("LATBENCH_ADB_RUNTIME_DIR"):
        folders.append((Path(os.environ["LATBENCH_ADB_RUNTIME_DIR"]), "LATBENCH_ADB_RUNTIME_DIR"))
    if abi in CROSS_TARGETS:
        folders.append((CROSS_BUILD_DIR / CROSS_TARGETS[abi], "scripts/cross-build.sh --android"))
    for folder, origin in folders:
        binary = folder / "latbench-run"
        if binary.is_file():
            libs = tuple(sorted(p for p in folder.glob("lib*.so") if p.is_file()))
            vfile = folder / "LITERT_VERSION"
            version = vfile.read_text().strip() if vfile.is_file() else None
            return Runtime(binary, libs, version, origin)
    if abi and abi == _host_abi():
        from importlib.util import find_spec

        from ..runners.litert import binary_path

        spec = find_spec("ai_edge_litert")
        lib = Path(spec.origin).parent / "libLiteRt.so" if spec and spec.origin else None
        if lib is not None and lib.is_file():
            return Runtime(binary_path(), (lib,), litert_version(), "native/build (this machine's ABI)")
    where = CROSS_BUILD_DIR / CROSS_TARGETS.get(abi, f"native-android-{abi}")
    raise NativeRunError(f"no latbench-run for ABI {abi or '?'}: build it with scripts/cross-build.sh --android "
                         f"(expected in {where}; docs/android.md)", kind="not_built")


# ---------------------------------------------------------------- the device
@register_device_kind("adb")
@dataclass
class AdbDevice:
    """A phone reached through an adb server (see the module doc); a :class:`pipelines.devices.Device`."""

    name: str
    serial: str
    adb_server: str = "127.0.0.1:5037"
    work_dir: str = "/data/local/tmp/latbench"
    gpu: str | None = None
    retries: int = 3  # attempts of a run whose connection fails
    retry_wait: float = 1.0  # seconds x attempt number between attempts
    timeout_slack: float = 5.0  # seconds the adb round trip may add to a run's timeout
    # the machine the phone hangs on (provenance); a farm host sets its own id
    host: str = field(default_factory=socket.gethostname)
    frameworks = phone_frameworks()  # the runtimes built for phones (pipelines/runners)

    _phone: Any = field(default=None, init=False, repr=False)
    _props: dict | None = field(default=None, init=False, repr=False)
    _clusters: list | None = field(default=None, init=False, repr=False)
    _pushed: Runtime | None = field(default=None, init=False, repr=False)
    _gone: str | None = field(default=None, init=False, repr=False)  # why the phone was given up

    @classmethod
    def from_config(cls, cfg) -> "AdbDevice":
        get = cfg.get if isinstance(cfg, dict) else (lambda k, d=None: getattr(cfg, k, d))
        name = get("name", None) or "phone"
        from omegaconf.errors import MissingMandatoryValue

        try:
            serial = get("serial", None)
        except MissingMandatoryValue:  # an OmegaConf node whose serial is still ???
            serial = None
        if not serial or str(serial) == "???":
            raise ValueError(f"device.serial: the adb device {name!r} needs the phone's serial "
                             f"(`adb devices` lists it; set device.serial=<serial>)")
        work_dir = str(get("work_dir", None) or "/data/local/tmp/latbench").rstrip("/")
        if not work_dir.startswith("/") or work_dir in ("", "/") or "'" in work_dir or " " in work_dir:
            raise ValueError(f"device.work_dir: expected an absolute folder on the phone such as "
                             f"/data/local/tmp/latbench, got {work_dir!r}")
        return cls(name=name, serial=str(serial), adb_server=str(get("adb_server", None) or "127.0.0.1:5037"),
                   work_dir=work_dir, gpu=get("gpu", None))

    @property
    def kind(self) -> str:
        return "adb"

    def _label(self) -> str:
        return f"device {self.name} (serial {self.serial})"

    # -- connection
    def _connect(self):
        if self._phone is None:
            client = ensure_server(self.adb_server)
            self._phone = open_phone(client, self.serial, server=self.adb_server)
        return self._phone

    def _drop(self) -> None:
        """Forget the connection (and what was pushed over it: the phone may have rebooted)."""
        self._phone = None
        self._pushed = None

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """PhoneError -> NativeRunError with its kind; other failures of adb itself -> AdbFault."""
        try:
            yield
        except PhoneError as e:
            raise NativeRunError(f"{self._label()}: {e}", kind=e.kind) from None
        except (AdbFault, NativeRunError):
            raise
        except fault_types() as e:
            raise AdbFault(one_line(e)) from None

    def _sh(self, command: str, timeout: float = 60.0) -> tuple[int, str]:
        with self._errors():
            return shell(self._connect(), command, timeout=timeout)

    def _with_retries(self, what: str, fn):
        """``fn()`` with the retry policy of the module doc; the last failure becomes kind device."""
        attempts = 1 if self._gone else max(self.retries, 1)
        last = None
        for attempt in range(1, attempts + 1):
            try:
                with self._errors():
                    out = fn()
                self._gone = None
                return out
            except AdbFault as e:
                last = str(e)
                self._drop()
                if attempt < attempts:
                    time.sleep(self.retry_wait * attempt)
        if self._gone:
            raise NativeRunError(f"{self._label()}: still unreachable ({last}); given up earlier: {self._gone}",
                                 kind="device")
        self._gone = f"{what} failed {attempts} times, last: {last}"
        raise NativeRunError(f"{self._label()}: lost the adb connection during {what} "
                             f"(gave up after {attempts} attempts): {last}", kind="device")

    # -- facts about the phone
    def props(self) -> dict[str, str]:
        if self._props is None:
            def read():
                rc, out = shell(self._connect(), "getprop", timeout=30)
                return parse_getprop(out)
            self._props = self._with_retries("getprop", read)
        return self._props

    def abi(self) -> str:
        return self.props().get("ro.product.cpu.abi", "")

    def clusters(self) -> list[Cluster]:
        """The phone's clusters from its sysfs (read over adb into a local tree, named by
        ``topology.read_clusters``: large/medium/small as in the USC paper)."""
        if self._clusters is None:
            dump = self._with_retries("reading sysfs", lambda: shell(self._connect(), sysfs_dump_command(),
                                                                      timeout=30)[1])
            with tempfile.TemporaryDirectory(prefix="latbench-sysfs-") as tmp:
                self._clusters = read_clusters(sysfs_tree(dump, tmp))
        return self._clusters

    def core_combinations(self, max_cores: int | None = None) -> list[CoreSet]:
        return core_combinations(self.clusters(), max_cores)

    def describe(self) -> dict:
        p = self.props()
        clusters = self.clusters()
        kernel = self._with_retries("uname", lambda: shell(self._connect(), "uname -r", timeout=30)[1].strip())
        return {
            "name": self.name, "kind": self.kind, "serial": self.serial, "host": self.host,
            "adb_server": self.adb_server, **{k: p.get(v) for k, v in PROPS.items()},
            "cpu_model": p.get("ro.soc.model") or p.get("ro.board.platform") or p.get("ro.hardware"),
            "cores": sum(c.size for c in clusters), "clusters": [c.to_dict() for c in clusters],
            "kernel": kernel or None, "gpu": self.gpu, "work_dir": self.work_dir,
            # the device catalog's entry for this phone name, or what the phone says of itself
            "description": describe_phone(self.name, p, clusters, gpu=self.gpu),
        }

    # -- a sweep
    @contextlib.contextmanager
    def lock(self, path: str | os.PathLike) -> Iterator[None]:
        """One sweep at a time: the lock file of the data folder and a lock per serial on this
        machine (two checkouts sharing a phone wait for each other too). The phone is checked
        (reachable, has taskset) before the sweep; ``work_dir`` is removed after it and fixed
        performance mode switched off again."""
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", self.serial)
        with sweep_lock(path, self.name), sweep_lock(Path(tempfile.gettempdir()) / f"latbench-adb-{safe}.lock",
                                                     self.name):
            self._with_retries("checking the phone", self._check_phone)
            try:
                yield
            finally:
                self.cleanup()

    def _check_phone(self) -> None:
        rc, out = shell(self._connect(), "which taskset || command -v taskset", timeout=30)
        if rc != 0 or not out.strip():
            raise PhoneError("the phone has no taskset, so core sets cannot be pinned (toybox's taskset "
                             "ships with Android 6 and later; `adb shell which taskset` finds none)",
                             kind="no_taskset")

    def cleanup(self) -> None:
        """Removes ``work_dir`` and switches fixed performance mode off (best effort: the phone
        may be gone)."""
        try:
            with self._errors():
                shell(self._connect(), f"rm -rf {q(self.work_dir)}; "
                                       f"cmd power set-fixed-performance-mode-enabled false >/dev/null 2>&1",
                      timeout=30)
        except (AdbFault, NativeRunError):
            pass
        self._pushed = None

    # -- one run
    def run(self, framework: str, artifact: str | os.PathLike, *, scenario: Scenario, mode: str = "e2e",
            warmup: int = 5, runs: int = 50, overhead_pairs: int = 0, records_path: str | os.PathLike,
            trace_path: str | os.PathLike | None = None, timeout: float | None = None,
            engine: str | None = None) -> NativeRun:
        """One fresh measuring process on the phone, pinned with taskset (see the module doc)."""
        artifact = check_run(self, framework, artifact)
        if not artifact.is_file():
            raise NativeRunError(f"{artifact}: model file missing", kind="model_missing", model=str(artifact))
        if not scenario.cpus:
            raise NativeRunError(f"{artifact}: {self._label()}: scenario {scenario.scenario_id} has no core set to "
                                 f"pin", kind="cpus", model=str(artifact))
        runtime = find_runtime(self.abi())
        job = _Job(self, runtime, artifact, scenario, mode, warmup, runs, overhead_pairs, Path(records_path),
                   Path(trace_path) if trace_path is not None else None, timeout)
        return self._with_retries(f"the run of {artifact.name}", job.attempt)


@dataclass
class _Job:
    """One measuring process on the phone (``attempt`` is retried by the device)."""

    dev: AdbDevice
    runtime: Runtime
    artifact: Path
    scenario: Any
    mode: str
    warmup: int
    runs: int
    overhead_pairs: int
    records_path: Path
    trace_path: Path | None
    timeout: float | None

    def _fail(self, msg: str, kind: str, rc: int | None = None) -> NativeRunError:
        return NativeRunError(f"{self.artifact}: {msg}", kind=kind, returncode=rc, model=str(self.artifact))

    def attempt(self) -> NativeRun:
        dev, work = self.dev, self.dev.work_dir
        phone = dev._connect()
        self._push_runtime(phone)
        remote_model = f"{work}/models/{self.artifact.parent.name}/{self.artifact.name}"
        self._check_space(phone, self.artifact.stat().st_size)
        self._push(phone, self.artifact, remote_model, 0o644)
        cpus = list(self.scenario.cpus)
        before = self._state(phone, cpus, fix_performance=True)
        rc, out = self._run_remote(phone, remote_model)
        after = self._state(phone, cpus, fix_performance=False)
        try:
            if rc != 0:
                raise self._error(rc, out)
            self.records_path.parent.mkdir(parents=True, exist_ok=True)
            self._pull(phone, f"{work}/run/records.jsonl", self.records_path)
            if self.trace_path is not None:
                self.trace_path.parent.mkdir(parents=True, exist_ok=True)
                self._pull(phone, f"{work}/run/trace.json", self.trace_path)
        finally:
            shell(phone, f"rm -rf {q(work + '/run')} {q(work + '/models')}", timeout=30)
        records = read_records(self.records_path)
        self._add_provenance(records, before, after)
        return NativeRun(records=records, records_path=self.records_path, trace_path=self.trace_path,
                         argv=self._argv(remote_model))

    # -- files
    def _push(self, phone, local: Path, remote: str, mode: int) -> None:
        from adbutils.errors import AdbError

        try:
            phone.sync.push(str(local), remote, mode=mode)
        except AdbError as e:
            # adbd answers FAIL (adbutils keeps only that word): a full disk, or no permission
            if e.args and e.args[0] == "FAIL":
                self._check_space(phone, local.stat().st_size)
                raise self._fail(f"{self.dev._label()}: cannot write {remote} (adb push refused; "
                                 f"is {self.dev.work_dir} writable?)", "device_setup") from None
            raise

    def _pull(self, phone, remote: str, local: Path) -> None:
        with atomic_path(local) as tmp:
            phone.sync.pull_file(remote, tmp)

    def _push_runtime(self, phone) -> None:
        """The binary and its libraries, once per connection (pushed again after a reconnect)."""
        if self.dev._pushed == self.runtime:
            return
        work = self.dev.work_dir
        rc, out = shell(phone, f"mkdir -p {q(work)}", timeout=30)
        if rc != 0:
            raise self._fail(f"{self.dev._label()}: cannot create {work}: {out.strip()[:200]}", "device_setup")
        self._check_space(phone, sum(p.stat().st_size for p in (self.runtime.binary, *self.runtime.libraries)))
        self._push(phone, self.runtime.binary, f"{work}/latbench-run", 0o755)
        for lib in self.runtime.libraries:
            self._push(phone, lib, f"{work}/{lib.name}", 0o644)
        self.dev._pushed = self.runtime

    def _check_space(self, phone, need_bytes: int) -> None:
        rc, out = shell(phone, f"df -k {q(self.dev.work_dir)} 2>/dev/null || df -k /data", timeout=30)
        avail = parse_df_available_kb(out)
        need_kb = need_bytes // 1024 + DISK_MARGIN_KB
        if avail is not None and avail < need_kb:
            raise self._fail(f"{self.dev._label()}: the phone's disk is full: {avail // 1024} MiB free at "
                             f"{self.dev.work_dir}, {need_kb // 1024} MiB needed (free space on the phone)",
                             "disk_full")

    # -- the process
    def _argv(self, remote_model: str) -> list[str]:
        s = self.scenario
        argv = ["./latbench-run", "--model", remote_model, "--records", "run/records.jsonl",
                "--cpus", ",".join(map(str, s.cpus)), "--threads", str(s.threads), "--mode", self.mode,
                "--warmup", str(self.warmup), "--runs", str(self.runs), "--accelerator", s.accelerator,
                "--precision", s.precision]
        if self.trace_path is not None:
            argv += ["--trace", "run/trace.json"]
        if self.overhead_pairs:
            argv += ["--overhead-pairs", str(self.overhead_pairs)]
        if self.runtime.version:
            argv += ["--runtime-version", self.runtime.version]
        return ["taskset", self.scenario.mask, *argv]

    def _run_remote(self, phone, remote_model: str) -> tuple[int, str]:
        """Runs the process and returns (exit status, output). The inner shell prints its pid
        first (``exec`` keeps it for taskset and then latbench-run), so a timeout kills exactly
        that process; output that ends without the exit marker means the connection dropped."""
        from adbutils.errors import AdbTimeout

        work = self.dev.work_dir
        inner = (f"echo {PID_MARK}$$; LD_LIBRARY_PATH={q(work)} exec "
                 + " ".join(q(a) for a in self._argv(remote_model)))
        command = f"cd {q(work)} && mkdir -p run && sh -c {q(inner)}; echo {RC_MARK}$?"
        buf = b""
        try:
            conn = phone.shell(command, stream=True)
            conn.conn.settimeout((self.timeout + self.dev.timeout_slack) if self.timeout else None)
            try:
                while True:
                    chunk = conn.read(65536)
                    if not chunk:
                        break
                    buf += chunk
            finally:
                conn.close()
        except AdbTimeout:
            m = re.search(rf"{PID_MARK}(\d+)".encode(), buf)
            if m:
                with contextlib.suppress(Exception):
                    shell(self.dev._connect(), f"kill -9 {int(m.group(1))}", timeout=30)
            raise self._fail(f"latbench-run timed out after {self.timeout} s on {self.dev._label()}",
                             "timeout") from None
        out = buf.decode("utf-8", "replace")
        pos = out.rfind(RC_MARK)
        if pos < 0:
            raise AdbFault("the connection dropped while latbench-run was running")
        rc = int(re.match(r"\d+", out[pos + len(RC_MARK):]).group(0))
        return rc, re.sub(rf"^{PID_MARK}\d+\s*$", "", out[:pos], flags=re.M)

    def _error(self, rc: int, out: str) -> NativeRunError:
        lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
        msg = lines[-1] if lines else ""
        msg = msg.removeprefix("latbench-run: error: ")
        if rc >= 128:
            return self._fail(f"latbench-run was killed by signal {rc - 128} on {self.dev._label()}"
                              + (f" ({msg})" if msg else ""), "crashed", rc)
        if rc == 127 or "taskset: not found" in out or "taskset: inaccessible" in out:
            return self._fail(f"{self.dev._label()}: taskset or latbench-run not found on the phone ({msg})",
                              "no_taskset" if "taskset" in msg else "device_setup", rc)
        if rc in EXIT_KINDS:
            return self._fail(msg or f"latbench-run exited with {rc}", EXIT_KINDS[rc], rc)
        if "taskset" in msg or "sched_setaffinity" in msg:
            return self._fail(f"taskset {self.scenario.mask} failed on {self.dev._label()}: {msg}", "cpus", rc)
        return self._fail(f"latbench-run failed with exit status {rc} on {self.dev._label()}"
                          + (f": {msg}" if msg else ""), "runtime", rc)

    # -- provenance
    def _state(self, phone, cpus: list[int], *, fix_performance: bool) -> dict:
        """Governors and clocks of the used cores and the thermal status; before a run also
        switches fixed performance mode on (Android has no getter: the reply tells whether it
        took)."""
        power = ("cmd power set-fixed-performance-mode-enabled true 2>&1; echo \"rc=$?\""
                 if fix_performance else "echo rc=-")
        cmd = (f"{cpu_state_command(cpus)}; echo '==> thermal <=='; dumpsys thermalservice 2>&1; "
               f"echo '==> power <=='; {power}")
        rc, out = shell(phone, cmd, timeout=60)
        head, _, rest = out.partition("==> thermal <==")
        thermal_text, _, power_text = rest.partition("==> power <==")
        gov, freq = parse_cpu_state(head)
        m = re.search(r"rc=(\d+)\s*$", power_text.strip())
        fixed = bool(m and m.group(1) == "0" and not re.search(r"unknown|error|exception", power_text, re.I))
        return {"governor": gov, "freq_khz": freq, "thermal": parse_thermal(thermal_text),
                "fixed_performance_mode": fixed}

    def _add_provenance(self, records: list[dict], before: dict, after: dict) -> None:
        """Adds the phone's state to the meta record and rewrites the local records file."""
        props = self.dev.props()
        device = {
            "name": self.dev.name, "kind": "adb", "serial": self.dev.serial, "host": self.dev.host,
            **{k: props.get(v) for k, v in PROPS.items()},
            "taskset_mask": self.scenario.mask, "work_dir": self.dev.work_dir, "runtime_origin": self.runtime.origin,
            "governor": before["governor"],
            "freq_khz_before": before["freq_khz"], "freq_khz_after": after["freq_khz"],
            "thermal_before": before["thermal"], "thermal_after": after["thermal"],
            "fixed_performance_mode": before["fixed_performance_mode"],
        }
        metas = [r for r in records if r.get("type") == "meta"]
        if not metas:
            raise self._fail("records without a meta record", "output")
        metas[0]["device"] = device
        write_text(self.records_path, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))


# ---------------------------------------------------------------- the phone in the device catalog
def phone_entry(device, name: str | None = None):
    """The catalog entry of an adb device (:class:`AdbDevice`) as the phone describes itself,
    read over adb as the device reads it for a sweep (``props()``, ``clusters()``)."""
    return entry_from_phone(name or device.name, device.props(), device.clusters(), gpu=device.gpu)


def add_phone(serial: str, name: str, *, adb_server: str = "127.0.0.1:5037", gpu: str | None = None,
              path=None, overwrite: bool = False):
    """Reads the phone ``serial`` over adb and writes its entry ``name`` into the device catalog
    (``path``; default the suite's catalog.yaml): ``catalog.add_device`` refuses to replace a
    different entry of that name unless ``overwrite``. Returns the entry written."""
    from .catalog import add_device

    dev = AdbDevice.from_config({"kind": "adb", "name": name, "serial": serial, "adb_server": adb_server, "gpu": gpu})
    entry = phone_entry(dev)
    add_device(entry, path, overwrite=overwrite)
    return entry
