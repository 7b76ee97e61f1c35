"""The order a budgeted collect measures a zoo in: breadth first, so a collect cut short holds every family.

A zoo config lists its variants family by family and its sampled blocks op family by op family; measured in that
order, a collect stopped after a third of its time has ResNets and no transformer. `coverage_order` takes the
architecture variants first (each one's profile gives a span for every node of a real-shaped graph, and whole models
are what the calibration fits), one family at a time in turn, then the sampled one-kernel blocks, one op family at a
time in turn; within a family the file's order is kept.

    >>> [s.name for s in coverage_order(specs)]   # resnet18, vit_s, bert_2l, resnet50, vit_b, ..., conv_0, mm_0, ...
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Protocol, TypeVar

from hase.zoo.blocks import is_sampled
from hase.zoo.registry import ModelSpec


class _HasFamily(Protocol):
    @property
    def family(self) -> str: ...


F = TypeVar("F", bound=_HasFamily)


def round_robin(items: Sequence[F]) -> list[F]:
    """The items (model specs or sources) one family at a time in turn: families in order of first appearance,
    each family's items in their order."""
    by_family: dict[str, list[F]] = {}
    for s in items:
        by_family.setdefault(s.family, []).append(s)
    turns = itertools.zip_longest(*by_family.values())
    return [s for turn in turns for s in turn if s is not None]


def coverage_order(specs: Sequence[ModelSpec]) -> list[ModelSpec]:
    """Architecture variants round-robin over their families, then sampled blocks round-robin over theirs."""
    arch = [s for s in specs if not is_sampled(s.family)]
    sampled = [s for s in specs if is_sampled(s.family)]
    return round_robin(arch) + round_robin(sampled)
