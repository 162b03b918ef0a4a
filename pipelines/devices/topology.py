"""CPU topology of a device from its sysfs tree, and the core combinations a scenario can pin to.

:func:`read_clusters` groups the CPUs of ``<root>/sys/devices/system/cpu`` into clusters by the
CPUs that share a clock (cpufreq ``related_cpus``; without cpufreq, by ``cpu_capacity``, else one
cluster), ranks them by max frequency and names them as the USC paper names its clusters
(``large``, ``medium``, ..., ``small``; a VM's single cluster is ``large``). ``root`` lets tests
point at a recorded tree and the Android device layer at one pulled over adb.

:func:`core_combinations` follows the USC enumeration (``k`` cores of one cluster, and the
fastest core plus ``k`` cores of the next cluster), labelled with the USC data's tags
(``1large2med``); :func:`core_set` gives any other label a device can hold. Within a cluster the
lowest CPU ids are chosen, so a label always maps to the same CPUs and ``taskset`` mask.
docs/measure.md (*CPU clusters and core sets*) has the naming table and the enumeration.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

CPU_DIR = "sys/devices/system/cpu"


# ---------------------------------------------------------------- data types
@dataclass(frozen=True)
class Cluster:
    """CPUs sharing one clock domain. ``name`` is large/medium/small; ``tag`` its label word."""

    name: str
    tag: str
    cpus: tuple[int, ...]
    max_freq_khz: int | None = None
    capacity: int | None = None

    @property
    def size(self) -> int:
        return len(self.cpus)

    def to_dict(self) -> dict:
        return {"name": self.name, "tag": self.tag, "cpus": list(self.cpus),
                "max_freq_khz": self.max_freq_khz, "capacity": self.capacity}


@dataclass(frozen=True)
class CoreSet:
    """A set of CPUs to pin to: ``label`` like ``1large2med``, ``cpus`` sorted, ``mask`` hex."""

    label: str
    cpus: tuple[int, ...]
    mask: str = field(default="")
    counts: tuple[tuple[int, str], ...] = ()  # ((1, "large"), (2, "med"))

    def __post_init__(self):
        object.__setattr__(self, "cpus", tuple(sorted(self.cpus)))
        if not self.mask:
            object.__setattr__(self, "mask", cpu_mask(self.cpus))

    @property
    def n_cores(self) -> int:
        return len(self.cpus)

    @property
    def heterogeneous(self) -> bool:
        return len(self.counts) > 1

    def to_dict(self) -> dict:
        return {"label": self.label, "cpus": list(self.cpus), "mask": self.mask}


def cpu_mask(cpus: Iterable[int]) -> str:
    """``taskset`` hex mask: ``[7]`` -> ``0x80``, ``[0, 1]`` -> ``0x3``."""
    m = 0
    for c in cpus:
        m |= 1 << int(c)
    return hex(m)


# ---------------------------------------------------------------- reading sysfs
def parse_cpu_list(text: str) -> list[int]:
    """Kernel CPU list ``0-3,6`` (or space separated ``4 5 6``) -> ``[0, 1, 2, 3, 6]``."""
    out: list[int] = []
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return sorted(set(out))


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text) if text else None
    except ValueError:
        return None


def list_cpus(root: str | os.PathLike = "/") -> list[int]:
    """Online CPU ids under ``root`` (``online``, else ``present``, else the ``cpuN`` folders)."""
    base = Path(root) / CPU_DIR
    for name in ("online", "present"):
        text = _read(base / name)
        if text:
            try:
                return parse_cpu_list(text)
            except ValueError:
                pass
    if not base.is_dir():
        return []
    return sorted(int(p.name[3:]) for p in base.iterdir() if re.fullmatch(r"cpu\d+", p.name))


def cluster_names(n: int) -> list[tuple[str, str]]:
    """(name, tag) for ``n`` clusters ranked fastest first (see the module doc)."""
    if n <= 0:
        return []
    if n == 1:
        return [("large", "large")]
    middle = []
    for i in range(n - 2):
        suffix = "" if i == 0 else chr(ord("a") + i)
        middle.append(("medium" + suffix, "med" + suffix))
    return [("large", "large")] + middle + [("small", "small")]


def read_clusters(root: str | os.PathLike = "/") -> list[Cluster]:
    """Clusters of the device whose filesystem root is ``root``, fastest first."""
    base = Path(root) / CPU_DIR
    cpus = list_cpus(root)
    if not cpus:
        cpus = [0]  # nothing readable: describe one CPU rather than none
    online = set(cpus)
    groups: dict[tuple, dict] = {}
    for c in cpus:
        d = base / f"cpu{c}"
        freq = _read_int(d / "cpufreq" / "cpuinfo_max_freq")
        related_text = _read(d / "cpufreq" / "related_cpus") or _read(d / "cpufreq" / "affected_cpus")
        capacity = _read_int(d / "cpu_capacity")
        if related_text:
            try:
                related = tuple(x for x in parse_cpu_list(related_text) if x in online) or (c,)
            except ValueError:
                related = None
        else:
            related = None
        if related is not None:
            key: tuple = ("related", related)
        else:
            key = ("nofreq", freq, capacity)
        g = groups.setdefault(key, {"cpus": set(), "freq": freq, "capacity": capacity})
        g["cpus"].add(c)
        if freq is not None and (g["freq"] is None or freq > g["freq"]):
            g["freq"] = freq
    # a CPU listed in two related sets (should not happen) stays in the first
    seen: set[int] = set()
    merged = []
    for g in groups.values():
        cs = tuple(sorted(set(g["cpus"]) - seen))
        if cs:
            seen.update(cs)
            merged.append((cs, g["freq"], g["capacity"]))
    merged.sort(key=lambda t: (-(t[1] or 0), -(t[2] or 0), t[0][0]))
    names = cluster_names(len(merged))
    return [Cluster(name=n, tag=t, cpus=cs, max_freq_khz=f, capacity=cap)
            for (n, t), (cs, f, cap) in zip(names, merged)]


# ---------------------------------------------------------------- core sets
_LABEL = re.compile(r"(\d+)([a-z]+)")


def _make(clusters: Sequence[Cluster], counts: Sequence[tuple[int, str]]) -> CoreSet:
    by_tag = {c.tag: c for c in clusters}
    cpus: list[int] = []
    for k, tag in counts:
        cpus.extend(by_tag[tag].cpus[:k])
    label = "".join(f"{k}{tag}" for k, tag in counts)
    return CoreSet(label=label, cpus=tuple(cpus), counts=tuple(counts))


def parse_label(label: str) -> list[tuple[int, str]]:
    """``1large2med`` -> ``[(1, 'large'), (2, 'med')]`` (syntax only); ValueError otherwise."""
    parts = _LABEL.findall(str(label))
    if not parts or "".join(f"{n}{t}" for n, t in parts) != label or any(int(n) < 1 for n, _ in parts):
        raise ValueError(f"core set {label!r} is not <count><cluster>... (e.g. 2large, 1large2med)")
    out = [(int(n), t) for n, t in parts]
    if len({t for _, t in out}) != len(out):
        raise ValueError(f"core set {label!r} names a cluster twice")
    return out


def core_set(clusters: Sequence[Cluster], label: str) -> CoreSet:
    """The CoreSet a label means on these clusters (lowest CPU ids within each cluster).

    ValueError (one line) if the label is malformed, names a cluster the device does not have,
    or asks for more cores than a cluster has."""
    counts = parse_label(label)
    by_tag = {c.tag: c for c in clusters}
    for k, tag in counts:
        if tag not in by_tag:
            raise ValueError(f"core set {label!r}: no {tag!r} cluster on this device "
                             f"(clusters: {', '.join(c.tag for c in clusters)})")
        if k > by_tag[tag].size:
            raise ValueError(f"core set {label!r}: the {tag} cluster has {by_tag[tag].size} core(s)")
    order = {c.tag: i for i, c in enumerate(clusters)}
    counts = sorted(counts, key=lambda kt: order[kt[1]])  # canonical order: fastest cluster first
    return _make(clusters, counts)


def core_combinations(clusters: Sequence[Cluster], max_cores: int | None = None) -> list[CoreSet]:
    """USC-style core combinations (see the module doc): homogeneous sets, then the mixes."""
    out: list[CoreSet] = []
    for cl in clusters:
        for k in range(1, cl.size + 1):
            out.append(_make(clusters, [(k, cl.tag)]))
    if len(clusters) >= 2:
        top, nxt = clusters[0], clusters[1]
        for k in range(1, nxt.size + 1):
            out.append(_make(clusters, [(1, top.tag), (k, nxt.tag)]))
    if max_cores is not None:
        out = [cs for cs in out if cs.n_cores <= max_cores]
    return out
