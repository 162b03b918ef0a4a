"""Imports every generator source so each registers itself in ``SOURCES``.

The ``generate`` stage runs the sources in name order. Sources keep heavy
imports (torch, pytorchcv) inside ``generate`` so that loading the catalog stays cheap.
"""
from . import synthetic  # noqa: F401
from .zoo import source as _zoo  # noqa: F401
from . import nasbench201  # noqa: F401
from . import transformer  # noqa: F401
from .importers import pytorch as _pytorch  # noqa: F401
from .sources import SOURCES  # noqa: F401
