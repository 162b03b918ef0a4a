"""Turning a config section, however it arrives, into its checked dataclass (:func:`coerce`,
:func:`check_fields`), or into plain Python containers (:func:`plain`).

The types come from one place, the schema: a config dataclass's annotations, checked by
OmegaConf exactly as when Hydra or ``params.yaml`` merges YAML into it (``OmegaConf.structured``
+ ``merge``). A section built in Python (tests, library callers) meets the same checks, and the
same conversions, as one read from YAML: ``"5"`` for an int field is 5, ``"yes"`` for a bool
field is true, a tuple for a list field is a list. A wrong type is
``ValueError("<dotted.key>: expected <type>, got <value>")``; an unknown key is
``ValueError("<key>: unknown key (known: ...)")``. Value checks (ranges, known names,
cross-field rules) are not types: each section's ``validate_*`` keeps them.

OmegaConf is imported only when a check runs.
"""
from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
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
    """``cfg`` as a checked ``cls`` instance (a new one): ``cfg`` is a ``cls`` instance, ``None``
    (the defaults), a mapping, an OmegaConf node as Hydra hands it over, or another object with
    the same fields. Types are checked and converted against ``cls``'s annotations (module doc)."""
    if cfg is None:
        return cls()
    if not isinstance(cfg, cls):
        cfg = plain(cfg)
        if not isinstance(cfg, Mapping):
            known = [f.name for f in dataclasses.fields(cls)]
            if not all(hasattr(cfg, k) for k in known):
                raise TypeError(f"expected a {cls.__name__} or a mapping, got {type(cfg).__name__}")
            cfg = {k: getattr(cfg, k) for k in known}  # another object with the same fields
    return cls(**checked_fields(cls, cfg))


def check_fields(obj: Any) -> None:
    """Check the fields of the dataclass instance ``obj`` against its annotations and store their
    converted values in place (for ``__post_init__`` and ``validate`` methods; module doc)."""
    for name, value in checked_fields(type(obj), obj).items():
        object.__setattr__(obj, name, value)


def checked_fields(schema: type, cfg: Any) -> dict[str, Any]:
    """The fields of ``cfg`` (a mapping or a ``schema`` instance) merged onto ``schema`` by
    OmegaConf: ``{field: checked value}``, nested sections as their dataclasses. A wrong type or
    an unknown key is a one-line ``ValueError`` naming the dotted key (module doc)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    value = _builtin(cfg)
    try:
        node = OmegaConf.merge(OmegaConf.structured(schema), value)
        out = {}
        for f in dataclasses.fields(schema):
            v = node[f.name]
            out[f.name] = OmegaConf.to_object(v) if OmegaConf.is_config(v) else v
        return out
    except OmegaConfBaseException as e:
        raise ValueError(_message(e, schema, value)) from None


# ---------------------------------------------------------------- the one-line message
def _builtin(v: Any) -> Any:
    """``v`` with dataclass instances as mappings of their fields, NumPy scalars and arrays as
    Python's (OmegaConf takes neither inside a mapping), tuples as lists."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _builtin(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, Mapping):
        return {k: _builtin(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_builtin(x) for x in v]
    if type(v).__module__ == "numpy" and hasattr(v, "tolist"):
        return v.tolist()  # a NumPy scalar as a Python one, an array as a list
    return v


def _message(e: Exception, schema: type, value: Any) -> str:
    """``<dotted.key>: expected <type>, got <value>`` (or ``unknown key``) for OmegaConf's error
    ``e``; OmegaConf's own first line when the key's type cannot be described."""
    from omegaconf.errors import ConfigKeyError

    key = _key(e, schema, value)
    if isinstance(e, ConfigKeyError):
        owner = getattr(e, "object_type", None)
        known = [f.name for f in dataclasses.fields(owner)] if dataclasses.is_dataclass(owner) else []
        return f"{key}: unknown key" + (f" (known: {', '.join(known)})" if known else "")
    tp = _type_at(schema, key)
    expected = _describe(tp) if tp is not _NOT_FOUND else None
    got = _value_at(value, key)
    if expected is not None and got is not _NOT_FOUND:
        return f"{key}: expected {expected}, got {got!r}"
    return f"{key}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"


_NOT_FOUND = object()
_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _parts(key: str) -> list[str | int]:
    return [int(i) if i else name for name, i in _PART.findall(key)]


def _key(e: Exception, schema: type, value: Any, prefix: str = "") -> str:
    """The dotted key OmegaConf's error is about. OmegaConf loses the path of some nested faults
    (a scalar where a list of lists or a section is expected): then merge the fields one by one
    to find the one it rejects."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    full = getattr(e, "full_key", None)
    if isinstance(full, str) and full:
        return prefix + full
    if isinstance(value, Mapping) and dataclasses.is_dataclass(schema):
        for k, v in value.items():
            try:
                OmegaConf.merge(OmegaConf.structured(schema), {k: v})
            except OmegaConfBaseException as sub:
                inner = _unwrap(_hints(schema).get(k))
                if dataclasses.is_dataclass(inner) and isinstance(v, Mapping):
                    return _key(sub, inner, v, f"{prefix}{k}.")
                full = getattr(sub, "full_key", None)
                if isinstance(full, str) and full:
                    return prefix + full
                index = getattr(sub, "key", None)
                return f"{prefix}{k}" + (f"[{index}]" if isinstance(index, int) else "")
    return prefix.rstrip(".") or "?"


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve: describe nothing
        return {}


def _unwrap(tp: Any) -> Any:
    """``Optional[X]`` -> ``X``."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return tp


def _type_at(schema: type, key: str) -> Any:
    tp: Any = schema
    for part in _parts(key):
        tp = _unwrap(tp)
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if isinstance(part, str) and dataclasses.is_dataclass(tp):
            tp = _hints(tp).get(part, _NOT_FOUND)
        elif isinstance(part, str) and origin is dict and len(args) == 2:
            tp = args[1]
        elif isinstance(part, int) and origin is list and args:
            tp = args[0]
        else:
            return _NOT_FOUND
        if tp is _NOT_FOUND:
            return tp
    return tp


def _value_at(value: Any, key: str) -> Any:
    for part in _parts(key):
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return _NOT_FOUND
    return value


_SCALARS = {bool: ("true or false", "booleans"), int: ("an int", "ints"), float: ("a number", "numbers"),
            str: ("a string", "strings")}


def _describe(tp: Any, plural: bool = False) -> str | None:
    """``int`` -> ``an int``; ``list[list[int]]`` -> ``a list of lists of ints``; None for Any."""
    base = _unwrap(tp)
    optional = base is not tp
    origin, args = typing.get_origin(base), typing.get_args(base)
    if base in _SCALARS:
        text = _SCALARS[base][plural]
    elif origin is list:
        inner = _describe(args[0], plural=True) if args else None
        text = ("lists" if plural else "a list") + (f" of {inner}" if inner else "")
    elif origin is dict:
        inner = _describe(args[1], plural=True) if len(args) == 2 else None
        text = ("mappings" if plural else "a mapping") + (f" to {inner}" if inner else "")
    elif dataclasses.is_dataclass(base):
        text = f"{base.__name__} sections" if plural else f"a {base.__name__} section (a mapping)"
    else:
        return None
    return f"{text} or null" if optional and not plural else text
