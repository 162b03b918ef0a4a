"""The packages' layers: foundation at the bottom imports none of the suite's packages, and the
suite's own utilities are imported from foundation, not from a package above it."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = ("foundation", "generators", "pipelines", "leaderboard", "kernels")


def imports_of(path: Path) -> set[str]:
    """The absolute module names ``path`` imports (relative imports resolved)."""
    pkg = path.relative_to(ROOT).with_suffix("").parts[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = list(pkg[: len(pkg) - node.level + 1]) if node.level else []
            mod = ".".join([*base, *(node.module.split(".") if node.module else [])])
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out


def test_foundation_imports_no_package_of_the_suite():
    for path in sorted((ROOT / "foundation").rglob("*.py")):
        bad = {m for m in imports_of(path) if m.split(".")[0] in SUITE[1:]}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_the_utilities_live_in_foundation_only():
    utilities = {p.stem for p in (ROOT / "foundation").glob("*.py") if p.stem != "__init__"}
    for name in utilities:
        assert not (ROOT / "generators" / f"{name}.py").exists(), f"generators/{name}.py is back"
    for pkg in SUITE[1:]:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            bad = {m for m in imports_of(path) if m.split(".")[:2][0] == "generators"
                   and len(m.split(".")) > 1 and m.split(".")[1] in utilities}
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)} (foundation has them)"
