"""One small registry type for everything that registers itself (generator sources, model
families, exporters, devices, predictors, tracks, ...): adding one is adding one decorated
definition in one file.

A registry that names an entry-point group (``Registry("predictor", entry_points=
"latbench.predictors")``) also takes what installed packages declare there, so a third party
extends the suite without editing it: an entry point ``name = "package.module:Object"`` in the
group registers ``Object`` under ``name`` (or, when loading the module registers it itself with
the decorator, that). Entry points load on the registry's first lookup; one that cannot be
loaded is a one-line :class:`RegistryError` naming it, never skipped in silence.
"""
from __future__ import annotations

from importlib import metadata
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class UnknownName(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; keep it a plain line
        return self.args[0]


class RegistryError(RuntimeError):
    """An entry point of a registry's group that cannot be loaded (one line naming it)."""


class Registry(Generic[T]):
    def __init__(self, kind: str, entry_points: str | None = None):
        self.kind = kind
        self.group = entry_points  # the entry-point group third parties register into
        self._items: dict[str, T] = {}
        self._loaded = entry_points is None

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._items[name] = obj
            return obj

        return deco

    def unregister(self, name: str, obj: T) -> None:
        """Remove ``name`` if it still holds ``obj`` (what a caller registered and now withdraws:
        the user's track folders, read again)."""
        if self._items.get(name) is obj:
            del self._items[name]

    def _load_entry_points(self) -> None:
        if self._loaded:
            return
        self._loaded = True  # before loading: a module loaded here registers through this registry
        for ep in sorted(metadata.entry_points(group=self.group), key=lambda e: e.name):
            try:
                obj = ep.load()
            except Exception as e:  # any failure of a third party's import: one line naming it
                raise RegistryError(f"{self.kind} {ep.name!r} (entry point {ep.value} in group {self.group}): "
                                    f"cannot be loaded: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
            if ep.name not in self._items:
                self._items[ep.name] = obj
            elif self._items[ep.name] is not obj:
                raise RegistryError(f"{self.kind} {ep.name!r} (entry point {ep.value} in group {self.group}): "
                                    f"the name is taken by {self._items[ep.name]!r}")

    def get(self, name: str) -> T:
        self._load_entry_points()
        try:
            return self._items[name]
        except KeyError:
            raise UnknownName(f"unknown {self.kind} {name!r} (known: {', '.join(sorted(self._items))})") from None

    def names(self) -> list[str]:
        self._load_entry_points()
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        self._load_entry_points()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
