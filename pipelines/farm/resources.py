"""What a farm host advertises to the Ray cluster, and how it finds its phones.

Every host of the farm joins the cluster with one custom resource for itself
(``latbench-host:<host id>``, capacity 1: one host agent per host) and one per phone attached to
its adb server (``latbench-phone:<serial>``, capacity 1). Holding a phone's resource is the
right to run on that phone: Ray places the phone's worker on the one node that has it, and a
second sweep asking for the same phone waits instead of interleaving with the first.

Phones are found through the host's adb server (``adb devices``: every serial in state
``device``); network phones (``adb connect HOST:PORT``) are connected first. A phone's device
name, the first part of its scenario ids, is given by the host's owner (``--name SERIAL=NAME``)
or else read from the phone (its ``ro.product.model`` in lower case without spaces: "Pixel 4" ->
``pixel4``, the name ``conf/device/pixel4.yaml`` uses).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Iterable, Mapping

HOST_PREFIX = "latbench-host:"
PHONE_PREFIX = "latbench-phone:"
NAMESPACE = "latbench-farm"  # the Ray namespace of the host agents (named, detached actors)


def host_resource(host_id: str) -> str:
    return HOST_PREFIX + host_id


def phone_resource(serial: str) -> str:
    return PHONE_PREFIX + serial


def agent_name(host_id: str) -> str:
    """The name of a host's agent actor (in :data:`NAMESPACE`)."""
    return f"host-agent:{host_id}"


def hosts_of(resources: Mapping[str, float]) -> list[str]:
    """The host ids a node's resources advertise."""
    return sorted(k[len(HOST_PREFIX):] for k in resources if k.startswith(HOST_PREFIX))


def check_host_id(host_id: str) -> str:
    if not host_id or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", host_id):
        raise ValueError(f"host id: expected letters, digits, '.', '_' or '-', got {host_id!r}")
    return host_id


@dataclass(frozen=True)
class PhoneInfo:
    """One phone as a host advertises it."""

    serial: str
    name: str  # device name: first part of the scenario ids measured on it
    model: str | None  # ro.product.model
    host: str  # the host id whose adb server reaches it
    adb_server: str

    @property
    def resource(self) -> str:
        return phone_resource(self.serial)

    def to_dict(self) -> dict:
        return {**asdict(self), "resource": self.resource}


def name_from_model(model: str | None, serial: str) -> str:
    """The device name read from a phone's ``ro.product.model`` ("Pixel 4" -> ``pixel4``)."""
    slug = re.sub(r"[^a-z0-9]+", "", (model or "").lower())
    if not slug:
        raise ValueError(f"phone {serial}: ro.product.model is empty; name it with --name {serial}=<name>")
    return slug


def parse_names(items: Iterable[str]) -> dict[str, str]:
    """``SERIAL=NAME`` items of the command line -> {serial: name}."""
    out = {}
    for item in items:
        serial, sep, name = item.rpartition("=")
        if not sep or not serial or not re.fullmatch(r"[a-z0-9][a-z0-9_]*", name):
            raise ValueError(f"--name {item!r}: expected SERIAL=NAME with a lower-case device name such as pixel4")
        out[serial] = name
    return out


def discover_phones(host_id: str, adb_server: str = "127.0.0.1:5037", *, connect: Iterable[str] = (),
                    names: Mapping[str, str] | None = None) -> list[PhoneInfo]:
    """The phones this host's adb server reaches, in serial order (``connect``: network
    serials to ``adb connect`` first). A phone that is offline or unauthorized is left out:
    it could not run a pair."""
    from pipelines.devices.android import AdbFault, ensure_server, fault_types, one_line

    names = dict(names or {})
    try:
        client = ensure_server(adb_server)
        for serial in connect:
            reply = client.connect(serial, timeout=5)
            if "connected" not in reply or "unable" in reply or "failed" in reply:
                raise AdbFault(f"adb connect {serial}: {reply.strip()}")
        found = []
        for info in sorted(client.list(), key=lambda i: i.serial):
            if info.state != "device":
                continue
            model = client.device(info.serial).getprop("ro.product.model") or None
            name = names.get(info.serial) or name_from_model(model, info.serial)
            found.append(PhoneInfo(info.serial, name, model, host_id, adb_server))
    except fault_types() as e:
        raise AdbFault(f"host {host_id}: adb server {adb_server}: {one_line(e)}") from None
    return found


def host_resources(host_id: str, phones: Iterable[PhoneInfo]) -> dict[str, float]:
    """The custom resources a host joins the cluster with."""
    res = {host_resource(check_host_id(host_id)): 1.0}
    for p in phones:
        res[p.resource] = 1.0
    return res
