"""What a worker program gives the zygote (:mod:`pipelines.runners.zygote`): its own module, so
that the worker (:func:`pipelines.runners.worker.forkable`) and the zygote both read it without
importing each other."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence


@dataclass(frozen=True)
class Forkable:
    """What a worker program gives the zygote. ``preload`` imports what every child shares (it
    must start no thread) and returns the libraries' versions; ``main(argv)`` is the worker in a
    forked child (its meta says ``process_start: "zygote"``); ``env`` is added to the zygote's
    environment; ``jemalloc``: the zygote runs on jemalloc (:mod:`.allocator`)."""

    name: str  # what errors and warnings call it ("the torch zygote")
    preload: Callable[[], dict[str, str]]
    main: Callable[[Sequence[str]], int]
    env: dict[str, str] = field(default_factory=dict)
    jemalloc: bool = False
