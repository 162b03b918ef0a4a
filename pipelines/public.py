"""The ``import-public`` stage: public real-device measurements into the dataset schema.

Config section ``public`` (conf/public/default.yaml): ``datasets`` to import (``usc``,
``help``; empty: none, the stage then writes empty tables), one section per importer with the
folder it reads (``pipelines/dataset/usc.py`` / ``help.py`` document what they accept), and
the output folder. The files are never part of the project: a user pulls them with
``dvc import`` (docs/dataset.md shows the commands) into ``external/`` (or points the paths
elsewhere). A selected dataset whose folder is missing is a one-line error naming the folder.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .dataset.help import HelpConfig
from .dataset.help import validate_config as validate_help
from .dataset.usc import UscConfig
from .dataset.usc import validate_config as validate_usc

IMPORTERS = {"usc": validate_usc, "help": validate_help}
PULL = {  # where the one-line error sends the user (the commands are in docs/dataset.md)
    "usc": "dvc import https://github.com/qed-usc/mobile-ml-benchmark dataset/<file> --rev 40ba833 "
           "(docs/dataset.md, 'Pulling the original files with DVC')",
    "help": "dvc import https://github.com/HayeonLee/HELP data/nasbench201/latency -o external/help-nasbench201/latency",
}


@dataclass
class PublicConfig:
    datasets: list[str] = field(default_factory=lambda: ["usc", "help"])  # which importers run
    usc: UscConfig = field(default_factory=UscConfig)
    help: HelpConfig = field(default_factory=HelpConfig)
    out: str = "public"  # output folder under data_dir


def validate_config(cfg: PublicConfig) -> PublicConfig:
    bad = [d for d in cfg.datasets if d not in IMPORTERS]
    if bad:
        raise ValueError(f"datasets: unknown public dataset {bad[0]!r} (known: {', '.join(IMPORTERS)})")
    for name, check in IMPORTERS.items():
        try:
            check(getattr(cfg, name))
        except ValueError as e:
            raise ValueError(f"{name}.{e}") from None
    return cfg


def run_public_import(cfg: Any, progress: bool = True) -> dict[str, Any]:
    """Import the selected public datasets into ``<data_dir>/<public.out>``."""
    from .dataset.import_public import run_import
    from .dataset.load import save_tables
    from .dataset.schema import TABLES, schema

    p: PublicConfig = cfg.public
    out = Path(cfg.data_dir) / p.out
    for name in p.datasets:
        folder = Path(getattr(p, name).path)
        if not folder.is_dir():
            raise FileNotFoundError(f"public.{name}.path: {folder}: no such folder (pull it with `{PULL[name]}`, "
                                    f"or drop {name!r} from public.datasets)")
    if not p.datasets:
        save_tables({t: schema(t).empty() for t in TABLES}, out)
        return {"counts": {t: 0 for t in TABLES}, "problems": [], "notes": ["no public dataset selected"]}
    return run_import(p.usc if "usc" in p.datasets else None, p.help if "help" in p.datasets else None,
                      out_dir=out, progress=progress)
