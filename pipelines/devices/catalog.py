"""The device catalog: what the suite knows about each device, as data (``catalog.yaml``).

One YAML file describes every phone and device: maker and model, SoC, CPU clusters (core counts
and clocks), GPU, and what each public dataset calls it and says about it. The USC and HELP
importers describe their scenarios from it, the adb device kind describes a phone from it (else
from the phone's own sysfs), and a phone read over adb is added to it with :func:`add_device`.
The layout is documented at the top of ``catalog.yaml``.

- :func:`load_catalog` (``path=None``: the catalog beside this module) returns a
  :class:`Catalog`; a malformed file raises :class:`CatalogError` naming the file and the key
  (``catalog.yaml: devices.pixel4.clusters[1].cores: expected a whole number >= 1, got 'x'``).
- :func:`lookup` is the entry of one name (or None).
- :meth:`Catalog.resolve` maps a dataset's own device name to its entry (and, for names such as
  HELP's ``1080ti_32``, the batch size); :meth:`Catalog.source_names` lists that mapping as one
  table.
- :func:`add_device` writes an entry into a catalog file, keeping the rest of the file (its
  comments too) as it is; :func:`entry_from_fields` makes an entry from fields given by hand
  (``latbench devices add --no-adb``).

A user's own catalog (same layout, same checks) is merged over the suite's: :func:`device_catalog`
reads the file given, else ``$LATBENCH_CATALOG`` (:data:`USER_ENV`); its entries replace the
suite's entries of the same name and add the others, and a name or a scenario-id spelling that
two devices of the merged catalog would share is a CatalogError naming the user's file and key.
:func:`as_catalog` (``None``) is that merged catalog, so the importers and the adb device kind
describe a device from the user's entry without a change to the package.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import yaml

from foundation import limits
from foundation.atomic import write_text

CATALOG_PATH = Path(__file__).resolve().with_name("catalog.yaml")
USER_ENV = "LATBENCH_CATALOG"  # a user's catalog file, merged over the suite's (device_catalog)
ROOT = Path(__file__).resolve().parents[2]
VERSION = 1
DATASETS = ("usc", "help", "qaihub")  # the public datasets with a `sources` section
ACCELERATORS = ("cpu", "gpu", "asic", "fpga", "unknown")
OSES = ("android", "ios", "linux")
MAX_BATCH = limits.DEVICE_BATCH  # a {batch} past this (or of more than 6 digits) is no batch size
BATCH = "{batch}"

ENTRY_KEYS = ("model", "maker", "soc", "clusters", "gpu", "os", "note", "origin", "sources")
CLUSTER_KEYS = ("tag", "cores", "ghz", "cpus", "max_freq_khz")
SOURCE_KEYS = {"usc": ("names",), "help": ("names", "accelerator", "framework", "note", "graph_passes"),
               "qaihub": ("names", "chipset")}
_TAG = re.compile(r"[a-z]+")
_NAME_CHARS = re.compile(r"[a-z0-9]")


class CatalogError(ValueError):
    """A catalog file that cannot be used; the message names the file and the key."""


def display_path(path: str | os.PathLike) -> str:
    """A catalog path as messages show it: relative to the checkout when inside it."""
    p = Path(path).resolve()
    try:
        return p.relative_to(ROOT).as_posix()
    except ValueError:
        return str(p)


# ---------------------------------------------------------------- entries
@dataclass(frozen=True)
class CpuCluster:
    """CPUs sharing one clock: ``tag`` as in core-set labels (large, med, small), ``cores``, and
    the maximum clock in GHz; ``cpus`` and ``max_freq_khz`` when read from a phone's sysfs."""

    tag: str
    cores: int
    ghz: float | None = None
    cpus: tuple[int, ...] = ()
    max_freq_khz: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tag": self.tag, "cores": self.cores, "ghz": self.ghz}
        if self.cpus:
            out["cpus"] = list(self.cpus)
        if self.max_freq_khz is not None:
            out["max_freq_khz"] = self.max_freq_khz
        return out


@dataclass(frozen=True)
class SourceInfo:
    """What one public dataset calls a device (``names``; ``{batch}`` stands for a batch size) and
    says about it (HELP: accelerator, framework, note; Qualcomm AI Hub: its chipset id), and the
    graph passes its toolchain applied to the networks it timed (``generators.passes``; the
    scenarios' ``graph_passes``)."""

    names: tuple[str, ...] = ()
    accelerator: str | None = None
    framework: str | None = None
    note: str = ""
    graph_passes: tuple[str, ...] = ()
    chipset: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.names:
            out["names"] = list(self.names)
        for k in ("accelerator", "framework", "chipset"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.note:
            out["note"] = self.note
        if self.graph_passes:
            out["graph_passes"] = list(self.graph_passes)
        return out


@dataclass(frozen=True)
class CatalogEntry:
    """One device of the catalog (see ``catalog.yaml`` for the meaning of each field)."""

    name: str
    model: str
    maker: str | None = None
    soc: str | None = None
    clusters: tuple[CpuCluster, ...] = ()
    gpu: str | None = None
    os: str | None = None
    note: str = ""
    origin: str = ""
    sources: Mapping[str, SourceInfo] = field(default_factory=dict)

    @property
    def cpu(self) -> str | None:
        """``1x large 2.84 GHz + 3x med 2.42 GHz + 4x small 1.78 GHz`` (None without clusters)."""
        if not self.clusters:
            return None
        return " + ".join(f"{c.cores}x {c.tag}" + (f" {c.ghz:.2f} GHz" if c.ghz else "") for c in self.clusters)

    def source(self, dataset: str) -> SourceInfo | None:
        return self.sources.get(dataset)

    def names_in(self, dataset: str) -> tuple[str, ...]:
        """The names ``dataset`` uses for this device (its own name when the entry says none)."""
        s = self.sources.get(dataset)
        return s.names if s is not None and s.names else (self.name,)

    def to_dict(self) -> dict[str, Any]:
        """The entry as its YAML mapping (empty fields left out)."""
        out: dict[str, Any] = {"model": self.model}
        for k in ("maker", "soc"):
            if getattr(self, k):
                out[k] = getattr(self, k)
        if self.clusters:
            out["clusters"] = [c.to_dict() for c in self.clusters]
        for k in ("gpu", "os", "note", "origin"):
            if getattr(self, k):
                out[k] = getattr(self, k)
        if self.sources:
            out["sources"] = {d: s.to_dict() for d, s in self.sources.items()}
        return out

    def same_as(self, other: "CatalogEntry") -> bool:
        return self.to_dict() == other.to_dict() and self.name == other.name


# ---------------------------------------------------------------- parsing
class _Where:
    """The file and key path of a value, for error messages."""

    def __init__(self, file: str, key: str):
        self.file, self.key = file, key

    def __truediv__(self, sub: str | int) -> "_Where":
        return _Where(self.file, f"{self.key}[{sub}]" if isinstance(sub, int) else f"{self.key}.{sub}")

    def error(self, message: str) -> CatalogError:
        return CatalogError(f"{self.file}: {self.key}: {message}")


def _short(v: Any) -> str:
    return repr(v)[:60]


def _text(v: Any, at: _Where, *, required: bool = False) -> str | None:
    if v is None:
        if required:
            raise at.error("required (a text)")
        return None
    if not isinstance(v, str) or not v.strip():
        hint = " (quote it: YAML reads yes/no/on/off and numbers as other types)" if isinstance(v, (bool, int, float)) else ""
        raise at.error(f"expected a non-empty text, got {_short(v)}{hint}")
    return v.strip()


def _int(v: Any, at: _Where, low: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise at.error(f"expected a whole number >= {low}, got {_short(v)}")
    return v


def _keys(data: Any, allowed: tuple[str, ...], at: _Where) -> dict:
    if not isinstance(data, dict):
        raise at.error(f"expected a mapping ({', '.join(allowed)}), got {_short(data)}")
    for k in data:
        if k not in allowed:
            raise (at / str(k)).error(f"unknown key (known: {', '.join(allowed)})")
    return data


def _cluster(data: Any, at: _Where) -> CpuCluster:
    d = _keys(data, CLUSTER_KEYS, at)
    tag = _text(d.get("tag"), at / "tag", required=True)
    if not _TAG.fullmatch(tag):
        raise (at / "tag").error(f"expected lower-case letters (large, med, small ...), got {tag!r}")
    cores = _int(d.get("cores"), at / "cores", 1)
    ghz = d.get("ghz")
    if ghz is not None:
        if isinstance(ghz, bool) or not isinstance(ghz, (int, float)) or not math.isfinite(ghz) or not 0 < ghz < 100:
            raise (at / "ghz").error(f"expected a clock in GHz (a number > 0) or null, got {_short(ghz)}")
        ghz = float(ghz)
    cpus: tuple[int, ...] = ()
    if d.get("cpus") is not None:
        raw = d["cpus"]
        if not isinstance(raw, list):
            raise (at / "cpus").error(f"expected a list of CPU ids, got {_short(raw)}")
        cpus = tuple(_int(c, at / "cpus" / i, 0) for i, c in enumerate(raw))
        if len(cpus) != cores or len(set(cpus)) != len(cpus):
            raise (at / "cpus").error(f"expected {cores} distinct CPU id(s) (cores: {cores}), got {list(cpus)}")
    khz = d.get("max_freq_khz")
    if khz is not None:
        khz = _int(khz, at / "max_freq_khz", 1)
    return CpuCluster(tag, cores, ghz, cpus, khz)


def _source(dataset: str, data: Any, at: _Where) -> SourceInfo:
    d = _keys({} if data is None else data, SOURCE_KEYS[dataset], at)
    names: tuple[str, ...] = ()
    if d.get("names") is not None:
        raw = d["names"]
        if not isinstance(raw, list) or not raw:
            raise (at / "names").error(f"expected a non-empty list of names, got {_short(raw)}")
        names = tuple(_text(n, at / "names" / i, required=True) for i, n in enumerate(raw))
        for i, n in enumerate(names):
            rest = n.replace(BATCH, "")
            if "{" in rest or "}" in rest or n.count(BATCH) > 1 or not rest:
                raise (at / "names" / i).error(f"{n!r}: only one {BATCH} placeholder, beside some other text")
    acc = _text(d.get("accelerator"), at / "accelerator")
    if acc is not None and acc not in ACCELERATORS:
        raise (at / "accelerator").error(f"expected one of {', '.join(ACCELERATORS)}, got {acc!r}")
    fw = _text(d.get("framework"), at / "framework")
    note = _text(d.get("note"), at / "note") or ""
    passes: tuple[str, ...] = ()
    if d.get("graph_passes") is not None:
        from generators.passes import unknown_pass

        raw = d["graph_passes"]
        if not isinstance(raw, list):
            raise (at / "graph_passes").error(f"expected a list of graph pass names, got {_short(raw)}")
        passes = tuple(_text(n, at / "graph_passes" / i, required=True) for i, n in enumerate(raw))
        for i, n in enumerate(passes):
            if why := unknown_pass(n):
                raise (at / "graph_passes" / i).error(why)
    return SourceInfo(names, acc, fw, note, passes, _text(d.get("chipset"), at / "chipset"))


def parse_entry(name: Any, data: Any, file: str = "<catalog>") -> CatalogEntry:
    """One entry from its YAML mapping; CatalogError naming ``file`` and the key."""
    at = _Where(file, f"devices.{name}")
    if not isinstance(name, str):
        raise at.error(f"device names are text: quote {name!r} in the file")
    if not name.strip() or name != name.strip() or not _NAME_CHARS.search(name.lower()) or "/" in name:
        raise at.error("a device name needs letters or digits (it becomes part of scenario ids) and no '/'")
    d = _keys(data, ENTRY_KEYS, at)
    model = _text(d.get("model"), at / "model", required=True)
    clusters_raw = d.get("clusters") or []
    if not isinstance(clusters_raw, list):
        raise (at / "clusters").error(f"expected a list of {{tag, cores, ghz}}, got {_short(clusters_raw)}")
    clusters = tuple(_cluster(c, at / "clusters" / i) for i, c in enumerate(clusters_raw))
    tags = [c.tag for c in clusters]
    dup = next((t for t in tags if tags.count(t) > 1), None)
    if dup:
        raise (at / "clusters").error(f"cluster tag {dup!r} appears twice")
    os_ = _text(d.get("os"), at / "os")
    if os_ is not None and os_ not in OSES:
        raise (at / "os").error(f"expected one of {', '.join(OSES)}, got {os_!r}")
    sources_raw = d.get("sources") or {}
    sources = {}
    for ds, s in _keys(sources_raw, DATASETS, at / "sources").items():
        sources[ds] = _source(ds, s, at / "sources" / ds)
    return CatalogEntry(name=name, model=model, maker=_text(d.get("maker"), at / "maker"),
                        soc=_text(d.get("soc"), at / "soc"), clusters=clusters, gpu=_text(d.get("gpu"), at / "gpu"),
                        os=os_, note=_text(d.get("note"), at / "note") or "",
                        origin=_text(d.get("origin"), at / "origin") or "", sources=sources)


# ---------------------------------------------------------------- the catalog
@dataclass(frozen=True)
class SourceMatch:
    """A dataset's device name resolved: the entry, and the batch its name carries (else 1;
    ``batch_in_name``: whether the name carries it, through a ``{batch}`` name)."""

    entry: CatalogEntry
    batch: int = 1
    batch_in_name: bool = False


@dataclass(frozen=True)
class Catalog:
    """The entries of a catalog file (``path``), or of the suite's with a user's file (``user``)
    merged over it (:func:`merge_catalogs`); ``user_names`` are the entries the user's file gives."""

    path: Path
    entries: Mapping[str, CatalogEntry]
    user: Path | None = None
    user_names: frozenset[str] = frozenset()

    @property
    def where(self) -> str:
        """The file(s) of the catalog as messages show them (``a.yaml + b.yaml`` when merged)."""
        return display_path(self.path) + (f" + {display_path(self.user)}" if self.user is not None else "")

    def file_of(self, name: str) -> str:
        """The file the entry ``name`` comes from, as messages show it."""
        return display_path(self.user if self.user is not None and name in self.user_names else self.path)

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __getitem__(self, name: str) -> CatalogEntry:
        return self.entries[name]

    def __iter__(self) -> Iterator[CatalogEntry]:
        return iter(self.entries.values())

    def __len__(self) -> int:
        return len(self.entries)

    def names(self) -> list[str]:
        return list(self.entries)

    def lookup(self, name: str) -> CatalogEntry | None:
        return self.entries.get(name)

    def resolve(self, dataset: str, source_name: str) -> SourceMatch | None:
        """The entry ``dataset`` means by ``source_name``: an entry listing the name under
        ``sources.<dataset>.names`` (``{batch}`` matches a batch size 1..65536), else the entry of
        that name when it lists no names for the dataset; None when there is none.

        Raises ValueError when the name has the form of a ``{batch}`` name but its batch is no
        batch size (``titanxp_0``, ``titanxp_99999999``)."""
        pattern_hit = None
        for e in self.entries.values():
            s = e.sources.get(dataset)
            if s is None or not s.names:
                continue
            for n in s.names:
                if BATCH not in n:
                    if n == source_name:
                        return SourceMatch(e)
                    continue
                head, tail = n.split(BATCH)
                m = re.fullmatch(re.escape(head) + r"(\d+)" + re.escape(tail), source_name)
                if m:
                    digits = m.group(1)
                    if len(digits) <= 6 and 1 <= int(digits) <= MAX_BATCH:
                        return SourceMatch(e, int(digits), batch_in_name=True)
                    pattern_hit = (e, n, digits)
        if pattern_hit is not None:
            e, n, digits = pattern_hit
            raise ValueError(f"{digits[:20]}{'...' if len(digits) > 20 else ''} is not a batch size "
                             f"(1..{MAX_BATCH}) for {n!r} ({e.name})")
        e = self.entries.get(source_name)
        if e is not None and (e.sources.get(dataset) is None or not e.sources[dataset].names):
            return SourceMatch(e)
        return None

    def knows(self, name: str) -> bool:
        """Whether ``name`` is an entry's name, its scenario-id spelling, or a source name of one."""
        from_slug = _slug(name)
        if name in self.entries or any(_slug(e.name) == from_slug for e in self.entries.values()):
            return True
        for ds in DATASETS:
            try:
                if self.resolve(ds, name) is not None:
                    return True
            except ValueError:
                return True
        return False

    def source_names(self) -> list[tuple[str, str, str]]:
        """The mapping from the datasets' device names to catalog names, one row each:
        ``(dataset, source name, catalog name)``, e.g. ``("help", "1080ti_{batch}", "1080ti")``."""
        return [(ds, n, e.name) for e in self.entries.values() for ds in e.sources for n in e.names_in(ds)]

    def with_entry(self, entry: CatalogEntry) -> "Catalog":
        entries = dict(self.entries)
        entries[entry.name] = entry
        return dataclasses.replace(self, entries=entries)


_SLUG = re.compile(r"[^a-z0-9]+")


def _slug(text: str) -> str:
    """As ``pipelines.scenarios.slug``: the spelling of a name inside scenario ids."""
    return _SLUG.sub("", str(text).lower())


def matches_filter(item: str, source_name: str, entry: CatalogEntry | None) -> bool:
    """Whether a config filter item (``devices: [...]``) selects a dataset's device: by the
    source's name (``1080ti_1``), the catalog's name (``1080ti``: every batch) or the catalog
    name as scenario ids spell it (``gold6226`` for ``gold_6226``)."""
    if item == source_name:
        return True
    if entry is None:
        return _slug(item) == _slug(source_name) and bool(_slug(item))
    return item == entry.name or _slug(item) == _slug(entry.name)


def parse_catalog(data: Any, file: str, path: Path) -> Catalog:
    at = _Where(file, "(top level)")
    if data is None:
        data = {}
    d = _keys(data, ("version", "devices"), at)
    version = d.get("version", VERSION)
    if version != VERSION:
        raise _Where(file, "version").error(f"this code reads catalog version {VERSION}, got {_short(version)}")
    devices = d.get("devices") or {}
    if not isinstance(devices, dict):
        raise _Where(file, "devices").error(f"expected a mapping of device name -> entry, got {_short(devices)}")
    entries: dict[str, CatalogEntry] = {}
    for name, body in devices.items():
        e = parse_entry(name, body, file)
        entries[e.name] = e
    _check_together(entries.values(), lambda name: file)
    return Catalog(path, entries)


def _check_together(entries: Iterable[CatalogEntry], file_of: Callable[[str], str]) -> None:
    """The checks across entries: a dataset's name means one device only, and no two devices
    share a scenario-id spelling. The later entry of a clash is the one reported (in its file)."""
    entries = list(entries)
    claimed: dict[tuple[str, str], str] = {}
    for e in entries:
        for ds, s in e.sources.items():
            for n in s.names:
                other = claimed.setdefault((ds, n), e.name)
                if other != e.name:
                    raise _Where(file_of(e.name), f"devices.{e.name}.sources.{ds}.names").error(
                        f"{n!r} already names device {other!r}{_elsewhere(other, e.name, file_of)} in {ds}")
    slugs: dict[str, str] = {}
    for e in entries:
        other = slugs.setdefault(_slug(e.name), e.name)
        if other != e.name:
            raise _Where(file_of(e.name), f"devices.{e.name}").error(
                f"spelled {_slug(e.name)!r} in scenario ids, as device {other!r}{_elsewhere(other, e.name, file_of)} "
                "is: rename one")


def _elsewhere(other: str, name: str, file_of: Callable[[str], str]) -> str:
    """`` (in <file>)`` when entry ``other`` is in another file than entry ``name``."""
    return f" (in {file_of(other)})" if file_of(other) != file_of(name) else ""


def merge_catalogs(base: Catalog, user: Catalog) -> Catalog:
    """``base`` with ``user``'s entries merged over it: an entry of ``user`` replaces ``base``'s of
    the same name, the others are added. CatalogError (the user's file and key) when a name of a
    dataset, or a scenario-id spelling, would mean two devices of the result."""
    names = frozenset(user.entries)
    entries = {**base.entries, **user.entries}
    merged = Catalog(base.path, entries, user.path, names)
    _check_together([e for n, e in entries.items() if n not in names] + list(user.entries.values()), merged.file_of)
    return merged


_CACHE: dict[Path, tuple[tuple[int, int], Catalog]] = {}


def load_catalog(path: str | os.PathLike | None = None) -> Catalog:
    """The catalog at ``path`` (default: ``catalog.yaml`` beside this module), checked; cached
    while the file is unchanged. CatalogError (file and key) when it is malformed or missing."""
    p = Path(path) if path is not None else CATALOG_PATH
    file = display_path(p)
    try:
        st = p.stat()
    except OSError as e:
        raise CatalogError(f"{file}: device catalog not readable ({e.strerror or e})") from None
    if st.st_size > limits.TEXT_FILE_BYTES:
        raise CatalogError(f"{file}: device catalog of {st.st_size} bytes, above limits.TEXT_FILE_BYTES "
                           f"({limits.TEXT_FILE_BYTES})")
    stamp = (st.st_mtime_ns, st.st_size)
    key = p.resolve()
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CatalogError(f"{file}: device catalog not readable ({e})") from None
    from foundation.safeload import LoadError, load_yaml_text

    try:  # the bounded loader: a user's catalog is input like any other file (depth, nodes, aliases)
        data = load_yaml_text(text, str(file))
    except LoadError as e:
        raise CatalogError(str(e)) from None
    cat = parse_catalog(data, file, p)
    _CACHE[key] = (stamp, cat)
    return cat


def user_catalog_path(path: str | os.PathLike | None = None) -> Path | None:
    """The user's catalog file: ``path`` when given, else ``$LATBENCH_CATALOG`` when set, else None."""
    if path is not None and str(path).strip():
        return Path(path)
    env = os.environ.get(USER_ENV, "").strip()
    return Path(env) if env else None


def device_catalog(user: str | os.PathLike | None = None) -> Catalog:
    """The suite's catalog with the user's catalog file (``user``, else ``$LATBENCH_CATALOG``; see
    :func:`user_catalog_path`) merged over it (:func:`merge_catalogs`); the suite's alone when
    there is none. CatalogError naming the user's file (and key) when it is missing or malformed."""
    base = load_catalog()
    p = user_catalog_path(user)
    if p is None or p.resolve() == CATALOG_PATH:
        return base
    return merge_catalogs(base, load_catalog(p))


def as_catalog(catalog: "Catalog | str | os.PathLike | None") -> Catalog:
    """A Catalog given as itself, a path (that file alone), or None (:func:`device_catalog`: the
    suite's, with ``$LATBENCH_CATALOG`` merged over it when set)."""
    if isinstance(catalog, Catalog):
        return catalog
    return device_catalog() if catalog is None else load_catalog(catalog)


def lookup(name: str, path: str | os.PathLike | None = None) -> CatalogEntry | None:
    """The entry named ``name`` in the catalog at ``path`` (default: the suite's), or None."""
    return load_catalog(path).lookup(name)


# ---------------------------------------------------------------- writing
HEADER = ("# The device catalog (see pipelines/devices/catalog.yaml for the layout of an entry).\n"
          f"version: {VERSION}\ndevices:\n")


class _Flow(dict):
    """A mapping written on one line (``{tag: large, cores: 1, ghz: 2.84}``)."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Flow, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True))
_Dumper.add_representer(list, lambda d, data: d.represent_sequence(
    "tag:yaml.org,2002:seq", data, flow_style=all(not isinstance(x, dict) for x in data)))


def entry_yaml(entry: CatalogEntry, indent: str = "  ") -> str:
    """The entry as a YAML block under ``devices:``, laid out as the hand-written entries are
    (a cluster or a dataset's section on one line)."""
    body = entry.to_dict()
    if "clusters" in body:
        body["clusters"] = [_Flow(c) for c in body["clusters"]]
    if "sources" in body:
        body["sources"] = {k: _Flow(v) for k, v in body["sources"].items()}
    text = yaml.dump({entry.name: body}, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=10_000,
                     allow_unicode=True)
    return "".join(indent + ln + "\n" for ln in text.splitlines())


def _entry_span(lines: list[str], name: str) -> tuple[int, int] | None:
    """Lines [start, end) of the entry ``name`` under the top-level ``devices:`` key."""
    start = None
    for i, ln in enumerate(lines):
        m = re.match(r"^( +)(\"[^\"]*\"|'[^']*'|[^\s#:][^:]*?)\s*:(\s|$)", ln)
        if start is None:
            if m and len(m.group(1)) == 2 and yaml.safe_load(m.group(2) + ": 0") == {name: 0}:
                start = i
        elif ln.strip() and (len(ln) - len(ln.lstrip(" "))) <= 2:
            return start, i
    return (start, len(lines)) if start is not None else None


def _devices_is_last(lines: list[str]) -> bool:
    tops = [ln for ln in lines if ln.strip() and not ln.startswith((" ", "#"))]
    return bool(tops) and re.match(r"^devices\s*:\s*(#.*)?$", tops[-1]) is not None


def add_device(entry: CatalogEntry, path: str | os.PathLike | None = None, *, overwrite: bool = False) -> Path:
    """Writes ``entry`` into the catalog file at ``path`` (default: the suite's catalog.yaml; a
    missing file is created) and returns the path. A file other than the suite's is a user's
    catalog: it must also merge over the suite's (:func:`merge_catalogs`).

    An entry of the same name that differs is kept and CatalogError raised, unless
    ``overwrite``; an identical one leaves the file untouched. Other entries and the file's
    comments stay as they are (the entry's block is appended under ``devices:`` or replaced in
    place); the result is read back and checked before it replaces the file."""
    p = Path(path) if path is not None else CATALOG_PATH
    file = display_path(p)
    # the entry must be one the loader accepts (round trip through its own YAML)
    parse_entry(entry.name, yaml.safe_load(entry_yaml(entry, indent=""))[entry.name], f"{file} (new entry)")
    if p.exists():
        cat = load_catalog(p)
        text = p.read_text(encoding="utf-8")
    else:
        cat = Catalog(p, {})
        text = HEADER
    old = cat.lookup(entry.name)
    if old is not None:
        if old.same_as(entry):
            return p
        if not overwrite:
            raise CatalogError(f"{file}: devices.{entry.name}: already describes a device "
                               f"({old.model}{', ' + old.soc if old.soc else ''}) differently; "
                               "pass overwrite=True to replace it")
    lines = text.splitlines(keepends=True)
    block = entry_yaml(entry)
    span = _entry_span(lines, entry.name) if old is not None else None
    if span is not None:
        new_text = "".join(lines[:span[0]]) + block + "".join(lines[span[1]:])
    elif old is None and _devices_is_last(lines) and not re.search(r"^devices\s*:\s*\{\s*\}", text, re.M):
        new_text = text + ("" if text.endswith("\n") else "\n") + block
    else:  # an unusual layout: write the whole file afresh (comments are lost)
        new_text = HEADER + "".join(entry_yaml(e) for e in cat.with_entry(entry))
    expected = cat.with_entry(entry)
    check = parse_catalog(yaml.safe_load(new_text), file, p)
    if set(check.entries) != set(expected.entries) or not all(
            check[n].same_as(expected[n]) for n in expected.entries):
        raise CatalogError(f"{file}: writing devices.{entry.name} would not give the expected catalog "
                           "(the file's layout is unusual); add the entry by hand")
    if p.resolve() != CATALOG_PATH:  # a user's catalog: it must merge over the suite's
        merge_catalogs(load_catalog(), check)
    write_text(p, new_text)
    _CACHE.pop(p.resolve(), None)
    return p


# ---------------------------------------------------------------- an entry from fields given by hand
def cluster_fields(text: str) -> dict[str, Any]:
    """``large:1:2.84`` (TAG:CORES[:GHZ]) as a cluster's YAML mapping; ValueError (one line)
    when it has another form. The values are checked with the entry (:func:`parse_entry`)."""
    parts = text.split(":")
    try:
        if len(parts) not in (2, 3):
            raise ValueError
        out: dict[str, Any] = {"tag": parts[0].strip(), "cores": int(parts[1])}
        if len(parts) == 3:
            out["ghz"] = float(parts[2])
    except ValueError:
        raise ValueError(f"cluster {text!r}: expected TAG:CORES[:GHZ] (e.g. large:1:2.84)") from None
    return out


def source_fields(text: str) -> tuple[str, list[str]]:
    """``usc=MyPhone,MyPhone2`` (DATASET=NAME[,NAME...]) as (dataset, names); ValueError (one
    line) when it has another form."""
    ds, eq, names = text.partition("=")
    listed = [n.strip() for n in names.split(",") if n.strip()]
    if not eq or ds.strip() not in DATASETS or not listed:
        raise ValueError(f"source {text!r}: expected DATASET=NAME[,NAME...] with DATASET one of {', '.join(DATASETS)}")
    return ds.strip(), listed


def entry_from_fields(name: str, *, model: str, file: str = "<fields>", maker: str | None = None,
                      soc: str | None = None, clusters: Iterable[str] = (), gpu: str | None = None,
                      os_name: str | None = None, note: str | None = None, origin: str | None = None,
                      sources: Iterable[str] = ()) -> CatalogEntry:
    """A catalog entry from fields given by hand (``latbench devices add --no-adb``): clusters as
    ``TAG:CORES[:GHZ]`` (:func:`cluster_fields`), sources as ``DATASET=NAME[,NAME...]``
    (:func:`source_fields`). Checked as an entry of ``file`` is (:func:`parse_entry`)."""
    data: dict[str, Any] = {"model": model}
    for key, value in (("maker", maker), ("soc", soc), ("gpu", gpu), ("os", os_name), ("note", note), ("origin", origin)):
        if value is not None:
            data[key] = value
    cl = [cluster_fields(c) for c in clusters]
    if cl:
        data["clusters"] = cl
    src: dict[str, Any] = {}
    for text in sources:
        ds, names = source_fields(text)
        if ds in src:
            raise ValueError(f"source {text!r}: {ds} given twice (list its names after one {ds}=)")
        src[ds] = {"names": names}
    if src:
        data["sources"] = src
    return parse_entry(name, data, file)
