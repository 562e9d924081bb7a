"""The IR parser: the inverse of :mod:`.printer`.

Malformed text raises :class:`~polytile.errors.IRParseError` with the line, the column and
the offending line under a caret.  Values must be defined before they are used (regions
are structured), and every name is scoped to the region that defines it.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable

from ..errors import IRParseError, SourceLocation, UnknownNameError
from .attributes import SymbolRef, float_from_bits
from .opdef import IsolatedFromAbove
from .operation import Block, Operation, Region
from .registry import IR_REGISTRY
from .types import (
    SCALAR_TYPES,
    BlockPointerType,
    FunctionType,
    PointerType,
    TileType,
    Type,
)
from .values import Value

_SPACE = re.compile(r"(?:\s+|//[^\n]*)+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.$]*")
_VALUE = re.compile(r"%([A-Za-z0-9_.$-]+)")
_BLOCK = re.compile(r"\^([A-Za-z0-9_]+)")
_NUMBER = re.compile(r"-?(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)")
_DIMS = re.compile(r"((?:\d+x)+)")
_HEX_BITS = re.compile(r"0x[0-9a-fA-F]{1,16}")
_STRING_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}

#: The deepest nesting of regions the parser accepts. The verifier, the printer and the
#: passes walk regions recursively; kernels nest a few levels (a loop in a branch in a
#: loop), and 200 keeps every walk well inside Python's recursion limit.
MAX_REGION_DEPTH = 200


class Parser:
    def __init__(self, text: str, source_name: str = "<ir>", locate: bool = False):
        self.text = text
        self.source_name = source_name
        #: Give ops without ``loc(...)`` their place in this text, as mlir-opt does, so
        #: that verifier errors on a hand-written IR file point into it.
        self.locate = locate
        self.pos = 0
        #: One scope per region being parsed: name -> (value, where it was defined).
        self._scopes: list[dict[str, tuple[Value, int]]] = []
        #: Per scope: whether it is the region of an IsolatedFromAbove op, whose names
        #: start afresh (two functions may both define %0; a printed function does).
        self._isolated: list[bool] = []
        #: The classes of the ops being parsed, innermost last (their regions' owners).
        self._op_stack: list[type[Operation]] = []
        self._region_depth = 0
        #: ``#name = <attribute>`` definitions before the first op (layout aliases).
        self.aliases: dict[str, Any] = {}

    # -- low level --------------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> None:
        pos = self.pos if pos is None else pos
        if not self.text[pos:].strip():
            pos = len(self.text[:pos].rstrip())  # at end of input: point after the last token
        line = self.text.count("\n", 0, pos) + 1
        line_start = self.text.rfind("\n", 0, pos) + 1
        line_end = self.text.find("\n", pos)
        source_line = self.text[line_start : line_end if line_end >= 0 else len(self.text)]
        raise IRParseError(message, self.source_name, line, pos - line_start + 1, source_line)

    def skip_space(self) -> None:
        m = _SPACE.match(self.text, self.pos)
        if m:
            self.pos = m.end()

    def at_end(self) -> bool:
        self.skip_space()
        return self.pos >= len(self.text)

    def peek_is(self, literal: str) -> bool:
        self.skip_space()
        return self.text.startswith(literal, self.pos)

    def accept(self, literal: str) -> bool:
        if self.peek_is(literal):
            self.pos += len(literal)
            return True
        return False

    def expect(self, literal: str, what: str = "") -> None:
        if not self.accept(literal):
            self.error(f"expected '{literal}'{' ' + what if what else ''}, found {self._describe_here()}")

    def _describe_here(self) -> str:
        self.skip_space()
        if self.pos >= len(self.text):
            return "end of input"
        snippet = self.text[self.pos : self.pos + 12].split("\n")[0]
        return f"'{snippet}'"

    def match(self, pattern: re.Pattern) -> re.Match | None:
        self.skip_space()
        m = pattern.match(self.text, self.pos)
        if m:
            self.pos = m.end()
        return m

    def parse_identifier(self, what: str = "an identifier") -> str:
        m = self.match(_IDENT)
        if not m:
            self.error(f"expected {what}, found {self._describe_here()}")
        return m.group(0)

    def peek_identifier(self) -> str | None:
        self.skip_space()
        m = _IDENT.match(self.text, self.pos)
        return m.group(0) if m else None

    def parse_string(self) -> str:
        self.skip_space()
        if not self.text.startswith('"', self.pos):
            self.error(f"expected a string, found {self._describe_here()}")
        out, i = [], self.pos + 1
        while i < len(self.text):
            ch = self.text[i]
            if ch == '"':
                self.pos = i + 1
                return "".join(out)
            if ch == "\n":
                break
            if ch == "\\":
                nxt = self.text[i + 1 : i + 2]
                if nxt == "x":
                    try:
                        out.append(chr(int(self.text[i + 2 : i + 4], 16)))
                    except ValueError:
                        self.error("bad \\x escape in string", i)
                    i += 4
                    continue
                if nxt not in _STRING_ESCAPES:
                    self.error(f"unknown escape '\\{nxt}' in string", i)
                out.append(_STRING_ESCAPES[nxt])
                i += 2
                continue
            out.append(ch)
            i += 1
        self.error("unterminated string", self.pos)
        raise AssertionError

    # -- types ------------------------------------------------------------------------
    def parse_type(self) -> Type:
        self.skip_space()
        start = self.pos
        if self.peek_is("("):
            return self._parse_function_type()
        if self.accept("!"):
            name = self.parse_identifier("a type name after '!'")
            try:
                cls = IR_REGISTRY.type(name)
            except UnknownNameError as exc:
                self.error(str(exc), start)
            self.expect("<", f"after '!{name}'")
            result = cls.parse_parameters(self)
            self.expect(">", f"to close '!{name}<'")
            return result
        name = self.parse_identifier("a type")
        scalar = SCALAR_TYPES.get(name)
        if scalar is not None:
            return scalar
        if name == "ptr":
            self.expect("<", "after 'ptr'")
            pointee = self.parse_type()
            space, const = 1, False
            while self.accept(","):
                if self.peek_identifier() == "const":
                    self.parse_identifier()
                    const = True
                else:
                    space = self.parse_integer("an address space or 'const'")
            self.expect(">", "to close 'ptr<'")
            return PointerType(pointee, space, const)
        if name in ("tile", "block_ptr"):
            self.expect("<", f"after '{name}'")
            dims = self.match(_DIMS)
            if not dims:
                self.error(f"expected the shape of the {name}, like '128x64x' before the element type")
            shape = tuple(int(d) for d in dims.group(1).split("x")[:-1])
            element = self.parse_type()
            layout = None
            if self.accept(","):
                layout = self.parse_attribute_value()
            self.expect(">", f"to close '{name}<'")
            try:
                tile = TileType(shape, element, layout)
            except ValueError as exc:
                self.error(str(exc), start)
            return tile if name == "tile" else BlockPointerType(tile)
        known = list(SCALAR_TYPES) + ["ptr", "tile", "block_ptr"]
        self.error(str(UnknownNameError("type", name, known)), start)
        raise AssertionError

    def _parse_function_type(self) -> FunctionType:
        inputs = self._parse_type_list_in_parens()
        self.expect("->", "in a function type")
        return FunctionType(tuple(inputs), tuple(self.parse_result_types()))

    def _parse_type_list_in_parens(self) -> list[Type]:
        self.expect("(")
        types: list[Type] = []
        if not self.accept(")"):
            types.append(self.parse_type())
            while self.accept(","):
                types.append(self.parse_type())
            self.expect(")")
        return types

    def parse_result_types(self) -> list[Type]:
        """``i32`` or ``(i32, f32)`` or ``()``."""
        if self.peek_is("("):
            return self._parse_type_list_in_parens()
        return [self.parse_type()]

    # -- attributes -------------------------------------------------------------------
    def parse_integer(self, what: str = "an integer") -> int:
        self.skip_space()
        start = self.pos
        m = self.match(_NUMBER)
        if not m or any(c in m.group(0) for c in ".eE") and not m.group(0).lower().startswith(("0x", "-0x")):
            self.error(f"expected {what}, found {self._describe_here()}", start)
        text = m.group(0)
        return int(text, 16) if text.lower().lstrip("-").startswith("0x") else int(text)

    def parse_attribute_value(self) -> Any:
        self.skip_space()
        start = self.pos
        if self.peek_is('"'):
            return self.parse_string()
        if self.accept("["):
            items = []
            if not self.accept("]"):
                items.append(self.parse_attribute_value())
                while self.accept(","):
                    items.append(self.parse_attribute_value())
                self.expect("]", "to close the list")
            return tuple(items)
        if self.accept("@"):
            if self.peek_is('"'):
                return SymbolRef(self.parse_string())
            return SymbolRef(self.parse_identifier("a symbol name after '@'"))
        if self.accept("#"):
            name = self.parse_identifier("an attribute name after '#'")
            if name in self.aliases and not self.peek_is("<"):
                return self.aliases[name]
            try:
                cls = IR_REGISTRY.attribute(name)
            except UnknownNameError as exc:
                self.error(str(exc), start)
            self.expect("<", f"after '#{name}'")
            value = cls.parse_parameters(self)
            self.expect(">", f"to close '#{name}<'")
            return value
        if self.text.startswith("nan(", self.pos):
            self.pos += 4
            bits_pos = self.pos
            m = self.match(_HEX_BITS)
            if not m:
                self.error("expected the bits of a NaN like 'nan(0x7ff8000000000001)'", bits_pos)
            self.expect(")", "to close 'nan('")
            value = float_from_bits(int(m.group(0), 16))
            if not math.isnan(value):
                self.error(f"{m.group(0)} are not the bits of a NaN", bits_pos)
            return value
        for word, value in (("true", True), ("false", False), ("inf", float("inf")), ("-inf", float("-inf")),
                            ("nan", float("nan"))):
            if self.text.startswith(word, self.pos) and not _continues_identifier(self.text, self.pos + len(word)):
                self.pos += len(word)
                return value
        m = self.match(_NUMBER)
        if m:
            text = m.group(0)
            if text.lower().lstrip("-").startswith("0x"):
                return int(text, 16)
            if any(c in text for c in ".eE"):
                return float(text)
            return int(text)
        if self.peek_is("(") or self.peek_is("!") or self.peek_identifier():
            return self.parse_type()
        self.error(f"expected an attribute value, found {self._describe_here()}")

    def parse_attribute_dict(self) -> dict[str, Any]:
        self.expect("{")
        attributes: dict[str, Any] = {}
        if self.accept("}"):
            return attributes
        while True:
            self.skip_space()
            start = self.pos
            key = self.parse_identifier("an attribute name")
            if key in attributes:
                self.error(f"attribute '{key}' is given twice", start)
            self.expect("=", f"after attribute name '{key}'")
            attributes[key] = self.parse_attribute_value()
            if self.accept("}"):
                return attributes
            self.expect(",", "or '}' in the attribute dictionary")

    def _at_attribute_dict(self, has_regions: bool = True) -> bool:
        """For an op without regions, ``{`` opens attributes.  For an op with regions,
        ``{`` followed by ``name =`` does; else it opens a region (``{}`` is an empty
        region: the printer never prints an empty attribute dictionary)."""
        self.skip_space()
        if not self.text.startswith("{", self.pos):
            return False
        if not has_regions:
            return True
        save = self.pos
        self.pos += 1
        try:
            m = self.match(_IDENT)
            return bool(m) and self.peek_is("=") and not self.peek_is("==")
        finally:
            self.pos = save

    # -- values -----------------------------------------------------------------------
    def define_value(self, name: str, value: Value, pos: int) -> None:
        # A name may not shadow one visible here (as in MLIR): in nested regions a use
        # would silently pick the inner value, and the printer never writes such text.
        for scope, isolated in zip(reversed(self._scopes), reversed(self._isolated)):
            if name in scope:
                line = self.text.count("\n", 0, scope[name][1]) + 1
                self.error(f"value '%{name}' is already defined at line {line}", pos)
            if isolated:
                break
        self._scopes[-1][name] = (value, pos)
        if not name.isdigit():
            value.name_hint = name

    def _push_scope(self, isolated: bool) -> None:
        self._scopes.append({})
        self._isolated.append(isolated)

    def _pop_scope(self) -> None:
        self._scopes.pop()
        self._isolated.pop()

    def lookup_value(self, name: str, pos: int) -> Value:
        for scope in reversed(self._scopes):
            found = scope.get(name)
            if found is not None:
                return found[0]
        self.error(f"use of undefined value '%{name}'", pos)
        raise AssertionError

    def parse_value_use(self) -> Value:
        self.skip_space()
        pos = self.pos
        m = self.match(_VALUE)
        if not m:
            self.error(f"expected a value like '%x', found {self._describe_here()}")
        return self.lookup_value(m.group(1), pos)

    def peek_on_this_line(self, literal: str) -> bool:
        """Whether ``literal`` comes next on the current line (an op's operands are on its
        line: ``%x`` on the next line starts the next op)."""
        pos = self.pos
        while pos < len(self.text) and self.text[pos] in " \t":
            pos += 1
        return self.text.startswith(literal, pos)

    def parse_value_list(self) -> list[Value]:
        values: list[Value] = []
        if not self.peek_on_this_line("%"):
            return values
        values.append(self.parse_value_use())
        while self.peek_is(",") and self._comma_then_value():
            self.expect(",")
            values.append(self.parse_value_use())
        return values

    def _comma_then_value(self) -> bool:
        save = self.pos
        self.accept(",")
        result = self.peek_is("%")
        self.pos = save
        return result

    # -- ops --------------------------------------------------------------------------
    def parse_op(self) -> Operation:
        self.skip_space()
        start = self.pos
        result_names: list[tuple[str, int]] = []
        if self.peek_is("%"):
            while True:
                self.skip_space()
                pos = self.pos
                m = self.match(_VALUE)
                if not m:
                    self.error("expected a result name like '%x'")
                result_names.append((m.group(1), pos))
                if not self.accept(","):
                    break
            self.expect("=", "after the result names")
        self.skip_space()
        name_pos = self.pos
        name = self.parse_identifier("an op name")
        if name == "module":
            name = "builtin.module"
        try:
            cls = IR_REGISTRY.op(name)
        except UnknownNameError as exc:
            self.error(str(exc), name_pos)
        custom: Callable | None = getattr(cls, "parse_custom", None)
        self._op_stack.append(cls)
        try:
            if custom is not None:
                op = custom(self, [n for n, _ in result_names])
            else:
                op = self._parse_generic_op(cls, len(result_names), name_pos)
        finally:
            self._op_stack.pop()
        if len(op.results) != len(result_names):
            self.error(f"'{name}' has {len(op.results)} results but {len(result_names)} names were given", start)
        for (rname, pos), result in zip(result_names, op.results):
            self.define_value(rname, result, pos)
        if self.accept("loc("):
            op.location = self._parse_location_body()
        if op.location is None and self.locate:
            line = self.text.count("\n", 0, name_pos) + 1
            column = name_pos - (self.text.rfind("\n", 0, name_pos) + 1) + 1
            op.location = SourceLocation(self.source_name, line, column)
        return op

    def _parse_location_body(self) -> Any:
        file = self.parse_string()
        if self.accept(":"):
            line = self.parse_integer("a line number")
            self.expect(":")
            column = self.parse_integer("a column number")
            self.expect(")", "to close 'loc('")
            return SourceLocation(file, line, column)
        self.expect(")", "to close 'loc('")
        return file

    def _parse_generic_op(self, cls: type[Operation], num_results: int, name_pos: int) -> Operation:
        definition = cls.definition
        positional = self.parse_value_list()
        segments = None
        operands = positional
        keyworded_groups = {g.name for g in definition.operands if definition.is_keyworded(g)}
        if keyworded_groups:
            keyworded: dict[str, list[Value]] = {}
            while True:
                ident = self.peek_identifier()
                if ident is None or ident not in keyworded_groups:
                    break
                save = self.pos
                self.parse_identifier()
                if not self.accept("("):
                    self.pos = save
                    break
                if ident in keyworded:
                    self.error(f"operand group '{ident}' is given twice", save)
                keyworded[ident] = self.parse_value_list()
                self.expect(")", f"to close '{ident}('")
            positional_groups = [g for g in definition.operands if g.name not in keyworded_groups]
            fixed = [g for g in positional_groups if not g.is_variable]
            if len(positional) < len(fixed) or (len(positional) > len(fixed) and len(positional_groups) == len(fixed)):
                self.error(f"'{cls.name}' expects {len(fixed)} positional operands, got {len(positional)}", name_pos)
            operands, segments_list = [], []
            rest = len(positional) - len(fixed)
            it = iter(positional)
            for group in definition.operands:
                if group.name in keyworded_groups:
                    values = keyworded.get(group.name, [])
                    if group.optional and len(values) > 1:
                        self.error(f"operand group '{group.name}' of '{cls.name}' takes one value", name_pos)
                elif group.variadic:
                    values = [next(it) for _ in range(rest)]
                else:
                    values = [next(it)]
                operands.extend(values)
                segments_list.append(len(values))
            if definition.needs_segments:
                segments = tuple(segments_list)
        attributes: dict[str, Any] = {}
        if self._at_attribute_dict(bool(definition.regions)):
            attributes = self.parse_attribute_dict()
        result_types: list[Type] = []
        if self.accept(":"):
            result_types.append(self.parse_type())
            while self.accept(","):
                result_types.append(self.parse_type())
        if len(result_types) != num_results:
            self.error(f"'{cls.name}' names {num_results} results but lists {len(result_types)} result types", name_pos)
        regions: list[Region] = []
        while self.peek_is("{"):
            regions.append(self.parse_region())
        return cls(operands, result_types, attributes, regions, None, segments)

    # -- regions ----------------------------------------------------------------------
    def parse_region(self, entry_arguments: list[tuple[str, Type, int]] | None = None) -> Region:
        """``{ ops }``, optionally with ``^bbN(args):`` block headers.

        ``entry_arguments`` are names and types of the entry block's arguments when a
        custom format declared them outside the braces (``func.func @f(%a: i32)``).
        """
        self.skip_space()
        open_pos = self.pos
        self.expect("{")
        if self._region_depth >= MAX_REGION_DEPTH:
            self.error(f"regions are nested more than {MAX_REGION_DEPTH} deep here; polytile's IR allows at most "
                       f"{MAX_REGION_DEPTH} (its passes walk regions recursively)", open_pos)
        self._region_depth += 1
        try:
            return self._parse_region_body(open_pos, entry_arguments)
        finally:
            self._region_depth -= 1

    def _parse_region_body(self, open_pos: int, entry_arguments: list[tuple[str, Type, int]] | None) -> Region:
        region = Region()
        owner = self._op_stack[-1] if self._op_stack else None
        self._push_scope(owner is not None and owner.has_trait(IsolatedFromAbove))
        block = Block()
        for name, type_, pos in entry_arguments or ():
            self.define_value(name, block.add_argument(type_), pos)
        # A custom form that declares the entry block's arguments outside the braces
        # has started the entry block, even with no arguments: a label inside the braces
        # then starts the second block.  Otherwise a leading label names the entry block.
        started = entry_arguments is not None
        while True:
            if self.accept("}"):
                break
            if self.at_end():
                open_line = self.text.count("\n", 0, open_pos) + 1
                self.error(f"missing '}}' to close the region opened at line {open_line}")
            if self.peek_is("^"):
                if started or len(block):
                    region.add_block(block)
                    block = Block()
                self._parse_block_header(block)
                started = True
                continue
            block.append(self.parse_op())
            started = True
        region.add_block(block)
        self._pop_scope()
        return region

    def _parse_block_header(self, block: Block) -> None:
        if not self.match(_BLOCK):
            self.error("expected a block label like '^bb0'")
        if self.accept("("):
            if not self.accept(")"):
                while True:
                    self.skip_space()
                    pos = self.pos
                    m = self.match(_VALUE)
                    if not m:
                        self.error("expected a block argument like '%x: i32'")
                    self.expect(":", "after the block argument name")
                    self.define_value(m.group(1), block.add_argument(self.parse_type()), pos)
                    if self.accept(")"):
                        break
                    self.expect(",", "or ')' in the block argument list")
        self.expect(":", "after the block label")

    def parse_aliases(self) -> None:
        """``#name = <attribute>`` lines before the first op (the printer's layout
        aliases): ``#name`` then stands for the attribute."""
        while self.peek_is("#"):
            start = self.pos
            self.expect("#", "")
            name = self.parse_identifier("an alias name after '#'")
            if not self.accept("="):
                self.error(f"expected '=' after '#{name}': text before the first op may only define aliases "
                           f"('#{name} = #gpu.blocked<...>')", start)
            if name in self.aliases:
                self.error(f"alias '#{name}' is defined twice", start)
            self.aliases[name] = self.parse_attribute_value()

    # -- entry ------------------------------------------------------------------------
    def parse_top_level(self) -> Operation:
        from ..dialects.builtin import ModuleOp

        self._push_scope(True)
        ops: list[Operation] = []
        try:
            self.parse_aliases()
            while not self.at_end():
                ops.append(self.parse_op())
        except RecursionError:
            # Regions have their own limit; this is what else nests (attribute lists, types).
            self.error("the text is nested too deeply to parse here (brackets or types inside one another)")
        self._pop_scope()
        if len(ops) == 1 and isinstance(ops[0], ModuleOp):
            return ops[0]
        module = ModuleOp.build()
        for op in ops:
            module.body.block.append(op)
        return module


def _continues_identifier(text: str, pos: int) -> bool:
    return pos < len(text) and (text[pos].isalnum() or text[pos] in "_.$")


def parse_module(text: str, source_name: str = "<ir>", locate: bool = False) -> Operation:
    """Parse IR text into a ``builtin.module``.  Top-level ops without an explicit
    ``module { }`` are wrapped in one.  With ``locate``, ops that have no ``loc(...)``
    get ``source_name:line:column`` of their name in the text."""
    return Parser(text, source_name, locate).parse_top_level()


def parse_type(text: str) -> Type:
    parser = Parser(text, "<type>")
    result = parser.parse_type()
    if not parser.at_end():
        parser.error(f"unexpected {parser._describe_here()} after the type")
    return result
