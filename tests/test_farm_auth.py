"""The device farm authenticates (pipelines/farm/, docs/farm.md): a real head started by
``latbench farm join --head`` on loopback, in its own session, HOME and RAY_TMPDIR, with an adb
server of no phones (a farm host may have none).

Checked: the head makes its token file (mode 0600) and never prints the token; a process
without the token, or with another one, is refused by the head and its task never runs, while
with the token the same process runs it; the farm's commands and the driver name the token file
they lack or the head refuses, in one line, before Ray's retries; every process of the head runs
with token authentication and without usage reporting, listens on the node's address only, and
no Ray Client server runs; a head without authentication takes ``--insecure-no-auth``, and the
farm's commands refuse it unless told the same.

The head is stopped by ending the processes of its session (its id is the one this test's
``farm join`` started), never by ``ray stop``, which ends every Ray process of the machine.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pyproject.toml lists it: bash scripts/setup.sh)")
psutil = pytest.importorskip("psutil", reason="psutil (a dependency of ray) is not installed")

from adbd_emulator import AdbServer, free_port  # noqa: E402
from pipelines.farm.auth import (FarmAuth, ensure_token, farm_auth, probe_head, read_token,  # noqa: E402
                                 token_path)

ROOT = Path(__file__).resolve().parents[1]
HOST_ID = "authhead"
START_TIMEOUT_S = 180  # `farm join --head` on a loaded 2-CPU machine: ray start, then the host agent
STOP_GRACE_S = 2  # after SIGTERM (the GCS and the autoscaler's monitor do not end on it within 15 s: SIGKILL then)

# a separate Python process: joins the cluster at argv[1] and runs a task that writes argv[2]
INTRUDER = """
import sys
import ray
address, marker = sys.argv[1:]
try:
    ray.init(address=address, log_to_driver=False, include_dashboard=False)
except Exception as e:
    print("REFUSED", type(e).__name__, e)
    sys.exit(3)
@ray.remote(num_cpus=0)
def write(path):
    open(path, "w").write("ran")
    return True
print("RAN", ray.get(write.remote(marker), timeout=60))
"""


def clean_env(home: Path, ray_tmp: Path, **extra: str) -> dict[str, str]:
    """This process's environment without any Ray or farm authentication setting, with its own
    HOME (where ~/.latbench/farm_token and ~/.ray/auth_token would be) and RAY_TMPDIR."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RAY_AUTH", "LATBENCH_FARM_")) and k not in ("RAY_ADDRESS", "RAY_USAGE_STATS_ENABLED")}
    home.mkdir(parents=True, exist_ok=True)
    ray_tmp.mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), RAY_TMPDIR=str(ray_tmp), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
               PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT)]), **extra)
    return env


def latbench(args: list[str], env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)


def session_members(sid: int) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (OSError, psutil.Error):
            pass
    return found


def end_session(sid: int) -> None:
    """Ends the processes of session ``sid`` (SIGTERM, then SIGKILL after STOP_GRACE_S)."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        for p in session_members(sid):
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        deadline = time.monotonic() + wait
        while session_members(sid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not session_members(sid):
            return


class Head:
    """``latbench farm join --head`` in a session of its own, on loopback."""

    def __init__(self, base: Path, adb: AdbServer, *extra: str):
        self.home, self.port = base / "home", free_port()
        # Ray's socket paths under RAY_TMPDIR must stay within 107 bytes: not under pytest's deep folders
        self.ray_tmp = Path(tempfile.mkdtemp(prefix="latbench-ray-"))
        self.env = clean_env(self.home, self.ray_tmp)
        self.address = f"127.0.0.1:{self.port}"
        self.argv = ["farm", "join", "--head", "--port", str(self.port), "--node-ip-address", "127.0.0.1",
                     "--num-cpus", "1", "--host-id", HOST_ID, "--adb-server", adb.address, *extra]
        self.sid: int | None = None
        self.out = self.err = ""

    @property
    def token_file(self) -> Path:
        return self.home / ".latbench" / "farm_token"

    def start(self) -> "Head":
        proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", *self.argv], cwd=ROOT, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.sid = proc.pid
        try:
            self.out, self.err = proc.communicate(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            self.out, self.err = proc.communicate()
        assert proc.returncode == 0, f"farm join --head failed: {self.err.strip()[-2000:]}"
        return self

    def stop(self) -> None:
        if self.sid is not None:
            end_session(self.sid)
        shutil.rmtree(self.ray_tmp, ignore_errors=True)

    def processes(self) -> list[psutil.Process]:
        return session_members(self.sid)


@pytest.fixture(scope="module")
def adb():
    server = AdbServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def head(tmp_path_factory, adb):
    h = Head(tmp_path_factory.mktemp("head"), adb)  # no --token-file, no --insecure-no-auth: the default
    try:
        yield h.start()
    finally:
        h.stop()
        assert not h.processes(), "the head's processes outlived its teardown"


def intrude(head: Head, tmp_path: Path, **auth_env: str) -> tuple[subprocess.CompletedProcess, Path]:
    marker = tmp_path / "task-ran"
    # its own HOME (no token there); Ray retries a refused connection for 3 s instead of 20
    env = clean_env(tmp_path / "intruder-home", tmp_path / "intruder-ray", RAY_gcs_server_port_wait_time_s="3",
                    **auth_env)
    r = subprocess.run([sys.executable, "-c", INTRUDER, head.address, str(marker)], capture_output=True, text=True,
                       env=env, timeout=120)
    return r, marker


# ---------------------------------------------------------------- the token file
def test_token_file_is_made_private_and_reused_and_checked(tmp_path, monkeypatch):
    path = tmp_path / "dir" / "farm_token"
    assert ensure_token(path) is True
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    token = read_token(path)
    assert re.fullmatch(r"[0-9a-f]{64}", token)
    assert ensure_token(path) is False and read_token(path) == token  # an existing token is kept
    path.chmod(0o644)
    with pytest.raises(ValueError, match=rf"token file {re.escape(str(path))}: other users may read it .*chmod 600"):
        ensure_token(path)
    path.write_text("short\n")
    path.chmod(0o600)
    with pytest.raises(ValueError, match="expected one token"):
        read_token(path)
    with pytest.raises(ValueError, match=rf"token file {re.escape(str(tmp_path))}/none: not found"):
        read_token(tmp_path / "none")

    # the option, else the environment, else ~/.latbench/farm_token
    monkeypatch.delenv("LATBENCH_FARM_TOKEN_FILE", raising=False)
    monkeypatch.delenv("LATBENCH_FARM_INSECURE_NO_AUTH", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert token_path() == tmp_path / ".latbench" / "farm_token"
    monkeypatch.setenv("LATBENCH_FARM_TOKEN_FILE", str(tmp_path / "env_token"))
    assert farm_auth().token_file == tmp_path / "env_token"
    assert farm_auth(tmp_path / "opt_token").token_file == tmp_path / "opt_token"
    assert farm_auth(insecure=True).insecure
    monkeypatch.setenv("LATBENCH_FARM_INSECURE_NO_AUTH", "1")
    assert farm_auth().insecure and not farm_auth(tmp_path / "opt_token").insecure
    with pytest.raises(ValueError, match="give one of them"):
        farm_auth(tmp_path / "opt_token", insecure=True)
    auth = FarmAuth(path)
    env = auth.apply_env({"RAY_AUTH_TOKEN": "a token in the environment", "PATH": "/bin"})
    assert env == {"PATH": "/bin", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(path),
                   "RAY_USAGE_STATS_ENABLED": "0"}


def test_dry_run_shows_what_the_head_starts_with_and_writes_nothing(tmp_path):
    env = clean_env(tmp_path / "home", tmp_path / "ray")
    adb = AdbServer().start()  # a dry run lists the phones: an adb server of none
    try:
        r = latbench(["farm", "join", "--head", "--dry-run", "--host-id", "h", "--adb-server", adb.address], env)
        assert r.returncode == 0, r.stderr
        line = next(x for x in r.stdout.splitlines() if x.startswith("ray start:"))
        token = tmp_path / "home" / ".latbench" / "farm_token"
        for part in ("RAY_AUTH_MODE=token", f"RAY_AUTH_TOKEN_PATH={token}", "RAY_USAGE_STATS_ENABLED=0",
                     "RAY_START_HOOK=pipelines.farm.cli.no_ray_client_server", "--include-dashboard false",
                     "--dashboard-host 127.0.0.1", "--disable-usage-stats"):
            assert part in line
        assert not token.exists()  # a dry run writes nothing
        r = latbench(["farm", "join", "--head", "--dry-run", "--host-id", "h", "--adb-server", adb.address,
                      "--ray-client-port", "10001"], env)
        assert r.returncode == 0 and "--ray-client-server-port 10001" in r.stdout and "RAY_START_HOOK" not in r.stdout
        r = latbench(["farm", "join", "--head", "--dry-run", "--host-id", "h", "--adb-server", adb.address,
                      "--insecure-no-auth"], env)
        assert r.returncode == 0 and "RAY_AUTH_MODE=disabled" in r.stdout and "RAY_AUTH_TOKEN_PATH" not in r.stdout
        assert "WARNING: no authentication" in r.stdout
    finally:
        adb.stop()
    r = latbench(["farm", "join", "--address", "127.0.0.1:1", "--ray-client-port", "10001", "--dry-run"], env)
    assert r.returncode == 2 and "--ray-client-port is for --head" in r.stderr


# ---------------------------------------------------------------- a real head
def test_the_head_authenticates_with_a_token_file_it_made(head):
    assert stat.S_IMODE(head.token_file.stat().st_mode) == 0o600
    token = read_token(head.token_file)
    assert token not in head.out + head.err  # never printed
    assert f"token: {head.token_file} (made now; mode 0600)" in head.out and "scp -p" in head.out
    assert f"host {HOST_ID} joined the farm at {head.address} with 0 phones (token file {head.token_file})" in head.out
    probe_head(head.address, FarmAuth(head.token_file))  # takes its token...
    with pytest.raises(ValueError, match="the head requires a token"):
        probe_head(head.address, FarmAuth(None))  # ...and requires one


@pytest.mark.parametrize("who", ["no token", "another token"])
def test_a_process_without_the_token_is_refused_and_its_task_never_runs(head, tmp_path, who):
    auth_env = {}
    if who == "another token":
        other = tmp_path / "other_token"
        ensure_token(other)
        auth_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(other)}
    r, marker = intrude(head, tmp_path, **auth_env)
    assert r.returncode == 3 and "REFUSED" in r.stdout, r.stdout + r.stderr[-2000:]
    assert "Unauthenticated" in r.stderr  # refused for its token, not for a port closed
    assert not marker.exists()


def test_with_the_token_the_same_process_runs_its_task(head, tmp_path):
    r, marker = intrude(head, tmp_path, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(head.token_file))
    assert r.returncode == 0 and "RAN True" in r.stdout, r.stdout + r.stderr[-2000:]
    assert marker.read_text() == "ran"


def test_farm_commands_find_the_token_or_name_the_file(head, tmp_path):
    env = clean_env(tmp_path / "home", tmp_path / "ray")  # no token in this HOME
    r = latbench(["farm", "status", "--address", head.address, "--token-file", str(head.token_file)], env)
    assert r.returncode == 0 and f"host {HOST_ID}" in r.stdout, r.stderr
    r = latbench(["farm", "status", "--address", head.address],
                 {**env, "LATBENCH_FARM_TOKEN_FILE": str(head.token_file)})
    assert r.returncode == 0 and f"host {HOST_ID}" in r.stdout, r.stderr

    missing = tmp_path / "home" / ".latbench" / "farm_token"
    r = latbench(["farm", "status", "--address", head.address], env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"token file {missing}: not found" in r.stderr
    other = tmp_path / "other_token"
    ensure_token(other)
    r = latbench(["farm", "status", "--address", head.address, "--token-file", str(other)], env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"farm {head.address}: the head refuses the token in {other}" in r.stderr
    # a joining host asks the head before it starts its Ray node
    r = latbench(["farm", "join", "--address", head.address, "--token-file", str(other), "--host-id", "h2"], env)
    assert r.returncode == 2 and "refuses the token" in r.stderr and "ray start" not in r.stdout, r.stdout + r.stderr
    # the driver of `latbench measure --farm`
    r = latbench(["measure", "--framework", "tflite", "--precision", "fp32", "--cores", "1large", "--farm",
                  head.address], {**env, "LATBENCH_FARM_TOKEN_FILE": str(tmp_path / "nowhere")})
    assert r.returncode == 2 and f"token file {tmp_path / 'nowhere'}: not found" in r.stderr, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1


def test_the_head_runs_with_its_token_file_binds_loopback_and_has_no_client_server(head):
    procs = head.processes()
    names = [" ".join(p.cmdline()) for p in procs]
    assert any("gcs_server" in n for n in names) and any("raylet" in n for n in names)
    assert not [n for n in names if "ray.util.client.server" in n]  # no Ray Client server
    # token authentication in every process of the head, from the file, without usage reports (a
    # process that retitled itself, "ray::...", wrote over what /proc shows of its environment)
    untitled = [p for p in procs if not p.cmdline()[0].startswith("ray::")]
    assert {"gcs_server", "raylet"} <= {p.name() for p in untitled}
    for p in untitled:
        env = p.environ()
        assert (env.get("RAY_AUTH_MODE"), env.get("RAY_AUTH_TOKEN_PATH")) == ("token", str(head.token_file)), \
            p.cmdline()
        assert "RAY_AUTH_TOKEN" not in env and env.get("RAY_USAGE_STATS_ENABLED") == "0"
    listening = [c.laddr for p in procs for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert head.port in {a.port for a in listening}
    assert 10001 not in {a.port for a in listening}
    assert all(a.ip in ("127.0.0.1", "::ffff:127.0.0.1") for a in listening), listening  # the node's address


def test_an_open_head_takes_insecure_no_auth_and_the_farm_commands_say_so(tmp_path, adb):
    h = Head(tmp_path, adb, "--insecure-no-auth")
    env = clean_env(tmp_path / "driver-home", tmp_path / "driver-ray")
    r = latbench(h.argv + ["--token-file", str(tmp_path / "t")], h.env)
    assert r.returncode == 2 and "give one of them" in r.stderr
    try:
        h.start()
        assert "WARNING: no authentication" in h.out and "RAY_AUTH_MODE=disabled" in h.out
        assert not h.token_file.exists()
        probe_head(h.address, FarmAuth(None))
        ensure_token(tmp_path / "token")
        with pytest.raises(ValueError, match="the head does not authenticate"):
            probe_head(h.address, FarmAuth(tmp_path / "token"))
        r = latbench(["farm", "status", "--address", h.address, "--token-file", str(tmp_path / "token")], env)
        assert r.returncode == 2 and "--insecure-no-auth" in r.stderr and r.stderr.count("\n") == 1, r.stderr
        r = latbench(["farm", "status", "--address", h.address, "--insecure-no-auth"], env)
        assert r.returncode == 0 and f"host {HOST_ID}" in r.stdout, r.stderr
    finally:
        h.stop()
    assert not h.processes()
