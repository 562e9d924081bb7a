"""Helpers for testing passes with IR text in and IR text out.

    from polytile.ir_testing import apply_passes
    assert apply_passes(INPUT, CSE()) == EXPECTED

Plugin authors use the same helpers for their own passes.  ``compile_for_targets``
compiles one module for several targets at once (the language suite's compile-all run).
"""

from __future__ import annotations

import textwrap
from typing import Any, Sequence


from .errors import VerificationError
from .ir import parse_module, print_ir, verify
from .passes.pass_base import Pass, PassContext


def dedent(text: str) -> str:
    """Strip the common indentation and the leading newline of a triple-quoted IR text."""
    return textwrap.dedent(text).lstrip("\n")


def apply_passes(ir_text: str, *passes: Pass, context: PassContext | None = None, verify_each: bool = True) -> str:
    """Parse ``ir_text``, run ``passes`` in order (verifying after each), print the result."""
    module = parse_module(dedent(ir_text))
    verify(module)
    context = context or PassContext()
    for pass_ in passes:
        preserved = pass_.run(module, context)
        context.analyses.invalidate(preserved) if preserved is not None else context.analyses.clear()
        if verify_each:
            try:
                verify(module)
            except VerificationError as exc:
                raise VerificationError(f"{exc.message} (the IR became invalid in pass '{pass_.name}')",
                                        exc.op_name, exc.location) from None
    return print_ir(module)


def roundtrip(ir_text: str) -> str:
    """``print(parse(text))``; equal to ``dedent(text)`` for canonical text."""
    return print_ir(parse_module(dedent(ir_text)))




def compile_for_targets(module: Any, targets: Sequence[str], *, label: str = "module",
                        **options: Any) -> dict[str, Any]:
    """Compile one frontend ``module`` (left unchanged) for each of ``targets`` through
    the public compile driver: the ``CompileResult`` of each target, or the exception its
    compilation raised, so that one arch's failure does not hide another's."""
    from .compiler import compile_module

    results: dict[str, Any] = {}
    for target in targets:
        try:
            # A copy per target: pipelines change the module in place.
            results[target] = compile_module(module.clone(), target, label=label, **options)
        except Exception as exc:  # noqa: BLE001 - reported per target by the caller
            results[target] = exc
    return results
