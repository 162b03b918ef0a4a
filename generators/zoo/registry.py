"""The registry of model-zoo families: one module per family registers its builder.

A family is one reference architecture written once as a builder ``build(g, x, choose)``
that adds the network to graph ``g`` after input ``x`` and returns the logits reference.
Every layer width and spatial kernel size goes through ``choose`` (see ``sampler.py``): a
reference sampler gives back the reference values, a variant sampler redraws them, so
the same code yields the reference network and all of its variants.

Adding a family is adding one file ``generators/zoo/<family>.py`` with::

    @register_family("name", reference="Name-X (torchvision name_x)", params=1234)
    def build(g: Graph, x: str, choose: Sampler) -> str:
        ...
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..ir import Graph
from foundation.registry import Registry

INPUT_SHAPE = [1, 3, 224, 224]  # the families' input unless one registers its own input_size
NUM_CLASSES = 1000

Builder = Callable[[Graph, str, Any], str]  # build(g, x, choose) -> logits reference


@dataclass(frozen=True)
class Family:
    name: str
    build: Builder
    reference: str  # which network the reference is, in words
    params: int | None = None  # its well-known parameter count (None: no agreed number)
    input_size: int = 224  # input height = width (MobileViT is defined at 256)

    @property
    def input_shape(self) -> list[int]:
        return [1, 3, self.input_size, self.input_size]


FAMILIES: Registry[Family] = Registry("model family", entry_points="latbench.model_families")


def register_family(name: str, reference: str, params: int | None = None,
                    input_size: int = 224) -> Callable[[Builder], Builder]:
    """Register ``build`` as family ``name``; the function itself is returned unchanged."""

    def deco(build: Builder) -> Builder:
        FAMILIES.register(name)(Family(name=name, build=build, reference=reference, params=params, input_size=input_size))
        return build

    return deco
