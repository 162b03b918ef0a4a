"""The farm's sweep driver: one scenario measured on every phone of one device name in the farm.

``run_farm_measure(cfg, framework, precision, cores, address=...)`` is ``run_measure`` with the
phones of a Ray cluster instead of one configured device (``latbench measure --farm ADDRESS``).
The device name is the config's (``device.name``: pixel4); every online phone of that name in
the farm takes part (``serials`` narrows them). The driver joins the cluster with the farm's
token (:func:`connect`; docs/farm.md). Then:

1. Claim: one :class:`pipelines.farm.host.PhoneWorker` per phone, placed by the phone's resource
   on its host. A phone whose resource stays taken for ``lock_wait`` seconds is swept by another
   driver: the sweep stops at once with :class:`pipelines.devices.DeviceBusy` (one line naming
   the phone), as a local sweep does on a locked device. A placed worker waits as long again
   for the phone's adb lock on its host, which the worker of a sweep whose driver or node just
   died keeps until its process has exited. The data folder's lock file is held as
   by a local sweep, so a local and a farm sweep of one device name never write together.
2. Plan: the pairs of the scenario not yet done (same record store, same protocol digest) are
   dealt round-robin to the phones; each phone runs a :class:`pipelines.measure.Sweep` over its
   share in a thread of the driver (one process at a time per phone, interleaved over its
   pairs as a local sweep), all writing into ``<data_dir>/measurements/<name>/<scenario_id>/``.
   The phones' sweeps share that folder's ``.work/``: none of them tidies it, the driver does
   once they have all stopped (one phone's sweep ending must not pull it from under another's).
3. Faults: a phone or host that vanishes has its pairs recorded as device failures. With
   ``reassign`` (default) the driver then deals those pairs to the phones still there, when they
   offer the same scenario (same core set on the same CPUs); otherwise the next run retries them.
   A killed driver leaves finished records and finished processes (``.work/``); the next run
   skips and reuses them, so no finished pair is measured twice.
4. Cost: per process, the round trip minus the time spent inside the adb run (the farm's own
   cost); per sweep, pairs per minute. Both go into the result and ``measure.log``.
5. Release: the driver returns once the cluster counts every phone it held free again, so a sweep
   started right after finds them free; a phone still taken after 30 s is named in a
   :class:`FarmWarning`.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import json
import os
import statistics
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import ray

from pipelines.devices import DeviceBusy, sweep_lock
from pipelines.measure import (Plan, StageScenario, Sweep, grid_dir_name, list_models, not_offered, read_json, resolve_plan,
                               scenario_status, stage_scenario, tidy_work, write_json)

from .host import PhoneWorker
from .phone import ArtifactCache, FarmPhone, one_line
from .auth import FarmAuth, farm_auth, probe_head
from .resources import NAMESPACE, agent_name, hosts_of


# seconds a worker may take to check its phone and read its description and clusters over adb
# (with the adb device's retries), beyond waiting for the phone's lock
BEGIN_TIMEOUT_S = 120.0
# seconds release waits for the cluster to count the phones' resources free again
FREE_WAIT_S = 30.0


class FarmError(ValueError):
    """The farm cannot run the sweep (no such phone, no cluster); one line."""


class FarmWarning(RuntimeWarning):
    """The sweep is done, but the farm is not as it should be after it (a phone still taken); one line."""


def connect(address: str | None, auth: FarmAuth | None = None) -> None:
    """Joins the Ray cluster at ``address`` as a driver (no-op when already connected), with
    ``auth`` (default: the token file the environment names, or the default one; see
    :func:`pipelines.farm.auth.farm_auth`). The head is asked first whether it takes the
    token: a missing or refused token is one line naming the file."""
    if ray.is_initialized():
        return
    if not address:
        raise FarmError("farm: no address of the farm's head (HOST:PORT, as `latbench farm join --head` prints it)")
    try:
        auth = auth or farm_auth()
        probe_head(address, auth)
    except ValueError as e:
        raise FarmError(one_line(e)) from None
    use_auth(auth)
    try:
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, include_dashboard=False,
                 logging_level="WARNING")
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise FarmError(f"farm {address}: cannot join the Ray cluster: {one_line(e)}") from None


def use_auth(auth: FarmAuth) -> None:
    """Sets ``auth``'s environment in this process (for Ray here and the processes it starts)
    and has Ray read it again: Ray keeps its configuration and token from when it first read
    them (ray/_private/authentication_test_utils.py ``reset_auth_token_state`` does the same)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    auth.apply_env(os.environ)
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def farm_hosts(timeout: float = 30.0) -> list[dict]:
    """Every live host of the farm: its agent's info and phones (``online`` now or not)."""
    found, seen = [], set()
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        for host in hosts_of(node.get("Resources", {})):
            if host in seen:  # a host that joined again while Ray still counts its dead node alive
                continue
            seen.add(host)
            try:
                agent = ray.get_actor(agent_name(host), namespace=NAMESPACE)
            except ValueError:
                found.append({"host": host, "node_id": node["NodeID"], "phones": [],
                              "problem": "its host agent is not running (latbench farm join again)"})
                continue
            found.append({"host": host, "node_id": node["NodeID"], "ref": agent.phones.remote()})
    for h in found:
        if "ref" in h:
            try:
                h["phones"] = ray.get(h.pop("ref"), timeout=timeout)
            except ray.exceptions.RayError as e:
                h["phones"], h["problem"] = [], f"its host agent does not answer: {one_line(e)}"
    return sorted(found, key=lambda h: h["host"])


def farm_phones(name: str | None = None, serials: Sequence[str] | None = None) -> list[dict]:
    """The online phones (of device ``name``, among ``serials``), in (host, serial) order."""
    phones = [p for h in farm_hosts() for p in h["phones"] if p["online"]]
    if name:
        phones = [p for p in phones if p["name"] == name]
    if serials:
        phones = [p for p in phones if p["serial"] in set(serials)]
    return sorted(phones, key=lambda p: (p["host"], p["serial"]))


def claim(phones: list[dict], artifacts: ArtifactCache, *, lock_wait: float = 10.0,
          adb: dict | None = None) -> list[FarmPhone]:
    """A worker per phone, each holding its phone (see the module doc); all or none."""
    workers = [PhoneWorker.options(resources={p["resource"]: 1.0}).remote(p, adb) for p in phones]
    # a worker is placed once its phone's resource is free: a resource held for lock_wait
    # seconds is another driver's sweep
    placed = [w.ready.remote() for w in workers]
    ready, _ = ray.wait(placed, num_returns=len(placed), timeout=lock_wait)
    begins = {i: workers[i].begin.remote(lock_wait) for i, ref in enumerate(placed) if ref in ready}
    out, problem = [], None
    replace_until = time.monotonic() + lock_wait
    for i, p in enumerate(phones):
        label = f"device {p['name']} (serial {p['serial']} on farm host {p['host']})"
        if i not in begins:
            problem = problem or DeviceBusy(f"{label}: a sweep is already running (its farm resource {p['resource']} "
                                            f"stayed taken for {lock_wait:g} s)")
            continue
        while True:
            try:
                begun = ray.get(begins[i], timeout=lock_wait + BEGIN_TIMEOUT_S)
            except (ray.exceptions.ActorDiedError, ray.exceptions.ActorUnavailableError) as e:
                # placed on a node that had died without Ray knowing yet (a host that left and
                # joined again advertises the phone twice for a while): place it again
                if time.monotonic() < replace_until:
                    with contextlib.suppress(Exception):
                        ray.kill(workers[i])
                    time.sleep(0.5)
                    workers[i] = PhoneWorker.options(resources={p["resource"]: 1.0}).remote(p, adb)
                    begins[i] = workers[i].begin.remote(lock_wait)
                    continue
                begun = {"error": f"its worker did not start: {one_line(e)}", "kind": "worker"}
            except ray.exceptions.RayError as e:
                begun = {"error": f"its worker did not start: {one_line(e)}", "kind": "worker"}
            break
        if "error" in begun:
            problem = problem or (DeviceBusy(begun["error"]) if begun["kind"] == "busy"
                                  else FarmError(f"{label}: {begun['error']}"))
            continue
        out.append(FarmPhone(p, workers[i], begun, artifacts))
    if problem is not None:
        release(out)
        for w in workers:
            with contextlib.suppress(Exception):
                ray.kill(w)
        # the placed workers held their phones: free them before saying so (a phone that was
        # never placed is another driver's, whose resource does not come back)
        wait_free([phones[i] for i in begins])
        raise problem
    return out


def release(phones: Sequence[FarmPhone], timeout: float = 30.0, free_wait: float = FREE_WAIT_S) -> None:
    """Gives the phones back (best effort: a phone's host may be gone) and returns once the
    cluster counts their resources free again (:func:`wait_free`)."""
    refs = [p.worker.end.remote() for p in phones if not p.gone]
    with contextlib.suppress(Exception):
        ray.wait(refs, num_returns=len(refs), timeout=timeout)
    for p in phones:
        with contextlib.suppress(Exception):
            ray.kill(p.worker)
    wait_free([p.info for p in phones], free_wait)


def wait_free(phones: Sequence[dict], timeout: float = FREE_WAIT_S) -> None:
    """Returns once every phone's resource is free in the cluster (available as much as it
    exists; a dead node's copy leaves both counts), else warns once, naming the phones still taken.

    Why: ``ray.kill`` returns at once, but a worker's phone resource is free only once its process
    has exited and its node has told the cluster (a fraction of a second, more on a busy
    host). A sweep started right after this one would find the phone taken and wait
    for it out of its ``lock_wait``, or stop as if another driver held it."""
    left = sorted({p["resource"]: p for p in phones}.values(), key=lambda p: p["resource"])
    deadline = time.monotonic() + timeout
    while left:
        free, total = ray.available_resources(), ray.cluster_resources()
        left = [p for p in left if free.get(p["resource"], 0.0) < total.get(p["resource"], 0.0)]
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    if left:  # the sweep's records stand; the next sweep of these phones may wait for them
        names = ", ".join(f"{p['serial']}@{p['host']}" for p in left)
        warnings.warn(f"farm: phone{'s' * (len(left) > 1)} {names} still taken {timeout:g} s after this driver "
                      f"let go (its worker has not exited, or another driver took it since)", FarmWarning,
                      stacklevel=2)


def deal(models: Sequence[tuple[str, str]], phones: Sequence[FarmPhone]) -> list[list[tuple[str, str]]]:
    """Round-robin shares of the pairs, one per phone."""
    shares: list[list[tuple[str, str]]] = [[] for _ in phones]
    for i, m in enumerate(models):
        shares[i % len(phones)].append(m)
    return shares


def _failed_on_device(out: Path, model_ids: Sequence[str], digest: str) -> list[str]:
    found = []
    for mid in model_ids:
        rec = read_json(out / f"{mid}.json")
        if rec is not None and rec.get("protocol", {}).get("digest") == digest:
            continue
        err = read_json(out / f"{mid}.error.json")
        if err is not None and err.get("kind") == "device" and err.get("protocol_digest") == digest:
            found.append(mid)
    return found


def run_farm_measure(cfg: Any, framework: str, precision: str, cores: str | None, *, address: str | None,
                     threads: int | None = None, accelerator: str = "cpu", models_dir: str | Path | None = None,
                     artifacts_dir: str | Path | None = None, out_root: str | Path | None = None,
                     progress: bool = True, serials: Sequence[str] | None = None, reassign: bool = True,
                     lock_wait: float = 10.0, adb: dict | None = None,
                     on_start: Callable[[list[FarmPhone]], None] | None = None) -> dict[str, Any]:
    """Measures the selected networks in one scenario on the farm's phones (module doc).

    Returns ``run_measure``'s result (``scenario_id``, ``status``, ``out``, ``ok``, ``failed``,
    ``skipped``, ``runs_made``) plus ``farm``: the phones, reassigned pairs, pairs per minute and
    the farm's own cost per process. ``on_start`` (tests) sees the claimed phones."""
    if accelerator != "cpu":
        raise FarmError(f"accelerator: the farm measures CPU scenarios only, got {accelerator!r}")
    connect(address)
    name = cfg.device.name
    phones_info = farm_phones(name, serials)
    if not phones_info:
        known = sorted({f"{p['name']} ({p['serial']} on {p['host']})" for h in farm_hosts() for p in h["phones"]})
        raise FarmError(f"farm {address}: no online phone named {name!r}"
                        + (f" among serials {', '.join(serials)}" if serials else "")
                        + f" (phones: {', '.join(known) or 'none'}; set device.name to one of them)")
    models_dir = Path(models_dir or Path(cfg.data_dir) / "models")
    artifacts_dir = Path(artifacts_dir or Path(cfg.data_dir) / "artifacts")
    out_root = Path(out_root or Path(cfg.data_dir) / "measurements" / name)
    say = print if progress else (lambda msg: None)
    t_start = time.perf_counter()
    with sweep_lock(out_root / ".lock", name):
        phones = claim(phones_info, ArtifactCache(), lock_wait=lock_wait, adb=adb)
        try:
            return _sweep(cfg, framework, precision, cores, threads, accelerator, phones, models_dir, artifacts_dir,
                          out_root, reassign, say, on_start, t_start)
        finally:
            release(phones)


def _sweep(cfg, framework, precision, cores, threads, accelerator, phones, models_dir, artifacts_dir, out_root,
           reassign, say, on_start, t_start) -> dict[str, Any]:
    scenarios = {p.serial: stage_scenario(p, framework, precision, cores, threads, accelerator) for p in phones}
    first: StageScenario = scenarios[phones[0].serial]
    if first.scenario is None:
        return not_offered(out_root / grid_dir_name(phones[0].name, framework, precision, cores, accelerator),
                           first.reason, phones[0].name, framework, precision, cores, accelerator)
    scenario = first.scenario
    out = out_root / scenario.scenario_id
    left_out = [p for p in phones if scenarios[p.serial].scenario != scenario]
    phones = [p for p in phones if scenarios[p.serial].scenario == scenario]
    models = list_models(cfg, models_dir, f"{framework}-{accelerator}")
    plan = resolve_plan(phones[0], scenario, cfg.measure, out, artifacts_dir, models, getattr(cfg, "release", None))
    probe = Sweep(plan, phones[0], progress=False)  # the driver's own log
    for p in left_out:
        probe.log(f"farm: {p.label()} left out: it does not offer {scenario.scenario_id} as "
                  f"{phones[0].label()} does ({scenarios[p.serial].reason or 'other CPUs'})")
    todo = [(pair.source, pair.model_id) for pair in plan.pairs]
    skipped = plan.skipped
    write_json(out / "SCENARIO.json", scenario_status(plan, phones[0], len(models), farm={
        "phones": [{"serial": p.serial, "host": p.host, "name": p.name} for p in phones]}))
    probe.log(f"farm: start: {len(todo)} pairs to measure, {skipped} already done, over {len(phones)} phones on "
              f"{len({p.host for p in phones})} hosts ({', '.join(p.serial + '@' + p.host for p in phones)})")
    if on_start:
        on_start(phones)
    counts = {"ok": 0, "runs_made": 0}
    reassigned, active, pending = 0, list(phones), todo
    while pending and active:
        shares = deal(pending, active)
        with cf.ThreadPoolExecutor(max_workers=len(active)) as pool:
            futures = [pool.submit(_phone_sweep, p, plan, share, say)
                       for p, share in zip(active, shares) if share]
            for f in futures:
                ok, runs = f.result()
                counts["ok"] += ok
                counts["runs_made"] += runs
        gone = [mid for p, share in zip(active, shares) if p.gone
                for mid in _failed_on_device(out, [m for _, m in share], plan.digest)]
        active = [p for p in active if not p.gone]
        if not (reassign and gone and active):
            break
        probe.log(f"farm: reassigning {len(gone)} pairs of vanished phones to "
                  f"{', '.join(p.serial + '@' + p.host for p in active)}")
        reassigned += len(gone)
        pending = [(s, m) for s, m in todo if m in set(gone)]
    tidy_work(out)  # every phone's sweep has stopped
    failed = [m for _, m in todo if not (out / f"{m}.json").is_file() and (out / f"{m}.error.json").is_file()]
    wall = time.perf_counter() - t_start
    overhead = [s for p in phones for s in p.overhead_s]
    farm = {"phones": [{"serial": p.serial, "host": p.host, "processes": p.processes,
                        **({"gone": p.gone} if p.gone else {})} for p in phones],
            "left_out": [p.serial for p in left_out], "reassigned": reassigned, "wall_s": wall,
            "pairs_per_minute": counts["ok"] / wall * 60 if wall > 0 else None,
            "overhead_ms_per_process": statistics.median(overhead) * 1e3 if overhead else None,
            # the median hides the first process of a model on a phone, which also brings the model
            # to the host: the mean and the total per measured pair count it
            "overhead_ms_mean": statistics.fmean(overhead) * 1e3 if overhead else None,
            "overhead_ms_per_pair": sum(overhead) * 1e3 / counts["ok"] if counts["ok"] else None,
            "model_fetch_ms_per_pair": (sum(s for p in phones for s in p.fetch_s) * 1e3 / counts["ok"]
                                        if counts["ok"] else None),
            "processes": len(overhead)}
    probe.log(f"farm: end: {counts['ok']} measured, {len(failed)} failed, {skipped} already done; "
              f"{farm['pairs_per_minute'] or 0:.1f} pairs/min, farm overhead "
              f"{farm['overhead_ms_per_process'] or 0:.1f} ms per process (median of {len(overhead)}; mean "
              f"{farm['overhead_ms_mean'] or 0:.1f} ms), {farm['overhead_ms_per_pair'] or 0:.1f} ms per pair")
    return {"scenario_id": scenario.scenario_id, "status": "measured", "out": out, "ok": counts["ok"],
            "failed": len(failed), "skipped": skipped, "runs_made": counts["runs_made"], "farm": farm}


def _phone_sweep(phone: FarmPhone, plan: Plan, share: list[tuple[str, str]], say) -> tuple[int, int]:
    """One phone's share of the plan, swept as a local sweep does (its own interleaving and
    failure records)."""
    sweep = Sweep(plan, phone, progress=False, log=lambda msg: say(f"farm {phone.serial}@{phone.host}: {msg}"))
    sweep.tidy_work = False  # other phones write into the same .work; the driver tidies it
    sweep.run([plan.pair(source, mid) for source, mid in share])
    return sweep.counts["ok"], sweep.runs_made


def status_lines(hosts: list[dict]) -> list[str]:
    """``latbench farm status``: one line per host and per phone."""
    lines = []
    for h in hosts:
        lines.append(f"host {h['host']} (node {h['node_id'][:12]})" + (f": {h['problem']}" if h.get("problem") else ""))
        for p in h["phones"]:
            state = "online" if p["online"] else "offline" + (f" ({p['offline_reason']})" if p.get("offline_reason")
                                                             else "")
            lines.append(f"  {p['name']:<12} {p['serial']:<24} {p.get('model') or '?':<16} {state}")
    return lines or ["no farm host has joined this cluster (latbench farm join --address ...)"]


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)
