"""``latbench farm join | status``: a host joins the farm, or the farm says what it holds.

``join`` finds the phones of this host's adb server, starts this host's Ray node with one
resource per phone and one for the host (``ray start``), and starts the host's agent on it.
``--head`` starts the cluster instead (the head may hold phones too). ``--dry-run`` prints the
phones and the ``ray start`` command without running it.

Authentication (docs/farm.md): a head makes its token file (or reads the one there) and starts
Ray with token authentication; a joining host, ``status`` and a driver read that file, and ask the
head whether it takes the token before Ray does. A head without authentication needs
``--insecure-no-auth``. The head's Ray runs without the Ray Client server (``ray start`` always
starts one: :func:`no_ray_client_server` takes it out) unless ``--ray-client-port`` asks for it,
with the dashboard's web server on loopback, and without usage reporting.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .auth import FarmAuth


def _ray_exe() -> str:
    beside = Path(sys.executable).with_name("ray")  # the venv's own ray, not another one on PATH
    return str(beside) if beside.is_file() else (shutil.which("ray") or "ray")


def ray_start_argv(args: argparse.Namespace, resources: dict[str, float]) -> list[str]:
    argv = [_ray_exe(), "start", "--resources", json.dumps(resources, sort_keys=True)]
    argv += ["--head", "--port", str(args.port)] if args.head else ["--address", args.address]
    if args.node_ip_address:
        argv += ["--node-ip-address", args.node_ip_address]
    if args.num_cpus is not None:
        argv += ["--num-cpus", str(args.num_cpus)]
    if args.head:  # the dashboard's web server (if this Ray has one) on loopback, no usage reports
        argv += ["--include-dashboard", "false", "--dashboard-host", "127.0.0.1", "--disable-usage-stats"]
        if args.ray_client_port is not None:
            argv += ["--ray-client-server-port", str(args.ray_client_port)]
    return argv


def ray_start_env(args: argparse.Namespace, auth: "FarmAuth") -> dict[str, str]:
    """What ``ray start`` gets beside this process's environment: the farm's authentication
    (:meth:`pipelines.farm.auth.FarmAuth.ray_env`) and, on a head without
    ``--ray-client-port``, :func:`no_ray_client_server` as Ray's start hook."""
    env = auth.ray_env()
    if args.head and args.ray_client_port is None:
        env["RAY_START_HOOK"] = f"{__name__}.{no_ray_client_server.__name__}"
    return env


def no_ray_client_server(ray_params, head: bool) -> None:
    """``RAY_START_HOOK`` of a farm head: no Ray Client server. ``ray start`` starts one on port
    10001 whenever grpcio is installed (ray/scripts/scripts.py, ``start``: ``has_ray_client and
    ray_client_server_port is None``) and refuses port 0 (ray/_private/parameter.py,
    ``_check_usage``); the hook, which Ray calls with the node's parameters before it starts
    them, clears the port, and the node starts no such server (ray/_private/node.py,
    ``start_head_processes``)."""
    ray_params.ray_client_server_port = None


def cmd_join(args: argparse.Namespace) -> None:
    from pipelines.config import ConfigError

    try:
        _join(args)
    except (ValueError, RuntimeError, OSError) as e:  # AdbFault is a RuntimeError: one line, no traceback
        raise ConfigError(" ".join(str(e).split())) from None


def _join(args: argparse.Namespace) -> None:
    from .auth import ensure_token, farm_auth, probe_head
    from .resources import discover_phones, host_resources, parse_names

    if bool(args.head) == bool(args.address):
        raise ValueError("farm join: give --address HEAD:PORT (join a farm) or --head (start one)")
    if args.ray_client_port is not None and not args.head:
        raise ValueError("farm join: --ray-client-port is for --head (the Ray Client server runs on the head)")
    auth = farm_auth(args.token_file, args.insecure_no_auth)
    address = args.address or f"{args.node_ip_address or '127.0.0.1'}:{args.port}"
    made = False
    if not args.dry_run:  # a dry run reads and writes nothing, and asks no head
        if args.head and not auth.insecure:
            made = ensure_token(auth.token_file)
        elif args.address:
            probe_head(address, auth)
    host_id = args.host_id or socket.gethostname()
    phones = discover_phones(host_id, args.adb_server, connect=args.connect, names=parse_names(args.name))
    resources = host_resources(host_id, phones)
    argv = ray_start_argv(args, resources)
    env = ray_start_env(args, auth)
    for p in phones:
        print(f"phone {p.serial}: {p.name} ({p.model or '?'}) -> resource {p.resource}")
    if auth.insecure:
        print("farm join: WARNING: no authentication (--insecure-no-auth): whoever reaches this node's ports "
              "runs code on every host of the farm; for isolated test networks only")
    print("ray start: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())) + " " + shlex.join(argv))
    if args.dry_run:
        return
    proc = subprocess.run(argv, capture_output=True, text=True, env={**auth.apply_env(dict(os.environ)), **env})
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"farm join: ray start failed with status {proc.returncode}: {last[0]}")
    import ray

    from .driver import FarmError, connect
    from .host import start_agent

    try:
        connect(address, auth)  # asks the head first: a head started without the asked authentication says so
    except FarmError as e:
        raise RuntimeError(f"{e} (this host's Ray node runs: `ray stop` stops it)") from None
    try:
        start_agent(host_id, args.adb_server, phones, list(args.connect))
    finally:
        ray.shutdown()
    print(f"host {host_id} joined the farm at {address} with {len(phones)} phones ({auth.describe()})")
    if args.head and not auth.insecure:
        print(f"token: {auth.token_file} ({'made now' if made else 'already there'}; mode 0600). Every other host "
              f"and every driver needs a copy (the token itself is never printed): copy the file over a channel you "
              f"trust, e.g. `scp -p {auth.token_file} HOST:.latbench/farm_token` (the default place), or put it "
              f"elsewhere and name it with --token-file or LATBENCH_FARM_TOKEN_FILE; then on each host: latbench "
              f"farm join --address {address}")


def cmd_status(args: argparse.Namespace) -> None:
    from pipelines.config import ConfigError

    from .driver import FarmError, connect, farm_hosts, status_lines
    from .auth import farm_auth

    try:
        connect(args.address, farm_auth(args.token_file, args.insecure_no_auth))
    except (FarmError, ValueError) as e:
        raise ConfigError(" ".join(str(e).split())) from None
    for line in status_lines(farm_hosts()):
        print(line)


def _add_auth_options(p: argparse.ArgumentParser, head: bool = False) -> None:
    made = " (`--head`: made there, mode 0600, unless it exists)" if head else ""
    p.add_argument("--token-file", default=None, metavar="PATH",
                   help=f"the farm's token file{made}: the same token on every host and driver "
                        "(default: $LATBENCH_FARM_TOKEN_FILE, else ~/.latbench/farm_token)")
    p.add_argument("--insecure-no-auth", action="store_true",
                   help="no authentication: " + ("start an open head, which anyone who reaches its ports can use"
                                                 if head else "the head was started with --insecure-no-auth")
                        + "; for isolated test networks only (default: $LATBENCH_FARM_INSECURE_NO_AUTH=1)")


def add_farm_parser(sub) -> None:
    f = sub.add_parser("farm", help="a device farm on Ray: hosts with phones join, `measure --farm` sweeps them",
                       description="See docs/farm.md.")
    fs = f.add_subparsers(dest="farm_cmd", required=True)
    j = fs.add_parser("join", help="this host joins the farm with the phones of its adb server",
                      description="Starts this host's Ray node with a resource per phone of its adb server, and "
                                  "its host agent. Every farm process authenticates with the farm's token file "
                                  "(docs/farm.md): --head makes it unless it exists (default "
                                  "~/.latbench/farm_token, mode 0600) and prints how to copy it to the other hosts "
                                  "and drivers; a joining host reads it and asks the head whether it takes it.")
    j.add_argument("--address", default=None, help="the farm's head, HOST:PORT (as printed by `farm join --head`)")
    j.add_argument("--head", action="store_true", help="start the farm's head on this host")
    j.add_argument("--port", type=int, default=6379, help="--head: the port of the cluster (default: %(default)s)")
    j.add_argument("--host-id", default=None, help="this host's id in the farm (default: its hostname)")
    j.add_argument("--adb-server", default="127.0.0.1:5037", help="this host's adb server (default: %(default)s)")
    j.add_argument("--connect", action="append", default=[], metavar="HOST:PORT",
                   help="a network phone to `adb connect` first (repeatable)")
    j.add_argument("--name", action="append", default=[], metavar="SERIAL=NAME",
                   help="a phone's device name (default: its ro.product.model, 'Pixel 4' -> pixel4)")
    j.add_argument("--node-ip-address", default=None,
                   help="the address other hosts reach this one at (Ray binds its ports to it only when it is a "
                        "loopback address: docs/farm.md)")
    j.add_argument("--num-cpus", type=int, default=None, help="CPUs Ray may use here (the farm needs none)")
    j.add_argument("--ray-client-port", type=int, default=None, metavar="PORT",
                   help="--head: also run Ray's Client server on PORT (default: none; the farm does not use it)")
    _add_auth_options(j, head=True)
    j.add_argument("--dry-run", action="store_true", help="print the phones and the ray start command only")
    j.set_defaults(func=cmd_join)
    s = fs.add_parser("status", help="the farm's hosts and phones (online or not)")
    s.add_argument("--address", required=True, help="the farm's head, HOST:PORT")
    _add_auth_options(s)
    s.set_defaults(func=cmd_status)
    # `latbench farm --help` shows what its actions take, not only their names
    f.epilog = "actions:\n" + "".join("  " + a.format_usage().removeprefix("usage: ") for a in (j, s))
    f.formatter_class = argparse.RawDescriptionHelpFormatter


def farm_measure(cfg, args: argparse.Namespace) -> dict:
    """``latbench measure --farm ADDRESS``: the stage's sweep on the farm's phones (the driver's
    token file from ``--farm-token-file``, else ``$LATBENCH_FARM_TOKEN_FILE``, else
    ``~/.latbench/farm_token``)."""
    import os

    from .auth import TOKEN_FILE_ENV
    from .driver import FarmError, run_farm_measure

    if getattr(args, "farm_token_file", None):
        os.environ[TOKEN_FILE_ENV] = str(args.farm_token_file)  # what every farm process of this driver reads

    try:
        r = run_farm_measure(cfg, args.framework, args.precision, args.cores, address=args.farm,
                             threads=args.threads, accelerator=args.accelerator, progress=not args.quiet,
                             serials=args.farm_serials, reassign=not args.farm_no_reassign)
    except FarmError as e:
        from pipelines.config import ConfigError

        raise ConfigError(str(e)) from None
    if r.get("farm"):
        f = r["farm"]
        print(f"farm: {len(f['phones'])} phones, {f['reassigned']} pairs reassigned, "
              f"{f['pairs_per_minute'] or 0:.1f} pairs/min, overhead {f['overhead_ms_per_process'] or 0:.1f} ms "
              f"per process (median), {f['overhead_ms_per_pair'] or 0:.1f} ms per pair")
    return r
