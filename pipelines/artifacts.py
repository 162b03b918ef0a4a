"""Where the export stage puts a network's files, and what ``latbench prune`` leaves behind.

``<data_dir>/artifacts/<model_id>/<format file>`` (the format registry names the file); a file
prune deleted once its pairs were released leaves ``<format>.dropped.json`` beside it, so
export does not write it again and a missing file says why.
"""
from __future__ import annotations

from pathlib import Path

DROPPED = "dropped"  # the sidecar's kind: <format>.dropped.json


def artifact_path(artifacts_dir: Path, model_id: str, fmt: str) -> Path:
    from generators.export.formats import FORMATS

    return Path(artifacts_dir) / model_id / FORMATS.get(fmt).filename


def dropped_sidecar(folder: Path, fmt: str) -> Path:
    """Where prune records that ``folder``'s ``fmt`` file was deleted."""
    return folder / f"{fmt}.{DROPPED}.json"


def is_dropped(folder: Path, fmt: str) -> bool:
    return dropped_sidecar(folder, fmt).is_file()
