"""What the profile tests share: a quick measure protocol and a tiny convolutional network."""
from __future__ import annotations

from typing import Any

from pipelines.config import compose, validate


def quick_cfg() -> Any:
    """The default configuration with two e2e processes (enough for an interval, quick), the
    load recorded but not checked (``--allow-load``): the shared test machine may be busy at any
    moment, and a test of the load check turns it on and makes the load it checks."""
    c = validate(compose([]))
    c.measure.processes = 2
    c.measure.stopping.max_processes = 2
    c.measure.load.check = False
    return c


def tiny_conv_net() -> Any:
    """conv 3->8 (3x3), relu, global average pooling, flatten, linear 8->10 (torch, eval mode)."""
    import torch

    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                               torch.nn.Flatten(), torch.nn.Linear(8, 10)).eval()
