"""The ``import-public`` stage: public real-device measurements into the dataset schema.

Config section ``public`` (conf/public/default.yaml): ``datasets`` to import (``usc``,
``help``, ``qaihub``; empty: none, the stage then writes empty tables), one section per importer
with the folder it reads (USC and HELP: a folder or a list of them; ``pipelines/dataset/usc.py`` /
``help.py`` / ``qaihub.py`` document what they accept), the output folder, and ``catalog``: a
device catalog file of the user's merged over the suite's (null: ``$LATBENCH_CATALOG`` when set;
``pipelines.devices.catalog.device_catalog``), so phones the suite does not know are described
without editing the package. The files are never part of the project: the set-up brings them into
``external/`` (:mod:`pipelines.dataset.pull`: this machine's copy, else the pinned commit's files),
or the paths point elsewhere. A selected dataset whose folder is missing is a one-line error
naming the folder; one whose folder holds none of its files (the pull left the reason in
``MISSING.txt``) is skipped, and the stage says why in its output and in ``SKIPPED.json``, which
the leaderboard reads to say why the dataset's tracks have no data. Of a list of folders, one
without the files while others have them is a one-line error naming it (the dataset is skipped
only when none has them).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .dataset.help import HelpConfig
from .dataset.importers import folder_paths
from .dataset.help import validate_config as validate_help
from .dataset.qaihub import QaihubConfig
from .dataset.qaihub import validate_config as validate_qaihub
from .dataset.usc import UscConfig
from .dataset.usc import validate_config as validate_usc

IMPORTERS = {"usc": validate_usc, "help": validate_help, "qaihub": validate_qaihub}
SKIPPED = "SKIPPED.json"  # {dataset: reason} of the selected datasets the stage skipped


@dataclass
class PublicConfig:
    datasets: list[str] = field(default_factory=lambda: ["usc", "help", "qaihub"])  # which importers run
    usc: UscConfig = field(default_factory=UscConfig)
    help: HelpConfig = field(default_factory=HelpConfig)
    qaihub: QaihubConfig = field(default_factory=QaihubConfig)
    out: str = "public"  # output folder under data_dir
    catalog: Optional[str] = None  # a device catalog file of yours merged over the suite's (null: $LATBENCH_CATALOG)


def validate_config(cfg: PublicConfig) -> PublicConfig:
    bad = [d for d in cfg.datasets if d not in IMPORTERS]
    if bad:
        raise ValueError(f"datasets: unknown public dataset {bad[0]!r} (known: {', '.join(IMPORTERS)})")
    for name, check in IMPORTERS.items():
        try:
            check(getattr(cfg, name))
        except ValueError as e:
            raise ValueError(f"{name}.{e}") from None
    if cfg.catalog is not None and not cfg.catalog.strip():
        raise ValueError("catalog: expected a catalog file path or null, got ''")
    return cfg


def skipped_datasets(p: PublicConfig) -> dict[str, str]:
    """The selected datasets whose folder holds none of their files, with the reason; a one-line
    FileNotFoundError for a selected dataset whose folder does not exist."""
    from .dataset.pull import SOURCES

    skipped = {}
    for name in p.datasets:
        reasons = {}
        folders = folder_paths(getattr(p, name).path)
        for path in folders:
            folder = Path(path)
            if not folder.is_dir():
                raise FileNotFoundError(f"public.{name}.path: {folder}: no such folder (bring the files with "
                                        f"`python -m pipelines.dataset.pull {name}`, or drop {name!r} from "
                                        "public.datasets)")
            reason = SOURCES[name].missing_reason(folder)
            if reason is not None:
                reasons[path] = reason
        if len(reasons) == len(folders):
            skipped[name] = "; ".join(reasons.values())
        elif reasons:
            path, reason = next(iter(reasons.items()))
            raise FileNotFoundError(f"public.{name}.path: {path}: holds none of the files ({reason}); drop it from "
                                    "the list")
    return skipped


def public_catalog(p: PublicConfig) -> Any:
    """The device catalog of the import: the suite's with ``public.catalog`` (else
    ``$LATBENCH_CATALOG``) merged over it; a ValueError naming the key and the file when that
    file is missing or malformed."""
    from .devices.catalog import USER_ENV, CatalogError, device_catalog

    try:
        return device_catalog(p.catalog)
    except CatalogError as e:
        raise ValueError(f"{'public.catalog' if p.catalog else '$' + USER_ENV}: {e}") from None


def run_public_import(cfg: Any, progress: bool = True) -> dict[str, Any]:
    """Import the selected public datasets that are there into ``<data_dir>/<public.out>``;
    ``skipped`` in the result (and SKIPPED.json) names the others and why."""
    from foundation.atomic import write_text

    from .dataset.import_public import run_import
    from .dataset.load import save_tables
    from .dataset.schema import TABLES, schema

    p: PublicConfig = cfg.public
    out = Path(cfg.data_dir) / p.out
    skipped = skipped_datasets(p)
    catalog = public_catalog(p)
    present = [d for d in p.datasets if d not in skipped]
    if not present:
        out.mkdir(parents=True, exist_ok=True)
        for t in TABLES:  # no tables of an earlier run stay behind to be read as this run's
            (out / f"{t}.parquet").unlink(missing_ok=True)
        if not p.datasets:  # none selected: empty tables, as asked
            save_tables({t: schema(t).empty() for t in TABLES}, out)
        r: dict[str, Any] = {"counts": {t: 0 for t in TABLES}, "problems": [],
                             "notes": [] if p.datasets else ["no public dataset selected"]}
    else:
        r = run_import(**{f"cfg_{d}": getattr(p, d) for d in present}, out_dir=out, progress=progress,
                       catalog=catalog)
    write_text(out / SKIPPED, json.dumps(skipped, indent=1, sort_keys=True) + "\n")
    r["skipped"] = skipped
    return r


def skipped_reasons(folder: str | Path) -> dict[str, str]:
    """What import-public skipped when it wrote ``folder`` ({dataset: reason}; empty if nothing)."""
    f = Path(folder) / SKIPPED
    try:
        d = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in d.items()} if isinstance(d, dict) else {}
