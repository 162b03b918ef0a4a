"""The runner registry is the one list of frameworks and accelerators (pipelines/runners).

Every place that needs framework names (the scenario grid's checks, the devices, the dataset
card's runtime names, the model files `profile` takes) asks the registry, so a framework added
there reaches them all; no module outside it spells a list of framework names.
"""
from __future__ import annotations

import ast
from pathlib import Path

from pipelines.devices.adb import AdbDevice
from pipelines.devices.host import HostDevice
from pipelines.runners import (RUNNERS, accelerators, framework_by_suffix, frameworks, phone_frameworks,
                               register_runner, runner_for)
from pipelines.scenarios import ACCELERATORS, FRAMEWORKS

ROOT = Path(__file__).resolve().parents[1]


def test_the_grid_and_the_devices_take_their_frameworks_from_the_registry():
    assert FRAMEWORKS == frameworks() == tuple(dict.fromkeys(f for f, _ in RUNNERS))
    assert ACCELERATORS == accelerators()
    assert HostDevice.frameworks == frameworks()
    assert AdbDevice.frameworks == phone_frameworks() and set(phone_frameworks()) <= set(frameworks())
    by_suffix = framework_by_suffix()
    assert set(by_suffix.values()) <= set(frameworks())
    assert all(runner_for(f, a).title for f, a in RUNNERS)  # the card names every runtime


def test_a_runner_registered_twice_is_refused():
    f, a = next(iter(RUNNERS))
    try:
        register_runner(f, a, RUNNERS[(f, a)])
    except ValueError as e:
        assert "registered twice" in str(e)
    else:
        raise AssertionError("a second registration was taken")


def _framework_lists(path: Path) -> list[int]:
    """Lines of ``path`` holding a literal tuple, list or set of two or more of the registry's
    framework names."""
    names = set(frameworks())
    hits = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            vals = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(set(vals) & names) >= 2:
                hits.append(node.lineno)
        if isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            vals = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
            if len(set(keys) & names) >= 2 or len(set(vals) & names) >= 2:
                hits.append(node.lineno)
    return hits


def test_no_module_outside_the_registry_spells_a_framework_list():
    """The suite's code (not the public importers, which name the frameworks of a source's own
    files, nor tests) holds no hand-kept list of framework names."""
    allowed = {ROOT / "pipelines" / "runners" / "__init__.py",
               ROOT / "pipelines" / "dataset" / "usc.py",  # the USC files' frameworks, not the suite's runners
               ROOT / "leaderboard" / "published.py",  # the USC paper's tables
               ROOT / "generators" / "importers" / "__init__.py"}  # its importer modules are named so
    found = {}
    for pkg in ("pipelines", "generators", "leaderboard", "kernels"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path not in allowed and (lines := _framework_lists(path)):
                found[str(path.relative_to(ROOT))] = lines
    assert not found, f"framework name lists outside pipelines/runners: {found}"
