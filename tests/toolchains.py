"""The external tools some tests need, found as the backends find them.

A machine without network access (a GPU machine, say) may lack ``ld.lld`` or ``ptxas``:
tests that need one skip there, saying why.  CI must have both (``./dev setup`` installs
them), so ``.ci/run`` sets the variables below and a missing tool fails instead.
"""

from __future__ import annotations

import os

import pytest

#: Set by .ci/run: a missing ld.lld fails the AMD tests that link instead of skipping them.
REQUIRE_LLD_VARIABLE = "PT_REQUIRE_LLD"
#: Set by .ci/run: a missing ptxas fails the tests that assemble PTX instead of skipping them.
REQUIRE_PTXAS_VARIABLE = "PT_REQUIRE_PTXAS"


def missing_linker(error: BaseException | None) -> str | None:
    """The AMD backend's "ld.lld not found" message, if ``error`` is (or was caused by) it."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if type(error).__name__ == "ToolNotFoundError" and str(error).startswith("ld.lld"):
            return str(error).splitlines()[0].split(";")[0]
        error = error.__cause__ or error.__context__
    return None


def ptxas_or_skip() -> str:
    """The ptxas the NVIDIA backend would run; without one the calling test skips, saying
    why (and fails under PT_REQUIRE_PTXAS, as in CI, where ./dev setup installs one)."""
    from polytile_nvidia import assemble, toolkit

    try:
        return assemble.find_ptxas()
    except toolkit.ToolkitNotFoundError as missing:
        if os.environ.get(REQUIRE_PTXAS_VARIABLE):
            raise
        pytest.skip(f"the PTX was generated but not assembled: {str(missing).splitlines()[0]} "
                    "(./dev setup installs it with the nvidia-cuda-nvcc wheel)")
