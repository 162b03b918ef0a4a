"""Bare packages: a package whose submodules import while its ``__init__`` does not run yet.

ExecuTorch's measuring processes need a few light submodules of packages whose ``__init__``
imports far more: ``executorch.exir``'s is the whole compiler (torch.export passes,
torch._dynamo, torchao), ``executorch.devtools``' the Inspector and pandas (whose allocator
starts a thread). :func:`bare_package` installs such a package without running its
``__init__``; the first name asked of it that its ``__init__`` defines runs it then
(:func:`whole_package`), so code that needs the whole package still gets it.
"""
from __future__ import annotations

import sys
from typing import Any

def bare_package(name: str) -> None:
    """Make the package ``name`` bare in this process unless it is imported already: its
    submodules import, its ``__init__`` runs only when a name it defines is first asked for
    (``from executorch.exir import to_edge``: :func:`whole_package`), so code that needs the
    whole package still gets it."""
    import importlib.util
    import types

    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    bare = types.ModuleType(name)
    bare.__path__ = list(spec.submodule_search_locations)
    bare.__spec__, bare.__package__, bare.__file__ = spec, name, spec.origin
    bare.__dict__[_BARE] = True

    def __getattr__(attr: str) -> Any:  # PEP 562: a name the bare package does not hold yet
        import importlib

        if importlib.util.find_spec(f"{name}.{attr}") is not None:
            return importlib.import_module(f"{name}.{attr}")
        whole_package(name)
        try:
            return bare.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    bare.__getattr__ = __getattr__
    sys.modules[name] = bare


_BARE = "_latbench_bare"


def bare_exir() -> None:
    """``executorch.exir`` as a bare package (:func:`bare_package`): its submodules (the warnings
    the runtime's bindings import, the program schema read_program uses) import, its ``__init__``
    does not run. That ``__init__`` imports ExecuTorch's whole compiler (torch.export passes,
    torch._dynamo, torchao): seconds of a measuring process's start that a deployed runtime never
    spends, and nothing the runtime calls."""
    bare_package("executorch.exir")


def whole_package(name: str) -> None:
    """Run the ``__init__`` of a package :func:`bare_package` left bare (nothing when it is whole).
    The package object stays the same, with the submodules imported so far."""
    mod = sys.modules.get(name)
    if mod is not None and mod.__dict__.pop(_BARE, False):
        mod.__dict__.pop("__getattr__", None)
        mod.__spec__.loader.exec_module(mod)


__all__ = ["bare_exir", "bare_package", "whole_package"]
