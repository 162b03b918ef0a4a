"""nn-Meter's model-zoo variant families (MobiSys'21, Sec. 3.3).

Twelve ImageNet CNN families, each written once as a builder over the IR (one module per
family, registered in ``FAMILIES``); a sampler turns the builder into the reference
network or into a variant with every layer's width redrawn from [0.2, 1.8] x the
reference and every spatial kernel from {1, 3, 5, 7, 9}. Three transformer families (vit,
mobilevit, efficientformer) also redraw depths, heads and MLP ratios (``sampler.py``).
The families of Qualcomm AI Hub's networks (issue 57) follow: MobileNetV3-Small, RegNetY-800MF
and EfficientNetV2-S (CNNs; EfficientNetV2 also redraws its stage depths), ConvNeXt-T (depths
and MLP ratios too), and the transformers MobileViT-S, LeViT-128S and BEiT-B/16.
``source.py`` exposes them as the ``zoo`` generator source.

Every module of this package other than the infrastructure below is a family and is
imported here, so adding a family is adding one file.
"""
from __future__ import annotations

import importlib
import pkgutil

from .registry import FAMILIES, Family, register_family  # noqa: F401
from .sampler import ConfiguredSampler, ReferenceSampler, Sampler, VariantSampler  # noqa: F401

_INFRASTRUCTURE = {"registry", "sampler", "source"}

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in _INFRASTRUCTURE and not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")

from .source import NNMETER_FAMILIES, ZooConfig, ZooSource, configured, reference, validate_config, variant  # noqa: E402,F401
