"""Helpers for the dialect tests: canonical round-trips and located verifier errors."""

from __future__ import annotations

import textwrap

import pytest

from polytile.errors import PolytileError, SourceLocation, VerificationError
from polytile.ir import parse_module, print_ir, verify


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def func(signature: str, *lines: str, results: str = "") -> str:
    """``func.func @f(signature) [-> results] { lines }`` in canonical text."""
    head = f"func.func @f({signature})" + (f" -> {results}" if results else "")
    return head + " {\n" + "".join(f"  {line}\n" for line in lines) + "}\n"


def assert_roundtrip(text: str) -> None:
    """``text`` parses, verifies and prints back identically, also through a second parse."""
    module = parse_module(text)
    verify(module)
    assert print_ir(module) == text
    assert print_ir(parse_module(print_ir(module))) == text
    # And with a location on every op, printed and parsed back.
    for index, op in enumerate(module.walk()):
        op.location = SourceLocation("kernel.py", index + 1, 5)
    located = print_ir(module, print_locations=True)
    reparsed = parse_module(located)
    assert print_ir(reparsed, print_locations=True) == located
    assert [op.location for op in reparsed.walk()][1:] == [op.location for op in module.walk()][1:]


def assert_verify_error(text: str, op: str, message: str) -> VerificationError:
    """The line marked with a leading ``!`` holds the faulty op (or the closing brace of it):
    it gets ``loc("k.py":LINE:3)``, and the error must name that op, that location and
    exactly ``message``."""
    lines = text.split("\n")
    marked = [i for i, line in enumerate(lines) if line.lstrip().startswith("!")]
    assert len(marked) == 1, "mark exactly one line with '!'"
    index = marked[0]
    lines[index] = lines[index].replace("!", "", 1) + f' loc("k.py":{index + 1}:3)'
    module = parse_module("\n".join(lines))
    with pytest.raises(VerificationError) as info:
        verify(module)
    err = info.value
    assert isinstance(err, PolytileError)
    assert err.op_name == op
    assert err.message == message
    assert err.location == SourceLocation("k.py", index + 1, 3)
    assert str(err) == f"k.py:{index + 1}:3: error: '{op}' op {message}"
    return err
