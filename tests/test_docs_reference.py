"""Docs and docstrings are reference, not a lab notebook (DESIGN.md, Conventions).

A module docstring says what the module is for in a few lines; the reference detail lives in
docs/*.md. docs/ is written in the present tense about what the code does: a dated account of
what a session measured belongs to the release it measured (``datasets/<release>/CHANGES.md``),
and measured figures to what the benchmarks, the card and the board regenerate.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("generators", "pipelines", "leaderboard", "kernels", "foundation", "shelf")
MAX_MODULE_DOCSTRING_LINES = 40
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES if (ROOT / pkg).is_dir()
                  for p in (ROOT / pkg).rglob("*.py")
                  if "tests" not in p.relative_to(ROOT).parts and "__pycache__" not in p.parts)


def _docstring_lines(path: Path) -> int:
    """Lines the module docstring spans in the file, its quotes included (0: none)."""
    body = ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0].end_lineno - body[0].lineno + 1
    return 0


def test_the_packages_are_found():
    assert len(_modules()) > 50


def test_no_module_docstring_is_over_40_lines():
    long = {p.relative_to(ROOT).as_posix(): n for p in _modules()
            if (n := _docstring_lines(p)) > MAX_MODULE_DOCSTRING_LINES}
    assert not long, (f"module docstrings over {MAX_MODULE_DOCSTRING_LINES} lines (say what the module "
                      f"is for; move the reference detail to its docs/*.md page): {long}")


@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_docs_carry_no_dates(page: Path):
    dated = [f"{page.name}:{i}: {line.strip()[:120]}"
             for i, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
             if DATE.search(line)]
    assert not dated, ("docs/ is reference: a dated entry belongs in the release's "
                       "datasets/<release>/CHANGES.md\n" + "\n".join(dated))


def test_each_release_has_its_changes():
    releases = [p for p in (ROOT / "datasets").iterdir() if (p / "RELEASE.json").is_file()]
    assert releases
    missing = [p.name for p in releases if not (p / "CHANGES.md").is_file()]
    assert not missing, f"releases without a CHANGES.md (their history): {missing}"
