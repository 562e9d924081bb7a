"""The IR printer.  Its output parses back to the same IR (see :mod:`.parser`).

Every op prints in one generic form derived from its definition::

    %r = dialect.op %a, %b grp(%c, %d) {attr = 1} : result-types {region} {region} loc(...)

Operands of the fixed groups, and of a variadic group when it is the only one, are
listed in order; optional groups (and variadic ones when there are several) are written
as ``name(...)``, so ``tile.load %p mask(%m)`` says which operand is the mask.  Operand types are not printed: every value is defined before it is used.
Ops may provide ``print_custom``/``parse_custom`` for a friendlier form (``func.func``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from .attributes import ATTRIBUTE_ALIASES, DialectAttribute, format_attribute
from .opdef import IsolatedFromAbove, is_default_attribute
from .operation import Block, Operation, Region
# format_type lives with the types (str() of a type needs no printer); re-exported here.
from .types import TileType, format_result_types, format_type  # noqa: F401
from .values import Value

_NAME_HINT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def format_location(location: Any) -> str:
    from ..errors import SourceLocation
    from .attributes import format_string

    if isinstance(location, SourceLocation):
        return f"loc({format_string(location.file)}:{location.line}:{location.column})"
    return f"loc({format_string(str(location))})"


class Printer:
    """Prints ops with stable value names: name hints where values have them, else numbers."""

    def __init__(self, print_locations: bool = False, indent: str = "  ", layout_aliases: bool = False):
        self.print_locations = print_locations
        #: Write each tile layout once, at the top (``#blocked0 = #gpu.blocked<...>``), and
        #: its alias in the types, as MLIR does: distributed IR stays readable.
        self.layout_aliases = layout_aliases
        self.indent_unit = indent
        self._lines: list[str] = []
        self._names: dict[Value, str] = {}
        self._used: set[str] = set()
        self._counter = 0

    # -- naming -----------------------------------------------------------------------
    def _reset_names(self) -> None:
        self._names = {}
        self._used = set()
        self._counter = 0

    def name_of(self, value: Value) -> str:
        name = self._names.get(value)
        if name is None:
            # A value printed before its definition (an op printed alone): number it.
            name = self._assign(value)
        return name

    def _assign(self, value: Value) -> str:
        hint = value.name_hint
        if hint and _NAME_HINT.match(hint):
            name, suffix = hint, 0
            while name in self._used:
                suffix += 1
                name = f"{hint}_{suffix}"
        else:
            while str(self._counter) in self._used:
                self._counter += 1
            name = str(self._counter)
            self._counter += 1
        self._used.add(name)
        self._names[value] = "%" + name
        return "%" + name

    # -- output -----------------------------------------------------------------------
    def emit(self, depth: int, text: str) -> None:
        self._lines.append(self.indent_unit * depth + text)

    def print_module_text(self, module: Operation) -> str:
        if not self.layout_aliases:
            return self._module_text(module)
        aliases = layout_aliases_of(module)
        header, defined = [], {}
        for layout, alias in aliases.items():
            # A definition refers to the layouts defined before it (a slice to its parent).
            token = ATTRIBUTE_ALIASES.set(defined)
            try:
                header.append(f"{alias} = {format_attribute(layout)}\n")
            finally:
                ATTRIBUTE_ALIASES.reset(token)
            defined = {**defined, layout: alias}
        token = ATTRIBUTE_ALIASES.set(aliases)
        try:
            body = self._module_text(module)
        finally:
            ATTRIBUTE_ALIASES.reset(token)
        return "".join(header) + body

    def _module_text(self, module: Operation) -> str:
        self._lines = []
        self._reset_names()
        bare = not module.attributes and not (self.print_locations and module.location is not None)
        if bare and module.name == "builtin.module":
            body = module.regions[0].block
            # A lone module inside would read back as the top-level module itself.
            bare = not (len(body) == 1 and body.first_op.name == "builtin.module")
        if module.name == "builtin.module" and bare:
            for op in module.regions[0].block:
                self.print_op(op, 0)
        else:
            self.print_op(module, 0)
        # An empty module is the empty text (which parses back to an empty module).
        return "\n".join(self._lines) + "\n" if self._lines else ""

    def print_operation_text(self, op: Operation) -> str:
        self._lines = []
        self._reset_names()
        self.print_op(op, 0)
        return "\n".join(self._lines)

    def print_op(self, op: Operation, depth: int) -> None:
        if op.regions and not op.results and op.has_trait(IsolatedFromAbove):
            # Names inside an isolated op (a function) are its own: number them from 0
            # in each function, and keep the enclosing names for what follows.
            saved = self._names, self._used, self._counter
            self._reset_names()
            try:
                self._print_op(op, depth)
            finally:
                self._names, self._used, self._counter = saved
            return
        self._print_op(op, depth)

    def _print_op(self, op: Operation, depth: int) -> None:
        custom = getattr(type(op), "print_custom", None)
        if custom is not None:
            custom(op, self, depth)
            return
        head = self.format_op_head(op)
        if not op.regions:
            self.emit(depth, head + self.location_suffix(op))
            return
        self.emit(depth, head + " {")
        for index, region in enumerate(op.regions):
            if index:
                self.emit(depth, "} {")
            self.print_region_body(region, depth)
        self.emit(depth, "}" + self.location_suffix(op))

    def format_op_head(self, op: Operation) -> str:
        parts = []
        if op.results:
            parts.append(", ".join(self._assign(r) for r in op.results) + " = ")
        parts.append(op.name)
        operand_text = self.format_operands(op)
        if operand_text:
            parts.append(" " + operand_text)
        attributes = printed_attributes(op)
        if attributes:
            parts.append(" " + self.format_attribute_dict(attributes))
        if op.results:
            parts.append(" : " + ", ".join(format_type(r.type) for r in op.results))
        return "".join(parts)

    def format_operands(self, op: Operation) -> str:
        definition = op.definition
        if not definition.variable_operand_groups:
            return ", ".join(self.name_of(v) for v in op.operands)
        positional, keyworded = [], []
        for group, values in op.operand_groups():
            if definition.is_keyworded(group):
                if values:
                    keyworded.append(f"{group.name}({', '.join(self.name_of(v) for v in values)})")
            else:
                positional.extend(self.name_of(v) for v in values)
        return " ".join(x for x in (", ".join(positional), " ".join(keyworded)) if x)

    def format_attribute_dict(self, attributes: dict[str, Any]) -> str:
        items = ", ".join(f"{key} = {format_attribute(attributes[key])}" for key in sorted(attributes))
        return "{" + items + "}"

    def location_suffix(self, op: Operation) -> str:
        if self.print_locations and op.location is not None:
            return " " + format_location(op.location)
        return ""

    def print_region_body(self, region: Region, depth: int) -> None:
        # The entry block's header may be left out only when nothing could be confused:
        # with several blocks, an empty entry block without arguments would otherwise
        # vanish on parsing (the first label read would start the entry block).
        several = len(region.blocks) > 1
        for index, block in enumerate(region.blocks):
            if index or block.arguments or several:
                self.print_block_header(block, index, depth)
            for op in block:
                self.print_op(op, depth + 1)

    def print_block_header(self, block: Block, index: int, depth: int) -> None:
        args = ", ".join(f"{self._assign(a)}: {format_type(a.type)}" for a in block.arguments)
        self.emit(depth, f"^bb{index}({args}):" if block.arguments else f"^bb{index}:")

    def format_block_arguments(self, block: Block) -> str:
        return ", ".join(f"{self._assign(a)}: {format_type(a.type)}" for a in block.arguments)


def printed_attributes(op: Operation) -> dict[str, Any]:
    """``op``'s attributes without those equal to their declared default.

    Ops never store a default (see :meth:`.operation.Operation.set_attr`); this keeps
    the text canonical even when a pass wrote one into ``op.attributes`` directly."""
    return {k: v for k, v in op.attributes.items() if not is_default_attribute(type(op), k, v)}


def layout_aliases_of(module: Operation) -> dict:
    """Each tile layout of ``module``'s values, in order of first appearance, with its
    alias: the layout's kind and a number (``#blocked0``, ``#mma1``...)."""
    aliases: dict = {}
    counts: dict[str, int] = {}

    def name(layout: Any) -> None:
        if layout in aliases:
            return
        for field in dataclasses.fields(layout) if dataclasses.is_dataclass(layout) else ():
            inner = getattr(layout, field.name)
            if isinstance(inner, DialectAttribute):
                name(inner)  # a slice's parent first: its definition refers to it
        kind = re.sub(r"\W", "_", layout.attribute_name.rsplit(".", 1)[-1])
        aliases[layout] = f"#{kind}{counts.get(kind, 0)}"
        counts[kind] = counts.get(kind, 0) + 1

    def note(type_: Any) -> None:
        layout = getattr(type_, "layout", None) if isinstance(type_, TileType) else None
        if layout is None:
            tile = getattr(type_, "tile", None)  # a block pointer's tile
            layout = getattr(tile, "layout", None) if isinstance(tile, TileType) else None
        if isinstance(layout, DialectAttribute):
            name(layout)

    for op in module.walk():
        for region in op.regions:
            for block in region.blocks:
                for argument in block.arguments:
                    note(argument.type)
        for result in op.results:
            note(result.type)
    return aliases


def print_ir(op: Operation, print_locations: bool = False, layout_aliases: bool = False) -> str:
    """The text of a module (or any op); parse it back with :func:`.parser.parse_module`.
    ``layout_aliases``: write each tile layout once, at the top, and an alias in the
    types (``tile<128x64xf32, #blocked0>``)."""
    return Printer(print_locations=print_locations, layout_aliases=layout_aliases).print_module_text(op)
