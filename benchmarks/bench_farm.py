"""Benchmark of the device farm (pipelines/farm/): pairs per minute with 1, 2 and 4 phones, and
the farm's cost per pair against a local sweep of the same phone.

    python benchmarks/bench_farm.py [--models 8] [--runs 10] [--processes 2]

Everything runs on this machine: a Ray cluster on loopback (a head for the driver and two farm
hosts, Ray's cluster_utils; with token authentication, as a farm runs), each host with its own
adb server and two adbd emulators
(tests/adbd_emulator.py) as its phones; the networks are NAS-Bench-201 cells generated and
exported into a temporary folder. The emulated phones run latbench-run on this machine's CPUs,
so with more phones than CPUs they compete for them: the scaling printed is that of this
machine, not of a farm of real phones (whose processes run on their own CPUs).

Printed per sweep: pairs, wall time, pairs per minute; for the farm also the farm's own cost
per measuring process (round trip minus the time inside the adb run, measured by the driver:
median and mean, the mean counting the first process of a model on a phone, which brings the
model to its host), that cost summed per measured pair, and the wall time per pair against the
local sweep of the same pairs on one phone.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # keep the one-machine cluster on loopback


def prepare(data: Path, n: int) -> None:
    from adbd_emulator import export_networks

    counts = export_networks(data, n)
    if counts["ok"] != n:
        raise SystemExit(f"bench_farm: export failed: {counts}")


def failures(res: dict) -> str:
    """A sweep's failed pairs, said beside its figures (a failed pair is not in pairs/min)."""
    return f"; {res['failed']} FAILED (see {res['out']}/*.error.json)" if res["failed"] else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--runs", type=int, default=10, help="timed runs per pair (fixed stopping)")
    ap.add_argument("--processes", type=int, default=2, help="e2e processes per pair")
    a = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    from adbd_emulator import AdbServer, EmulatorProcess
    from pipelines.config import compose, validate
    from pipelines.devices import make_device
    from pipelines.farm.driver import run_farm_measure, use_auth
    from pipelines.farm.host import start_agent
    from pipelines.farm.auth import FarmAuth, ensure_token
    from pipelines.farm.resources import NAMESPACE, discover_phones, host_resources
    from pipelines.measure import run_measure

    tmp = Path(tempfile.mkdtemp(prefix="bench-farm-"))
    ensure_token(tmp / "farm_token")
    use_auth(FarmAuth(tmp / "farm_token"))  # before Ray starts: its nodes and workers inherit it
    data = tmp / "data"
    prepare(data, a.models)
    servers = {h: AdbServer().start() for h in ("hostA", "hostB")}
    emus = {f"{h}-{i}": EmulatorProcess(tmp / f"{h}-{i}").start() for h in servers for i in (1, 2)}
    cluster = None
    try:
        phones = {h: discover_phones(h, servers[h].address, connect=[e.serial for k, e in emus.items()
                                                                     if k.startswith(h)]) for h in servers}
        t0 = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1"})
        for h in servers:
            cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1", resources=host_resources(h, phones[h]))
        ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False, include_dashboard=False)
        for h in servers:
            start_agent(h, servers[h].address, phones[h], [p.serial for p in phones[h]])
        print(f"cluster of 3 nodes with 4 emulated phones up in {time.perf_counter() - t0:.1f} s "
              f"({len(os.sched_getaffinity(0))} CPUs on this machine)")

        def cfg(serial: str, server: str):
            return validate(compose([
                "generator=[nasbench201]", f"generator.nasbench201.n={a.models}", f"data_dir={data}",
                "export.formats=[tflite_fp32]", "device=pixel4", f"device.serial={serial}",
                f"device.adb_server={server}", f"measure.processes={a.processes}", "measure.warmup=2",
                "measure.stopping.policy=fixed", f"measure.stopping.runs={a.runs * a.processes}",
                "measure.granularities=[e2e]", "measure.timeout=120"]))

        first = emus["hostA-1"].serial
        dev = make_device({"kind": "adb", "name": "pixel4", "serial": first, "adb_server": servers["hostA"].address})
        t = time.perf_counter()
        local = run_measure(cfg(first, servers["hostA"].address), "tflite", "fp32", "1large", device=dev,
                            progress=False, out_root=tmp / "local" / "pixel4")
        local_s = time.perf_counter() - t
        per_pair_local = local_s / max(local["ok"], 1)
        print(f"local sweep, 1 phone : {local['ok']} pairs in {local_s:6.1f} s = {local['ok'] / local_s * 60:6.1f} "
              f"pairs/min ({per_pair_local * 1e3:.0f} ms per pair){failures(local)}")
        order = [emus[k].serial for k in ("hostA-1", "hostB-1", "hostA-2", "hostB-2")]
        for n in (1, 2, 4):
            t = time.perf_counter()
            res = run_farm_measure(cfg(first, servers["hostA"].address), "tflite", "fp32", "1large", address=None,
                                   progress=False, serials=order[:n], out_root=tmp / f"farm{n}" / "pixel4")
            wall = time.perf_counter() - t
            f = res["farm"]
            line = (f"farm sweep, {n} phone{'s' if n > 1 else ' '}: {res['ok']} pairs in {wall:6.1f} s = "
                    f"{res['ok'] / wall * 60:6.1f} pairs/min; farm cost per process {f['overhead_ms_per_process']:.1f} "
                    f"ms median, {f['overhead_ms_mean']:.1f} ms mean (of {f['processes']}); "
                    f"{f['overhead_ms_per_pair']:.1f} ms per pair (model transfer {f['model_fetch_ms_per_pair']:.1f} ms)"
                    f"{failures(res)}")
            if n == 1:
                line += (f"; wall per pair {wall / max(res['ok'], 1) * 1e3:.0f} ms vs {per_pair_local * 1e3:.0f} ms "
                         f"local (+{(wall / max(res['ok'], 1) - per_pair_local) * 1e3:.0f} ms, claim and release "
                         f"of the phone included)")
            print(line)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        for e in emus.values():
            e.kill()
        for s in servers.values():
            s.stop()


if __name__ == "__main__":
    main()
