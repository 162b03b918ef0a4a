"""Turning a config section, however it arrives, into its typed dataclass (:func:`coerce`), or
into plain Python containers (:func:`plain`)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


def plain(cfg: Any) -> Any:
    """An OmegaConf node (as Hydra hands a section over) as plain dicts and lists, resolved;
    anything else as it is. OmegaConf is imported only when ``cfg`` is one of its nodes."""
    if type(cfg).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(cfg, resolve=True)
    return cfg


def coerce(cls: type[T], cfg: Any) -> T:
    """``cfg`` as a ``cls`` instance: the instance itself, ``None`` (the defaults), a mapping, or an
    OmegaConf node as Hydra hands it over. An unknown key is ``ValueError("<key>: unknown key ...")``."""
    if isinstance(cfg, cls):
        return cfg
    if cfg is None:
        return cls()
    cfg = plain(cfg)
    if not isinstance(cfg, Mapping):
        known = [f.name for f in fields(cls)]
        if all(hasattr(cfg, k) for k in known):  # another object with the same fields
            return cls(**{k: getattr(cfg, k) for k in known})
        raise TypeError(f"expected a {cls.__name__} or a mapping, got {type(cfg).__name__}")
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(cfg) - set(known))
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown key (known: {', '.join(known)})")
    return cls(**dict(cfg))
