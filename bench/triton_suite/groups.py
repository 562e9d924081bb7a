"""Why a test fails, in groups: rules as data (a regular expression over the first error
line, and the group's name), first match wins; what no rule names is grouped by its
error type and message with the numbers taken out."""

from __future__ import annotations

import re

#: Failures that test Triton's internals (its IR text, ``.asm`` keys, ``triton.compile``):
#: counted apart, as the issue asks.
INTERNALS = re.compile(r"ttgir|ttir|\bllir\b|triton\.compile|InternalsError|ASTSource|GPUTarget|'amdgcn'|"
                       r"'ptx'|\.asm\b|knobs|get_device_properties|MLIR|mlir")

#: (group name, pattern) in order.
RULES: list[tuple[str, str]] = [
    ("bf16/fp8 data on the interpreter (NumPy has no such dtypes)", r"bf16|bfloat16|fp8|float8"),
    ("tl.dot_scaled", r"dot_scaled"),
    ("tl.const pointers", r"has no attribute 'const'"),
    ("CompilationError.__cause__ (Triton chains the inner error)", r"__cause__|NoneType' object has no attribute"),
    ("a missing language name", r"has no attribute"),
    ("results differ from NumPy", r"^(AssertionError|assert|Not equal|Mismatched|Arrays are not)"),
]


def normalized(message: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    return re.sub(r"\d+", "N", first)[:110]


def group_of(message: str) -> str:
    for name, pattern in RULES:
        if re.search(pattern, message):
            return name
    return normalized(message)


#: What a test function's source uses when it checks Triton's internals (its IR text,
#: ``.asm`` keys, ``triton.compile``).
INTERNAL_SOURCE = re.compile(r"\.asm\[|\.asm\.|ttgir|ttir|\bllir\b|triton\.compile|ASTSource|amdgcn|'ptx'|\"ptx\"")


def internal_tests(source: str) -> list[str]:
    """The test functions of a test file's ``source`` that use Triton's internals somewhere."""
    import ast

    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            if INTERNAL_SOURCE.search(ast.get_source_segment(source, node) or ""):
                found.append(node.name)
    return found


def is_internals(test: str, message: str, functions: list[str] | None) -> bool:
    """Whether a failure is of Triton's internals: its message says so, and (where the
    run recorded which test functions use internals) its test function uses them."""
    if not INTERNALS.search(message):
        return False
    name = test.split("::")[-1].split("[")[0]
    return functions is None or name in functions
