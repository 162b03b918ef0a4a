"""The device layer: where a scenario runs. ``topology`` reads CPU clusters from a sysfs tree
and enumerates core combinations; ``host`` describes this machine; ``adb`` is an Android phone
over adb (``android`` holds its adb plumbing and parsers)."""
from .base import DEVICE_KINDS, Device, DeviceBusy, make_device, register_device_kind, sweep_lock
from .host import HostDevice, cpu_model, governors
from .adb import AdbDevice
from .topology import (
    Cluster,
    CoreSet,
    cluster_names,
    core_combinations,
    core_set,
    cpu_mask,
    list_cpus,
    parse_cpu_list,
    parse_label,
    read_clusters,
)

__all__ = [
    "DEVICE_KINDS", "Device", "DeviceBusy", "make_device", "register_device_kind", "sweep_lock",
    "AdbDevice", "Cluster", "CoreSet", "HostDevice", "cluster_names", "core_combinations", "core_set", "cpu_mask",
    "cpu_model", "governors", "list_cpus", "parse_cpu_list", "parse_label", "read_clusters",
]
