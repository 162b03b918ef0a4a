"""The packages' layers: foundation at the bottom imports none of the suite's packages, and the
suite's own utilities are imported from foundation, not from a package above it."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = ("foundation", "generators", "pipelines", "leaderboard", "kernels", "shelf")


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


def _importers_of(package: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    """Files under ``package`` that import a module of ``forbidden`` (a package, or a module in it)."""
    bad = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        hits = sorted(m for m in imports_of(path) if any(m == f or m.startswith(f + ".") for f in forbidden))
        if hits:
            bad[str(path.relative_to(ROOT))] = hits
    return bad


def test_pipelines_imports_neither_the_leaderboard_nor_the_shelf():
    """pipelines/ lies below both: the shelf's commands reach `latbench` through its registry
    (entry-point group latbench.commands), not through an import of pipelines/cli.py."""
    assert not _importers_of("pipelines", ("leaderboard", "shelf"))


def test_the_leaderboard_imports_neither_the_shelf_nor_the_latbench_command_line():
    assert not _importers_of("leaderboard", ("shelf", "pipelines.cli"))


def _module_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (at the top or inside a function)."""
    mods = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return {name: {m for m in imports_of(path) if m in mods and m != name} for name, path in mods.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_among_the_pipelines_modules():
    """Counting imports inside functions too: a circle dodged by a late import is still one."""
    assert _circles(_module_graph("pipelines")) == []


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
