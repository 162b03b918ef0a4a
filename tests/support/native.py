"""The native runtime for the tests that run it: ``native/build.sh``, called by their fixtures."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def build_native() -> str:
    """Builds native/ (idempotent, quick when up to date) and returns what the script printed: its
    last line is the binary's path. A failed build fails the asking test with the script's error."""
    proc = subprocess.run([str(ROOT / "native" / "build.sh")], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"native/build.sh failed: {proc.stderr.strip()[-2000:]}")
    return proc.stdout
