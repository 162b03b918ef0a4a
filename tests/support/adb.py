"""Fixtures of the tests whose phones are adbd emulators (tests/adbd_emulator.py): a private adb
server and the exported networks the phones measure, made once per test module. A test module
takes them by importing them: ``from support.adb import adb_server, exported, model``."""
from __future__ import annotations

from pathlib import Path

import pytest

from adbd_emulator import AdbServer, exported_models, model_files


@pytest.fixture(scope="module")
def adb_server():
    srv = AdbServer().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    return exported_models(tmp_path_factory)


@pytest.fixture(scope="module")
def model(exported) -> Path:
    """A NAS-Bench-201 network (32x32 input), fp32 .tflite."""
    return model_files(exported)[0]
