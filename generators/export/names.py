"""Identifiers the exporters give nodes (TF placeholder names, torch submodule attributes)."""
from __future__ import annotations


def unique_name(base: str, taken: set[str]) -> str:
    """``base``, else ``base_1``, ``base_2``...: the first one not in ``taken``, which it joins
    (IR names may collide once sanitised: "a/b" and "a_b")."""
    name, k = base, 1
    while name in taken:
        name = f"{base}_{k}"
        k += 1
    taken.add(name)
    return name
