"""The benchmark harness: ``python -m bench [memory|matmul|launch|compile|all] ...``.

It times polytile and, when it is installed, Triton on the same kernels and sizes (the
launch and compile modes in fresh child processes), checks every result before timing
it, prints a table, and writes JSON and a plot on request.  ``python -m bench --help`` lists the options; ``bench/RESULTS.md`` holds the
latest results from a GPU and says how they were produced.

Importing this package imports nothing heavy: the compile mode's child processes import
``bench.polytile_kernels`` and time what that costs.
"""

from __future__ import annotations

from typing import Any


def run(*args: Any, **kwargs: Any) -> Any:
    """:func:`bench.cli.run`: run a mode and return the :class:`bench.report.Report`."""
    from .cli import run as run_modes

    return run_modes(*args, **kwargs)


def main(argv: Any = None) -> int:
    """:func:`bench.cli.main`: the command line; returns the exit status."""
    from .cli import main as command_line

    return command_line(argv)
