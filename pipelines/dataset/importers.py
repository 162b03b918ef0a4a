"""Importing public latency datasets into the dataset schema: what the importers share.

Each importer is ``import_<name>(cfg=None, progress=False, catalog=None) -> ImportResult``
(:func:`.usc.import_usc`, :func:`.help.import_help`): it reads the files in ``cfg.path`` (USC
and HELP: one folder or a list of them, :func:`data_folders`); ``catalog`` is the device catalog
(a Catalog or a path; default ``pipelines.devices.catalog.device_catalog()``: the suite's, with
``$LATBENCH_CATALOG`` merged over it); it raises PublicDataError when ``cfg.devices`` names a
device in neither the files nor the catalog, or selects no device of the files.

Shared by the importers (:mod:`.usc`, :mod:`.help`):

- :class:`ImportProblem`: one fault in the input, or one thing the importer assumed that the
  files do not state (kind ``assumption``), naming file, line and column. Importers do not stop
  at a bad row: they record a problem, skip what cannot be read (a cell, a row, a column, a whole
  file when its header is unusable) and import the rest. ``strict=True`` in a config turns any
  problem but an assumption into a :class:`PublicDataError` at the end of the import.
- :class:`ImportResult`: a ``dict`` of DataFrames (``models``, ``scenarios``, ``e2e``,
  ``ops``, ``kernels``, each conformed to :mod:`.schema`) with ``problems`` and ``notes``
  (observations about the data that are not faults, e.g. cells left empty by the source).
- :class:`CsvTable`: a CSV reader that keeps line numbers and detects truncation.
- :class:`Device`: a device as the importers describe it, from its entry in the device catalog
  (``pipelines/devices/catalog.yaml``, :func:`device_from_entry`) or blank for a device the
  catalog lacks (:func:`blank_device`; the importer records :func:`not_in_catalog` as a problem
  and imports its rows); :func:`select_devices` applies a config's ``devices`` filter.

:func:`check_config_fields` checks the fields every importer's config has and
:func:`data_folder` finds the folder it names; :func:`data_folders` finds each folder of a list
and reads what it states of its origin (:class:`Folder`: the commit its rows carry, and whether
it is the pulled copy of the source's pinned files, whose conventions the source documents);
:func:`assumed` makes the problem line of an assumption. :func:`merge_tables` joins the tables
of several imports. The importers use this module and this module uses none of them:
:mod:`.import_public` (``run_import``) runs both into a folder.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from foundation import limits

from .schema import TABLES, check_tables, schema


class PublicDataError(ValueError):
    """Input that cannot be imported (strict mode, or nothing readable); lists the problems."""


# the kinds of problem (ImportProblem.kind)
INPUT = "input"  # a fault in a file: what cannot be read is skipped
ASSUMPTION = "assumption"  # what the importer assumed that the file does not state
CATALOG = "catalog"  # a device the device catalog does not describe
CONFIG = "config"  # a config filter naming what the files do not hold
PROVENANCE = "provenance"  # a folder's statement of its origin that cannot be read
KINDS = (INPUT, ASSUMPTION, CATALOG, CONFIG, PROVENANCE)


@dataclass(frozen=True)
class ImportProblem:
    file: str  # file name relative to the imported folder
    row: int | None  # line number in the file (1 = header); None: the whole file
    column: str | None
    message: str
    kind: str = INPUT  # one of KINDS

    def __str__(self) -> str:
        where = self.file + (f" line {self.row}" if self.row is not None else "")
        if self.column:
            where += f", column {self.column!r}"
        return f"{where}: {self.message}"


class ImportResult(dict):
    """The imported tables (name -> DataFrame) plus ``problems`` and ``notes``."""

    def __init__(self, tables: dict[str, pd.DataFrame], problems: list[ImportProblem], notes: list[str],
                 dataset: str):
        super().__init__(tables)
        self.problems = list(problems)
        self.notes = list(notes)
        self.dataset = dataset

    def summary(self) -> str:
        counts = ", ".join(f"{name} {len(self[name])}" for name in TABLES if name in self)
        return f"{self.dataset}: {counts}; {len(self.problems)} problem(s)"


def finish(dataset: str, tables: dict[str, pd.DataFrame], problems: list[ImportProblem], notes: list[str],
           strict: bool) -> ImportResult:
    """Check the tables against the schema (a failure here is a bug of the importer, not of the
    input) and apply ``strict`` (to every problem but the assumptions)."""
    check_tables(tables)
    problems = sorted(problems, key=lambda p: (p.file, p.row or 0))  # stable: order of discovery within a line
    faults = [p for p in problems if p.kind != ASSUMPTION]
    if strict and faults:
        raise PublicDataError(f"{dataset}: {len(faults)} problem(s) in the input (strict mode):\n"
                              + "\n".join(str(p) for p in faults))
    return ImportResult(tables, problems, notes, dataset)


# ---------------------------------------------------------------- config and folder
def check_config_fields(cfg: Any) -> None:
    """The value checks of the fields every importer's config has (their types are the schema's,
    checked by ``foundation.configs.coerce``): ValueError("<field>: ...") on the first fault.
    ``path`` is a folder, or (USC, HELP: a config whose ``path`` is typed Any) a list of them."""
    path = cfg.path
    if isinstance(path, (list, tuple)):
        if not path:
            raise ValueError("path: expected a folder path or a non-empty list of them, got []")
        bad = [p for p in path if not isinstance(p, str) or not p.strip()]
        if bad:
            raise ValueError(f"path: expected folder paths (text), got {bad[0]!r} in the list")
        return
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"path: expected a folder path or a list of them, got {path!r}")


def folder_paths(path: str | list[str]) -> list[str]:
    """A config's ``path`` as the list of folders it names (one folder: a list of one)."""
    return [path] if isinstance(path, str) else list(path)


def data_folder(path: str, section: str) -> Path:
    """The folder of a public dataset's files (``<section>.path`` of the config); a
    PublicDataError saying how to get the files when it is not there."""
    root = Path(path)
    if not root.is_dir():
        raise PublicDataError(f"{root}: folder not found ({section}.path); bring the files with "
                              f"`python -m pipelines.dataset.pull {section}` (docs/dataset.md)")
    return root


# ---------------------------------------------------------------- folders and their origin
UNKNOWN_COMMIT = "unknown"  # source_commit of the rows of a folder that states no commit


@dataclass(frozen=True)
class Folder:
    """One folder of a dataset's files and what it states of its origin (:func:`data_folders`)."""

    root: Path
    prefix: str  # before its files' names in problems and source_file: "" for the only folder, else "<path>/"
    commit: str | None  # the source_commit its rows carry
    pinned: bool  # the source's own files at the pinned commit: their conventions are the source's documented ones

    def name(self, path: Path) -> str:
        """A file of the folder as problems and ``source_file`` name it."""
        return self.prefix + path.relative_to(self.root).as_posix()


def data_folders(path: str | list[str], section: str, copy_commit: str | None,
                 problems: list[ImportProblem], notes: list[str]) -> list[Folder]:
    """The folders of ``<section>.path`` (:func:`folder_paths`), each with its origin.

    A folder holding the pull's ``PULLED.json`` (:mod:`.pull`; a user's folder may hold one too:
    ``{"rev": "<commit>"}``) states the commit its rows carry; it is the pinned copy when that is
    the source's pinned commit. This machine's copy, which the pull links
    (``<shared>/external/<folder>``, :func:`.pull.shared_external`), is the pinned copy and carries
    ``copy_commit``. Any other folder's rows carry ``"unknown"`` (a note says so). PublicDataError
    for a missing folder, or one listed twice."""
    paths = folder_paths(path)
    seen: dict[Path, str] = {}
    out = []
    for p in paths:
        root = data_folder(p, section)
        key = root.resolve()
        if key in seen:
            raise PublicDataError(f"{section}.path: {seen[key]} and {p} are the same folder; list it once")
        seen[key] = p
        prefix = "" if len(paths) == 1 else p.rstrip("/") + "/"
        commit, pinned = _origin(root, prefix, section, copy_commit, problems, notes)
        out.append(Folder(root, prefix, commit, pinned))
    return out


def _origin(root: Path, prefix: str, section: str, copy_commit: str | None, problems: list[ImportProblem],
            notes: list[str]) -> tuple[str | None, bool]:
    """(commit, pinned) of one folder (:func:`data_folders`)."""
    from .pull import PULLED, SOURCES

    src = SOURCES[section]
    marker = root / PULLED
    if marker.is_file():
        rev = _stated_commit(marker, prefix + PULLED, problems)
        return (rev, rev == src.rev) if rev else (UNKNOWN_COMMIT, False)
    if _is_machine_copy(root, src.folder):
        return copy_commit, True
    notes.append(f"{prefix or str(root) + '/'}: no {PULLED} states the commit of these files: their rows carry "
                 f"source_commit {UNKNOWN_COMMIT!r}")
    return UNKNOWN_COMMIT, False


def _stated_commit(marker: Path, name: str, problems: list[ImportProblem]) -> str | None:
    """The ``rev`` a PULLED.json states; None, with a problem line, when it states none."""
    from foundation.safeload import LoadError, load_json

    try:
        data = load_json(marker, where=name)
    except LoadError as e:
        why = str(e)[len(name) + 2:] if str(e).startswith(f"{name}: ") else str(e)
    else:
        rev = data.get("rev") if isinstance(data, dict) else None
        if isinstance(rev, str) and rev.strip() and len(rev) <= 200:
            return rev.strip()
        why = "not a JSON object with a 'rev' text (the commit the files come from)"
    problems.append(ImportProblem(name, None, None, f"{why}; the folder's rows carry source_commit "
                                  f"{UNKNOWN_COMMIT!r}", PROVENANCE))
    return None


def _is_machine_copy(root: Path, folder: str) -> bool:
    """Whether ``root`` is this machine's copy of a source (``<shared>/external/<folder>``),
    reached directly or through the pull's link ``external/<folder>``."""
    from .pull import shared_external

    checkout_shared = Path(__file__).resolve().parents[3] / "shared" / "external"
    copies = {(base / folder).resolve() for base in (shared_external(), checkout_shared)}
    return root.resolve() in copies


def assumed(file: str, message: str, column: str | None = None, row: int | None = 1) -> ImportProblem:
    """A problem line of kind ``assumption``: what the importer took for ``file`` that it does not
    state (at its header line, ``row`` 1; None for a file without lines)."""
    return ImportProblem(file, row, column, f"assumed {message}", ASSUMPTION)


# ---------------------------------------------------------------- CSV
@dataclass
class CsvTable:
    """A CSV file read row by row, keeping line numbers.

    Faults become :class:`ImportProblem` s in ``problems``: a row with more or fewer fields than
    the header is skipped; a quoted field cut off by the end of the file, or a last line without
    its line break (a file cut mid-row), end the file there. ``rows`` holds
    ``(line_number, {column: text})`` for the rows that were read whole.
    """

    path: Path
    name: str  # as reported in problems
    problems: list[ImportProblem]
    header: list[str] = field(default_factory=list)
    rows: list[tuple[int, dict[str, str]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._read()

    def problem(self, row: int | None, column: str | None, message: str) -> None:
        self.problems.append(ImportProblem(self.name, row, column, message))

    def _read(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as e:
            self.problem(None, None, f"not UTF-8 text ({e.reason} at byte {e.start}); file skipped")
            return
        if not text.strip():
            self.problem(None, None, "empty file; skipped")
            return
        unterminated = not text.endswith(("\n", "\r"))
        lines = text.splitlines(keepends=True)
        reader = csv.reader(lines, strict=True)
        try:
            self.header = [h.strip() for h in next(reader)]
        except csv.Error as e:
            self.problem(1, None, f"unreadable header ({e}); file skipped")
            return
        dup = sorted({h for h in self.header if self.header.count(h) > 1})
        if dup:
            self.problem(1, dup[0], "column name appears more than once; file skipped")
            self.header = []
            return
        n = len(self.header)
        last_line = len(lines)
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                break
            except csv.Error as e:
                self.problem(reader.line_num, None, f"malformed CSV ({e}): the file is cut off or corrupt here; "
                             "the rest of the file is skipped")
                break
            line = reader.line_num
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # blank line
            if unterminated and line == last_line:
                self.problem(line, None, "the file ends in the middle of this row (no line break at the end: "
                             "truncated?); row skipped")
                break
            if len(fields) != n:
                self.problem(line, None, f"{len(fields)} fields where the header has {n} "
                             f"({'truncated' if len(fields) < n else 'extra fields'}); row skipped")
                continue
            self.rows.append((line, dict(zip(self.header, (f.strip() for f in fields)))))

    def require(self, *columns: str) -> bool:
        """True when every column is in the header; otherwise record one problem per missing
        column (the whole file is unusable) and return False."""
        if not self.header:
            return False
        missing = [c for c in columns if c not in self.header]
        for c in missing:
            near = [h for h in self.header if h.lower() == c.lower()]
            hint = f" (found {near[0]!r}: names are case-sensitive)" if near else f" (header starts {', '.join(self.header[:4])} ...)"
            self.problem(1, c, f"required column missing{hint}; file skipped")
        return not missing


MAX_EXACT_INT = limits.TABLE_EXACT_INT
MS_PER_UNIT = {"ms": 1.0, "us": 1e-3}  # the units public files state latencies in


def latency_fault(value: float, unit: str) -> str | None:
    """Why ``value`` (a latency in ``unit``, a key of MS_PER_UNIT) is no latency: above
    ``limits.LATENCY_MS`` once in milliseconds (a unit error or a corrupt cell); else None."""
    ms = value * MS_PER_UNIT[unit]
    if ms <= limits.LATENCY_MS:
        return None
    shown = f"{value:g} {unit}" + (f" = {ms:g} ms" if unit != "ms" else "")
    return (f"latency {shown} is above {limits.LATENCY_MS:g} ms (limits.LATENCY_MS: one inference takes less than an "
            "hour)")


def parse_number(text: str, table: CsvTable, line: int, column: str, *, positive: bool = True,
                 integer: bool = False, unit: str | None = None) -> float | int | None:
    """A numeric cell: None when empty or '-' (not measured / not applicable); a problem (and
    None) when it is not a finite number, or not > 0 for ``positive``, or (``integer``) not an
    integer of at most 2**53 in magnitude (1e30 would overflow the int64 columns), or (``unit``:
    the cell is a latency in that unit, "ms" or "us") above ``limits.LATENCY_MS`` once converted
    (:func:`latency_fault`)."""
    t = text.strip()
    if t in ("", "-", "nan", "NaN"):
        return None
    try:
        v = float(t)
    except ValueError:
        table.problem(line, column, f"not a number: {t[:40]!r}; cell skipped")
        return None
    if not math.isfinite(v):
        table.problem(line, column, f"not a finite number: {t[:40]!r}; cell skipped")
        return None
    if positive and v <= 0:
        table.problem(line, column, f"latency must be > 0, got {t}; cell skipped")
        return None
    if unit is not None:
        fault = latency_fault(v, unit)
        if fault:
            table.problem(line, column, f"{fault}; cell skipped")
            return None
    if integer:
        if abs(v) > MAX_EXACT_INT:
            table.problem(line, column, f"integer out of range (more than 2**53 in magnitude): {t[:40]!r}; cell skipped")
            return None
        if v != int(v):
            table.problem(line, column, f"not an integer: {t[:40]!r}; cell skipped")
            return None
        return int(v)
    return v


# ---------------------------------------------------------------- devices
@dataclass(frozen=True)
class Device:
    """A device as an importer describes it: CPU clusters (tag, cores, GHz), GPU. Built from its
    entry in the device catalog (:func:`device_from_entry`, ``pipelines/devices/catalog.yaml``),
    or blank for a device the catalog does not have (:func:`blank_device`)."""

    name: str  # the catalog's name: the device part of scenario ids
    model: str | None
    soc: str | None = None
    clusters: tuple[tuple[str, int, float | None], ...] = ()
    gpu: str | None = None
    note: str = ""
    os: str | None = None
    in_catalog: bool = True

    @property
    def cpu(self) -> str | None:
        if not self.clusters:
            return None
        return " + ".join(f"{n}x {c}" + (f" {ghz:.2f} GHz" if ghz else "") for c, n, ghz in self.clusters)

    @property
    def label(self) -> str:
        """``Google Pixel 4 (Snapdragon 855)``; a device outside the catalog: its name and that."""
        if not self.in_catalog:
            return f"{self.name} (not in the device catalog)"
        model = self.model or self.name
        return f"{model} ({self.soc})" if self.soc else model

    def cluster(self, name: str) -> tuple[str, int, float | None] | None:
        return next((c for c in self.clusters if c[0] == name), None)


def device_from_entry(entry: Any, note: str | None = None) -> Device:
    """The Device of a catalog entry (``pipelines.devices.catalog.CatalogEntry``); ``note``
    replaces the entry's own (HELP's remark on a device)."""
    return Device(entry.name, entry.model, entry.soc, tuple((c.tag, c.cores, c.ghz) for c in entry.clusters),
                  entry.gpu, entry.note if note is None else note, entry.os)


def blank_device(name: str) -> Device:
    """A device the catalog does not describe: only its name."""
    return Device(name, None, in_catalog=False)


def not_in_catalog(name: str, catalog: Any) -> str:
    """The warning an importer records for a device missing from the catalog: it names the way to
    describe the device without editing the package (an entry in a catalog of the user's)."""
    user = getattr(catalog, "user", None)
    if user is not None:
        from pipelines.devices.catalog import display_path

        target, then = display_path(user), ""
    else:
        target, then = "FILE", " (a catalog of yours; the import reads it with public.catalog or $LATBENCH_CATALOG)"
    return (f"device {name!r} is not in the device catalog ({catalog.where}): imported with a blank device "
            f"description; describe it with `latbench devices add --no-adb --catalog {target} {name} --model ...`"
            f"{then}")


def select_devices(wanted: list[str], present: dict[str, Any], catalog: Any,
                   problems: list[ImportProblem]) -> set[str]:
    """The names of ``present`` (a dataset's device names -> catalog entry or None) that the
    config filter ``wanted`` selects (all when it is empty). A filter item selects a device by
    the dataset's name, the catalog's name or the catalog name's spelling in scenario ids
    (``pipelines.devices.catalog.matches_filter``).

    Raises PublicDataError (``devices: ...``) for an item in neither the data nor the catalog,
    and when the filter selects nothing; an item the catalog knows but the data lacks is a
    problem."""
    from pipelines.devices.catalog import matches_filter

    if not wanted:
        return set(present)
    in_data = ", ".join(sorted(present)) or "none"
    selected: set[str] = set()
    for item in wanted:
        hits = {s for s, e in present.items() if matches_filter(item, s, e)}
        if not hits:
            if not catalog.knows(item):
                raise PublicDataError(f"devices: unknown device {item!r}: in neither the data (devices in the "
                                      f"files: {in_data}) nor the device catalog ({catalog.where})")
            problems.append(ImportProblem("(config)", None, "devices",
                                          f"device {item!r} is not in the files (devices in the files: {in_data})",
                                          CONFIG))
        selected |= hits
    if not selected:
        raise PublicDataError(f"devices: the filter {list(wanted)} matches no device in the data "
                              f"(devices in the files: {in_data})")
    return selected


_CORES = re.compile(r"(\d+)([a-z]+)")


def parse_cores(text: str, device: Device) -> list[tuple[int, str]]:
    """``1large2med`` -> ``[(1, 'large'), (2, 'med')]``, checked against the device's clusters
    (only the syntax when the device has none: a device outside the catalog); raises
    ValueError with a one-line reason."""
    parts = _CORES.findall(text)
    if not parts or "".join(f"{n}{c}" for n, c in parts) != text:
        raise ValueError(f"core combination {text!r} is not <count><cluster>... (e.g. 1large2med)")
    out = []
    for n, c in parts:
        if not device.clusters:
            if int(n) < 1:
                raise ValueError(f"core combination {text!r} uses {n} {c} cores")
            out.append((int(n), c))
            continue
        cl = device.cluster(c)
        if cl is None:
            raise ValueError(f"{device.name} has no {c!r} cluster (clusters: {', '.join(x[0] for x in device.clusters)})")
        if not 1 <= int(n) <= cl[1]:
            raise ValueError(f"{device.name} has {cl[1]} {c} core(s), the column uses {n}")
        out.append((int(n), c))
    if len({c for _, c in out}) != len(out):
        raise ValueError(f"core combination {text!r} names a cluster twice")
    return out


# ---------------------------------------------------------------- merging
def merge_tables(*parts: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Concatenate table dicts (e.g. two imports); a network present in several parts (same
    ``model_id``) is kept once, as the first part has it."""
    out: dict[str, pd.DataFrame] = {}
    for name in TABLES:
        frames = [p[name] for p in parts if name in p and len(p[name])]
        if not frames:
            out[name] = schema(name).empty()
            continue
        df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].reset_index(drop=True)
        if name == "models":
            df = df.drop_duplicates(subset=["model_id"], keep="first").reset_index(drop=True)
        out[name] = df
    return out
