"""Symbol references and the functions a module still needs.

A function is needed when a kernel (``kernel = true``) or anything else at the top of the
module refers to it, directly or through other needed functions.  A reference is any
:class:`~polytile.ir.attributes.SymbolRef` in any attribute of any op: a call's
``callee``, but also a plugin's ``pt.callback = @helper`` on a kernel, a ``[@a, @b]``
list, or a field of a dialect attribute.  Counting only calls would let a pass delete a
function that something still names, leaving the reference dangling.

``inline`` and ``dce`` both remove functions with :func:`unreachable_functions`, so the
two passes agree on what is dead.
"""

from __future__ import annotations

from typing import Any, Iterator

from ..ir.attributes import symbol_refs_in

__all__ = ["is_kernel", "referenced_symbols", "symbol_refs", "unreachable_functions"]


def is_kernel(op: Any) -> bool:
    """Whether ``op`` is a ``func.func`` marked as an entry point (``kernel = true``)."""
    return op.name == "func.func" and op.attributes.get("kernel") is True


def symbol_refs(value: Any) -> Iterator[str]:
    """The names of the symbols an attribute value refers to, in order, nested ones too."""
    return (ref.name for ref in symbol_refs_in(value))


def referenced_symbols(op: Any) -> set[str]:
    """Every symbol named by an attribute of ``op`` or of any op nested in it."""
    names: set[str] = set()
    for inner in op.walk():
        for value in inner.attributes.values():
            names.update(symbol_refs(value))
    return names


def _top_level_ops(module: Any) -> list[Any]:
    return [op for region in module.regions for block in region.blocks for op in block]


def unreachable_functions(module: Any) -> list[Any]:
    """The functions, in module order, that no kernel and nothing else at the top of the
    module refers to through any chain of references.

    Kernels are always live.  A module without kernels is a library (helpers given to
    ``polytile opt``): its entry points are unknown, so nothing in it is unreachable.
    A function that refers only to itself, or only to other dead functions, is dead:
    this is reachability, not a use count.
    """
    top = _top_level_ops(module)
    if not any(is_kernel(op) for op in top):
        return []
    candidates = {op.attributes.get("sym_name"): op for op in top if op.name == "func.func" and not is_kernel(op)}
    if not candidates:
        return []
    pending: list[str] = []
    for op in top:
        if op.name == "func.func" and not is_kernel(op):
            continue  # a candidate is a root only if something live names it
        pending.extend(referenced_symbols(op))
    live: set[str] = set()
    while pending:
        name = pending.pop()
        if name in live:
            continue
        live.add(name)
        if name in candidates:
            pending.extend(referenced_symbols(candidates[name]))
    return [op for name, op in candidates.items() if name not in live]
