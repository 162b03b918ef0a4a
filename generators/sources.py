"""The registry of generator sources: each turns its own config section into IR graphs.

A source is registered with ``register_source(name, Config, validate_config, generate)``,
which enters a :class:`Source` with
- ``Config``: a dataclass (Hydra structured config) for its section under ``generator.<name>``;
- ``validate_config(cfg)``: ``cfg`` (a ``Config``, a mapping or an OmegaConf node) as a checked
  ``Config``: types from the schema (``foundation.configs.coerce``), values by the source; raises
  ``ValueError("<field>: <what is wrong>")`` (one line; the config loader prefixes
  ``generator.<name>.``);
- ``generate(cfg, seed) -> Iterator[Graph]``: deterministic for the same config and seed,
  each graph with ``source`` set to the source name and ``meta`` saying how it was made
  (seed, index, family/space ...).
A random space whose network ``i`` is a pure function of (config, seed, i) registers with
``register_space(name, Config, validate_config, build_network)``: its ``generate`` yields
``build_network(cfg, seed, i)`` for ``i`` in ``range(cfg.n)``.
The ``generate`` stage iterates over the sources selected in config; adding a source is
adding one module that registers itself (and importing it in ``generators/catalog.py``).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from foundation.registry import Registry


@dataclass(frozen=True)
class Source:
    """A generator source as the registry holds it (see the module doc)."""

    name: str
    Config: type
    validate_config: Callable[[Any], Any]
    generate: Callable[[Any, int], Iterator[Any]]
    description: str = ""  # one line: what the source generates


SOURCES: Registry[Source] = Registry("generator source")


def register_source(name: str, config: type, validate_config: Callable[[Any], Any],
                    generate: Callable[[Any, int], Iterator[Any]], description: str = "") -> Source:
    """Enters the source ``name`` in :data:`SOURCES` and returns it."""
    return SOURCES.register(name)(Source(name, config, validate_config, generate, description))


def register_space(name: str, config: type, validate_config: Callable[[Any], Any],
                   build_network: Callable[[Any, int, int], Any], description: str = "") -> Source:
    """Enters the random space ``name``: networks ``0 .. cfg.n - 1`` of ``build_network(cfg, seed, i)``."""
    def generate(cfg: Any, seed: int) -> Iterator[Any]:
        cfg = validate_config(cfg)
        seed = checked_seed(seed)
        for i in range(cfg.n):
            yield build_network(cfg, seed, i)

    return register_source(name, config, validate_config, generate, description)


def checked_seed(seed: Any) -> int:
    """``seed`` as an int (a source's ``generate`` takes any integral value); ValueError otherwise."""
    try:
        return operator.index(seed)
    except TypeError:
        raise ValueError(f"seed must be an int, got {seed!r}") from None
