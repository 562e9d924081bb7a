"""Each polytile kernel is written once, and the Triton kernels are the same kernels.

The kernels that are also examples live in ``examples/NAME.py`` (the bench loads them from
there: ``bench.polytile_kernels.FROM_EXAMPLES``); the bench's own are in
``bench/polytile_kernels.py``.  ``bench/triton_kernels.py`` must be the same code with the
module names changed: compared as syntax trees (comments and line breaks aside), every
kernel on both sides, and the autotuned matmul over the same configs.  Every case of
the harness is then launched with both kernel modules (the Triton one with polytile
standing in for Triton) and each result checked, so the pairing is the harness's own.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import bench.polytile_kernels as polytile_kernels
from bench.cases import CASES
from bench.devices import TIMING_PLANS, NumpyDevice
from bench.throughput import measure
from tests.bench.loading import TRITON_KERNELS, triton_kernels_on_polytile

ROOT = Path(__file__).resolve().parents[2]
BENCH_KERNELS = ROOT / "bench" / "polytile_kernels.py"
EXAMPLES = ROOT / "examples"


def jit_functions(path: Path) -> dict[str, ast.FunctionDef]:
    """The ``@...jit`` functions of a file, by name."""
    tree = ast.parse(path.read_text(), str(path))
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)
            and any(ast.unparse(d).endswith("jit") for d in node.decorator_list)}


class ToTriton(ast.NodeTransformer):
    """polytile's module names as Triton's: ``pl.`` -> ``tl.``, ``pt.`` -> ``triton.``."""

    NAMES = {"pl": "tl", "pt": "triton"}

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.copy_location(ast.Name(self.NAMES.get(node.id, node.id), node.ctx), node)


def polytile_sources() -> dict[str, ast.FunctionDef]:
    """Every polytile kernel the bench times, from where it is written."""
    kernels = {}
    for name, example in polytile_kernels.FROM_EXAMPLES.items():
        kernels[name] = jit_functions(EXAMPLES / f"{example}.py")[name]
    for name, node in jit_functions(BENCH_KERNELS).items():
        assert name not in kernels, f"{name} is written in bench/polytile_kernels.py and in an example"
        kernels[name] = node
    return kernels


def test_the_kernels_the_examples_hold_are_not_written_again_in_the_bench():
    assert set(polytile_kernels.FROM_EXAMPLES).isdisjoint(jit_functions(BENCH_KERNELS))
    for name, example in polytile_kernels.FROM_EXAMPLES.items():
        kernel = getattr(polytile_kernels, name)
        assert kernel is getattr(polytile_kernels.load_example(example), name)
        assert Path(kernel.fn.__code__.co_filename) == EXAMPLES / f"{example}.py"


def test_every_polytile_kernel_has_its_triton_twin():
    ours, theirs = polytile_sources(), jit_functions(TRITON_KERNELS)
    assert sorted(ours) == sorted(theirs)


@pytest.mark.parametrize("name", sorted(polytile_sources()))
def test_the_triton_kernel_is_the_polytile_kernel_renamed(name):
    ours = ast.dump(ToTriton().visit(polytile_sources()[name]))
    assert ours == ast.dump(jit_functions(TRITON_KERNELS)[name]), (
        f"bench/triton_kernels.py's {name} is not the polytile {name} with pl/pt renamed tl/triton: "
        "change both alike")


def test_the_autotuned_matmuls_tune_the_same_kernel_over_the_same_configs():
    ours, theirs = polytile_kernels.matmul_kernel_autotuned, triton_kernels_on_polytile().matmul_kernel_autotuned
    assert ours.fn is polytile_kernels.matmul_kernel
    assert theirs.fn is triton_kernels_on_polytile().matmul_kernel
    assert ours.keys == theirs.keys == ["M", "N", "K"]
    assert [c.all_kwargs() for c in ours.configs] == [c.all_kwargs() for c in theirs.configs]
    assert len(ours.configs) >= 4


def test_the_bench_kernels_are_written_with_the_public_api():
    for path in [BENCH_KERNELS, *(EXAMPLES / f"{e}.py" for e in polytile_kernels.FROM_EXAMPLES.values())]:
        tree = ast.parse(path.read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert not {name for name in imported if name.startswith("polytile.")} - {
            "polytile.language", "polytile.tools.tensor_descriptor"}, path


def test_only_the_vector_add_example_is_loaded_for_the_launch_and_compile_modes():
    """Their child processes time importing the kernel module and launching add_kernel:
    that loads examples/vector_add.py, not every example."""
    import subprocess

    code = ("import sys; from bench import polytile_kernels as k; k.add_kernel; "
            "print(sorted(m for m in sys.modules if m.startswith('bench_example_')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['bench_example_vector_add']"]


def test_the_kernels_can_be_run_with_polytile_standing_in_for_triton():
    assert triton_kernels_on_polytile().add_kernel.fn.__code__.co_filename == str(TRITON_KERNELS)


#: Each case with a dtype NumPy holds (the interpreter's arrays): the fp8 matmul runs here
#: in float16 (the same launch code and layout: tests/bench/test_bench_matmul_rows.py).
RUNNABLE = {name: next(d for d in (*case.dtypes, "f16") if d in NumpyDevice.dtypes) for name, case in CASES.items()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_case_runs_and_checks_with_both_kernel_modules(case):
    """The Triton kernels with polytile standing in for Triton: each case's launch code
    finds its kernels in both modules, and both give the right answer."""
    device, spec, dtype = NumpyDevice(), CASES[case], RUNNABLE[case]
    size = spec.sizes["tiny"][0]
    for name, lib in (("polytile", polytile_kernels), ("triton", triton_kernels_on_polytile())):
        problem = spec.make(device, size, dtype)
        result = measure(spec, problem, dtype, size, lib, device, TIMING_PLANS["tiny"])
        assert result.status == "ok", f"{name}: {result.detail}"
