"""The interpreter: the ``interp`` target, a NumPy executor of core IR.

::

    from polytile.interpreter import run_kernel
    run_kernel(module, "add_kernel", (4,), [x, y, out, n])

See :mod:`polytile.interpreter.executor` for how ops are interpreted and how a plugin
adds a rule for its own op (:func:`register_rule`), and :mod:`polytile.interpreter.batch`
for whole-grid execution (:func:`register_batched_rule`).  Names are imported lazily so that
loading the ``interp`` backend plugin stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BATCHED_RULES", "RULES", "BatchContext", "BlockExit", "ExecutionPlan", "InterpreterArgumentError",
    "InterpreterError", "InterpreterUnsupportedError", "ProgramContext", "plan_kernel", "register_batched_rule",
    "register_rule", "run_kernel",
]

_FROM_BATCH = {"BatchContext", "ExecutionPlan", "plan_kernel"}


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import executor
        from . import batch

        return getattr(batch if name in _FROM_BATCH else executor, name)
    raise AttributeError(f"module 'polytile.interpreter' has no attribute '{name}'")
