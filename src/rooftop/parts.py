"""A figure split into named parts (a step's seconds, a chip's bytes, a parameter's training state): a frozen
dataclass of float fields, one per part, in the order they are reported. The part names are types: a subclass
names them once more as a ``Literal`` (its key type), so ``parts["fsdp"]`` and ``parts.fsdp`` are both checked
by mypy and a misspelt part fails at type-check time, not as a silent miss. ``as_dict`` is the serialised form
(the JSON keys, in field order); ``total`` the sum of the parts, added in that order.
"""

from __future__ import annotations

from collections.abc import ItemsView
from typing import Any, ClassVar, Generic, TypeVar

K = TypeVar("K", bound=str)


class Parts(Generic[K]):
    """Base of the part records (each a ``@dataclass(frozen=True, slots=True)`` of float fields, keyed by
    ``K``, the Literal of its field names; a test checks the two agree)."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Any]]  # the subclass's fields, in order (set by @dataclass)

    def __getitem__(self, part: K) -> float:
        value: float = getattr(self, part)
        return value

    def as_dict(self) -> dict[str, float]:
        """The parts by name, in field order (the JSON form)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def items(self) -> ItemsView[str, float]:
        return self.as_dict().items()

    @property
    def total(self) -> float:
        """The sum of the parts, in field order (as ``sum(d.values())`` of the dict they replace)."""
        total: float = sum(getattr(self, name) for name in self.__dataclass_fields__)
        return total
