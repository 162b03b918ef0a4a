"""``latbench farm join | status``: a host joins the farm, or the farm says what it holds.

``join`` finds the phones of this host's adb server, starts this host's Ray node with one
resource per phone and one for the host (``ray start``), and starts the host's agent on it.
``--head`` starts the cluster instead (the head may hold phones too). ``--dry-run`` prints the
phones and the ``ray start`` command without running it.
"""
from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path


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
    return argv


def cmd_join(args: argparse.Namespace) -> None:
    from pipelines.config import ConfigError

    try:
        _join(args)
    except (ValueError, RuntimeError, OSError) as e:  # AdbFault is a RuntimeError: one line, no traceback
        raise ConfigError(" ".join(str(e).split())) from None


def _join(args: argparse.Namespace) -> None:
    from .resources import discover_phones, host_resources, parse_names

    if bool(args.head) == bool(args.address):
        raise ValueError("farm join: give --address HEAD:PORT (join a farm) or --head (start one)")
    host_id = args.host_id or socket.gethostname()
    phones = discover_phones(host_id, args.adb_server, connect=args.connect, names=parse_names(args.name))
    resources = host_resources(host_id, phones)
    argv = ray_start_argv(args, resources)
    for p in phones:
        print(f"phone {p.serial}: {p.name} ({p.model or '?'}) -> resource {p.resource}")
    print("ray start: " + " ".join(argv))
    if args.dry_run:
        return
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"farm join: ray start failed with status {proc.returncode}: {last[0]}")
    import ray

    from .host import start_agent

    address = args.address or f"{args.node_ip_address or '127.0.0.1'}:{args.port}"
    ray.init(address=address, log_to_driver=False, include_dashboard=False, logging_level="WARNING")
    try:
        start_agent(host_id, args.adb_server, phones, list(args.connect))
    finally:
        ray.shutdown()
    print(f"host {host_id} joined the farm at {address} with {len(phones)} phones")


def cmd_status(args: argparse.Namespace) -> None:
    from .driver import connect, farm_hosts, status_lines

    connect(args.address)
    for line in status_lines(farm_hosts()):
        print(line)


def add_farm_parser(sub) -> None:
    f = sub.add_parser("farm", help="a device farm on Ray: hosts with phones join, `measure --farm` sweeps them",
                       description="See docs/farm.md.")
    fs = f.add_subparsers(dest="farm_cmd", required=True)
    j = fs.add_parser("join", help="this host joins the farm with the phones of its adb server")
    j.add_argument("--address", default=None, help="the farm's head, HOST:PORT (as printed by `farm join --head`)")
    j.add_argument("--head", action="store_true", help="start the farm's head on this host")
    j.add_argument("--port", type=int, default=6379, help="--head: the port of the cluster (default: %(default)s)")
    j.add_argument("--host-id", default=None, help="this host's id in the farm (default: its hostname)")
    j.add_argument("--adb-server", default="127.0.0.1:5037", help="this host's adb server (default: %(default)s)")
    j.add_argument("--connect", action="append", default=[], metavar="HOST:PORT",
                   help="a network phone to `adb connect` first (repeatable)")
    j.add_argument("--name", action="append", default=[], metavar="SERIAL=NAME",
                   help="a phone's device name (default: its ro.product.model, 'Pixel 4' -> pixel4)")
    j.add_argument("--node-ip-address", default=None, help="the address other hosts reach this one at")
    j.add_argument("--num-cpus", type=int, default=None, help="CPUs Ray may use here (the farm needs none)")
    j.add_argument("--dry-run", action="store_true", help="print the phones and the ray start command only")
    j.set_defaults(func=cmd_join)
    s = fs.add_parser("status", help="the farm's hosts and phones (online or not)")
    s.add_argument("--address", required=True, help="the farm's head, HOST:PORT")
    s.set_defaults(func=cmd_status)
    # `latbench farm --help` shows what its actions take, not only their names
    f.epilog = "actions:\n" + "".join("  " + a.format_usage().removeprefix("usage: ") for a in (j, s))
    f.formatter_class = argparse.RawDescriptionHelpFormatter


def farm_measure(cfg, args: argparse.Namespace) -> dict:
    """``latbench measure --farm ADDRESS``: the stage's sweep on the farm's phones."""
    from .driver import FarmError, run_farm_measure

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
