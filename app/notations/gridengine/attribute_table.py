"""The Grid Engine attribute table (``qconf -sc``) as a whole.

A :class:`ComplexTable` adds the rules that span rows: names and shortcuts are unique
across both columns, built-in attributes cannot be deleted and keep their type (the string
family STRING/CSTRING/RESTRING may be switched among itself).

The 6.2u5 default table is built from app/notations/gridengine/default_table.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from app.notations.errors import did_you_mean
from app.notations.gridengine.default_table import DEFAULT_COMPLEX_ROWS
from app.notations.gridengine.definitions import (
    STRING_FAMILY,
    ComplexDefinition,
    ComplexError,
    definitions_from_rows,
)

#: Names of the 51 attributes of the 6.2u5 default table (all of them are built-in).
BUILTIN_NAMES: frozenset[str] = frozenset(str(row["name"]) for row in DEFAULT_COMPLEX_ROWS)


@dataclass(frozen=True)
class ComplexTable:
    """The attribute table: definitions with unique names/shortcuts, and which are built-in."""

    definitions: tuple[ComplexDefinition, ...]
    builtin_names: frozenset[str] = field(default=frozenset())
    _index: Mapping[str, ComplexDefinition] = field(
        init=False, repr=False, compare=False, hash=False
    )
    _names: Mapping[str, ComplexDefinition] = field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        index: dict[str, ComplexDefinition] = {}
        for definition in self.definitions:
            for word in dict.fromkeys((definition.name, definition.shortcut)):
                other = index.get(word)
                if other is not None:
                    raise ComplexError(
                        f"{word!r} of attribute {definition.name!r} is already used as name "
                        f"or shortcut of {other.name!r}",
                        text=definition.to_line(),
                        expected="names and shortcuts unique across both columns",
                    )
                index[word] = definition
        object.__setattr__(self, "_index", index)
        # Names take precedence over shortcuts; a dict keeps lookups O(1) on the
        # evaluator's hot path (thousands per scheduled job).
        object.__setattr__(self, "_names", {d.name: d for d in self.definitions})

    def __iter__(self) -> Iterator[ComplexDefinition]:
        return iter(self.definitions)

    def __len__(self) -> int:
        return len(self.definitions)

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self.lookup(word) is not None

    def lookup(self, word: str) -> ComplexDefinition | None:
        """The definition whose name, or else shortcut, is ``word``."""
        definition = self._names.get(word)
        return definition if definition is not None else self._index.get(word)

    def __getitem__(self, word: str) -> ComplexDefinition:
        definition = self.lookup(word)
        if definition is None:
            raise KeyError(word)
        return definition

    def resolve(
        self, word: str, *, text: str | None = None, position: int = 0
    ) -> ComplexDefinition:
        """Like :meth:`lookup`, but an unknown word raises :class:`ComplexError` suggesting
        the nearest name or shortcut."""
        definition = self.lookup(word)
        if definition is None:
            raise ComplexError(
                f"unknown resource {word!r}{did_you_mean(word, self._index)}",
                text=word if text is None else text,
                position=position,
                expected="the name or shortcut of a complex attribute",
            )
        return definition

    def to_text(self) -> str:
        """The table as ``qconf -sc`` lines sorted by name."""
        lines = sorted(definition.to_line() for definition in self.definitions)
        return "\n".join(lines) + ("\n" if lines else "")

    @classmethod
    def from_text(cls, text: str, *, builtin_names: frozenset[str] = frozenset()) -> ComplexTable:
        """Lines as printed by :meth:`to_text` (``#`` comments and blank lines skipped)."""
        definitions = []
        for line in text.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                definitions.append(ComplexDefinition.from_line(line))
        return cls(tuple(definitions), builtin_names=builtin_names)


def default_table(*, sge60: bool = False) -> ComplexTable:
    """The 6.2u5 default table (51 rows); ``sge60=True`` drops the five rows 6.2 added."""
    rows = [row for row in DEFAULT_COMPLEX_ROWS if row["in_sge60_default"] or not sge60]
    definitions = definitions_from_rows(rows)
    return ComplexTable(definitions, builtin_names=frozenset(d.name for d in definitions))


def check_table_change(old: ComplexTable, new: ComplexTable) -> None:
    """Reject a table change that deletes a built-in attribute of ``old`` or changes its type
    (other than within the string family STRING/CSTRING/RESTRING)."""
    for name in sorted(old.builtin_names):
        before = old.lookup(name)
        after = next((d for d in new.definitions if d.name == name), None)
        if before is None:
            continue
        if after is None:
            raise ComplexError(
                f"built-in attribute {name!r} cannot be deleted",
                text=before.to_line(),
                expected="the built-in attribute kept in the table",
            )
        if after.type is not before.type and not (
            before.type in STRING_FAMILY and after.type in STRING_FAMILY
        ):
            raise ComplexError(
                f"the type of built-in attribute {name!r} cannot change from "
                f"{before.type.value} to {after.type.value}",
                text=after.to_line(),
                expected=(
                    "one of STRING, CSTRING, RESTRING"
                    if before.type in STRING_FAMILY
                    else f"type {before.type.value}"
                ),
            )
