"""The backend contract (polytile.backend_tests) over every backend installed here.

The in-tree backends come with what the suite holds them to beyond what it derives
(their architectures, the exact messages of their option checks, the vendor modules
they must not import early); any other installed backend runs with what it derives from
itself.  The vendor-specific tests (device discovery through fake bindings, the
architecture tables, toolchain versions) stay in tests/backends/<vendor>/test_backend.py.
"""

from __future__ import annotations

import os

import pytest

# The suite's own asserts explain themselves when they fail (pytest rewrites them).
pytest.register_assert_rewrite("polytile.backend_tests")

from polytile.backend_tests import BackendContract, ContractCase, installed_cases  # noqa: E402
from polytile.plugins.manager import get_plugin_manager  # noqa: E402
from tests.toolchains import REQUIRE_PTXAS_VARIABLE, missing_linker  # noqa: E402


def _missing_nvidia_assembler(error: BaseException) -> str | None:
    """Why a compile failed for want of nvJitLink and ptxas, where that is the reason
    (never under PT_REQUIRE_PTXAS, as in CI, where ./dev setup installs ptxas)."""
    from polytile_nvidia.toolkit import ToolkitNotFoundError

    seen = set()
    while error is not None and id(error) not in seen and not os.environ.get(REQUIRE_PTXAS_VARIABLE):
        seen.add(id(error))
        if isinstance(error, ToolkitNotFoundError):
            return str(error).splitlines()[0]
        error = error.__cause__ or error.__context__
    return None


def nvidia_case(backend) -> ContractCase:
    from polytile_nvidia import NvidiaOptions

    return ContractCase(
        backend,
        architectures=("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"),
        default_architecture=None,
        options_class=NvidiaOptions,
        architecture_typos=[("sm_9a", "sm_90a"), ("sm_89a", "sm_89"), ("sm80", "sm_80")],
        foreign_target="amd:gfx942",
        default_options={"num_warps": 4, "num_ctas": 1, "maxnreg": None, "enable_fp_fusion": True},
        parsed_options={"num_warps": 8, "num_stages": 4, "num_ctas": 1, "maxnreg": 128, "enable_fp_fusion": False},
        option_typos=[("num_warp", "num_warps"), ("maxnregs", "maxnreg"), ("enable_fp_fuse", "enable_fp_fusion")],
        foreign_options={"waves_per_eu": 2},
        wrong_types=[
            ({"num_warps": "4"}, "'num_warps' of backend 'nvidia' must be an integer"),
            ({"num_warps": 4.0}, "'num_warps' of backend 'nvidia' must be an integer"),
            ({"num_ctas": True}, "'num_ctas' of backend 'nvidia' must be an integer"),
            ({"enable_fp_fusion": 1}, "'enable_fp_fusion' of backend 'nvidia' must be True or False"),
            ({"maxnreg": "128"}, "'maxnreg' of backend 'nvidia' must be None or an integer"),
            ({"maxnreg": True}, "'maxnreg' of backend 'nvidia' must be None or an integer"),
        ],
        refused_options=[
            # Thread block clusters are refused, not ignored.
            ({"num_ctas": 2}, "num_ctas' of backend 'nvidia' is 2: thread block clusters are not supported"),
            ({"num_ctas": 0}, "'num_ctas'"), ({"num_ctas": 17}, "'num_ctas'"), ({"maxnreg": 0}, "'maxnreg'"),
            ({"maxnreg": 256}, "'maxnreg'"), ({"num_stages": 0}, "'num_stages'"),
        ],
        bad_num_warps=(0, -4, 3, 6, 64),
        good_num_warps=(1, 2, 4, 8, 16, 32),
        unavailable_reasons=("cuda-bindings is not installed", "CUDA driver not found:", "CUDA driver not usable:",
                             "no supported NVIDIA GPU"),
        missing_bindings=(("cuda", "cuda.bindings", "cuda.bindings.driver", "cuda.bindings.cydriver"),
                          "cuda-bindings is not installed"),
        plugin="polytile_nvidia.plugin",
        vendor_modules=("cuda", "llvmlite"),
        versions_without_vendor_modules=False,  # the assembler's version: nvJitLink's, from cuda-bindings
        missing_tool=_missing_nvidia_assembler,
    )


def amd_case(backend) -> ContractCase:
    from polytile_amd import AmdOptions

    return ContractCase(
        backend,
        architectures=("gfx90a", "gfx942", "gfx950", "gfx1100"),
        default_architecture=None,
        options_class=AmdOptions,
        architecture_typos=[("gfx940", "gfx942"), ("gfx90", "gfx90a"), ("gfx1101", "gfx1100")],
        foreign_target="nvidia:sm_90a",
        default_options={"num_warps": 4, "waves_per_eu": 0, "matrix_instr_nonkdim": 0, "enable_fp_fusion": True},
        parsed_options={"num_warps": 8, "num_stages": 2, "waves_per_eu": 2, "matrix_instr_nonkdim": 16,
                        "enable_fp_fusion": False},
        option_typos=[("wave_per_eu", "waves_per_eu"), ("matrix_instr_nonk_dim", "matrix_instr_nonkdim"),
                      ("num_warp", "num_warps")],
        foreign_options={"maxnreg": 64},
        wrong_types=[
            ({"num_warps": "4"}, "'num_warps' of backend 'amd' must be an integer"),
            ({"waves_per_eu": 1.5}, "'waves_per_eu' of backend 'amd' must be an integer"),
            ({"matrix_instr_nonkdim": True}, "'matrix_instr_nonkdim' of backend 'amd' must be an integer"),
            ({"debug": "yes"}, "'debug' of backend 'amd' must be True or False"),
        ],
        refused_options=[
            ({"waves_per_eu": -1}, "'waves_per_eu'"), ({"matrix_instr_nonkdim": 8}, "'matrix_instr_nonkdim'"),
            ({"matrix_instr_nonkdim": 64}, "'matrix_instr_nonkdim'"),
            ({"matrix_instr_nonkdim": 4}, "'matrix_instr_nonkdim'"),  # the 4x4 MFMAs are not used yet
            ({"num_stages": 0}, "'num_stages'"),
        ],
        bad_num_warps=(0, -1, 3, 12),
        unavailable_reasons=("hip-python is not installed", "ROCm runtime not found:", "no supported AMD GPU"),
        missing_bindings=(("hip",), "hip-python is not installed"),
        plugin="polytile_amd.plugin",
        vendor_modules=("hip", "llvmlite"),
        missing_tool=lambda error: missing_linker(error) if not os.environ.get("PT_REQUIRE_LLD") else None,
    )


def interpreter_case(backend) -> ContractCase:
    return ContractCase(backend, architectures=(), default_architecture=None, foreign_target="nvidia:sm_90a",
                        plugin="polytile.interpreter.plugin", vendor_modules=("llvmlite",))


KNOWN = {"nvidia": nvidia_case, "amd": amd_case, "interp": interpreter_case}


def backend_names() -> list[str]:
    """The in-tree backends, and every other backend installed here."""
    return [*KNOWN, *(case.backend.name for case in installed_cases() if case.backend.name not in KNOWN)]


@pytest.fixture(params=backend_names())
def case(request) -> ContractCase:
    # The backend as the test's clean environment has it (the parameters were listed
    # when the tests were collected, under the shell's settings).
    backends = get_plugin_manager().backends
    if request.param not in backends:
        pytest.fail(f"backend '{request.param}' is not installed or not enabled here: ./dev setup installs the "
                    "in-tree backends")
    return KNOWN.get(request.param, ContractCase)(backends.get(request.param))


class TestBackendContract(BackendContract):
    """Every test of the contract, once per installed backend."""
