"""A tiny measuring sweep on the host, for the tests of what a sweep leaves behind (the control
set, the release): three NAS-Bench-201 cells exported to TFLite fp32 and measured with a short
fixed protocol (two processes of four timed runs after one warm-up, no load check)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable


def tiny_sweep_overrides(data: Path, release: Path, *more: str, granularities: str = "[e2e]",
                         grid: tuple[str, ...] = ()) -> list[str]:
    """The overrides of the tiny sweep writing to ``data`` with its release at ``release``;
    ``grid``: scenario-grid overrides, ``more``: any further ones (they come last)."""
    return ["generator=[nasbench201]", "generator.nasbench201.n=3", f"data_dir={data}",
            "export.formats=[tflite_fp32]", "export.workers=2", "measure.processes=2",
            "measure.warmup=1", "measure.stopping.policy=fixed", "measure.stopping.runs=4",
            f"measure.granularities={granularities}", "measure.load.check=false",
            # the release's protocol reuses released pairs; the tour's does not
            *grid, f"release.folder={release}", "release.reuse=true", *more]


def tiny_sweep_cfg(data: Path, release: Path, *more: str, granularities: str = "[e2e]", grid: tuple[str, ...] = ()):
    """The validated config of the tiny sweep (:func:`tiny_sweep_overrides`)."""
    from pipelines.config import compose, validate

    return validate(compose(tiny_sweep_overrides(data, release, *more, granularities=granularities, grid=grid)))


def exported_sweep(tmp_path_factory: Any, name: str, cfg: Callable[..., Any]) -> Path:
    """A fresh data folder (under a temporary folder named ``name``) with the networks of
    ``cfg(data, release)`` generated and exported; the export must not fail."""
    from pipelines.export import run_export
    from pipelines.generate import run_generate

    data = tmp_path_factory.mktemp(name) / "data"
    c = cfg(data, data.parent / "none-v1")
    run_generate(c, progress=False)
    assert run_export(c, progress=False)["failed"] == 0
    return data
