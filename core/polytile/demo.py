"""The demo: a vector-add kernel compiled for the default target and run, checked
against NumPy.  ``./dev demo`` (or ``python -m polytile.demo``) runs it.

Until the Python frontend lands, the kernel is written in polytile's core IR text: this
demo shows the pieces underneath (the IR, the pass pipeline with its plugins, the target
chosen by configuration, the interpreter).
"""

from __future__ import annotations

import argparse
import sys
import time

VECTOR_ADD = """\
func.func @add_kernel(%x: ptr<f32>, %y: ptr<f32>, %out: ptr<f32>, %n: i32) attributes {kernel = true} {
  %pid = tile.program_id {axis = 0} : i32
  %block = arith.constant {value = 1024} : i32
  %start = arith.muli %pid, %block : i32
  %range = tile.arange {end = 1024, start = 0} : tile<1024xi32>
  %starts = tile.splat %start : tile<1024xi32>
  %offsets = arith.addi %starts, %range : tile<1024xi32>
  %limit = tile.splat %n : tile<1024xi32>
  %mask = arith.cmpi %offsets, %limit {predicate = "slt"} : tile<1024xi1>
  %xs = tile.splat %x : tile<1024xptr<f32>>
  %xp = tile.addptr %xs, %offsets : tile<1024xptr<f32>>
  %xv = tile.load %xp mask(%mask) : tile<1024xf32>
  %ys = tile.splat %y : tile<1024xptr<f32>>
  %yp = tile.addptr %ys, %offsets : tile<1024xptr<f32>>
  %yv = tile.load %yp mask(%mask) : tile<1024xf32>
  %sum = arith.addf %xv, %yv : tile<1024xf32>
  %outs = tile.splat %out : tile<1024xptr<f32>>
  %op = tile.addptr %outs, %offsets : tile<1024xptr<f32>>
  tile.store %op, %sum mask(%mask)
  func.return
}
"""


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from .compiler import compile_module
    from .errors import PolytileError
    from .ir import parse_module, print_ir

    parser = argparse.ArgumentParser(prog="python -m polytile.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--target", help="override the target (e.g. interp, nvidia:sm_90a)")
    parser.add_argument("-n", type=int, default=100_000, help="vector length (default 100000)")
    parser.add_argument("--show-ir", action="store_true", help="print the IR after the pipeline")
    args = parser.parse_args(argv)
    try:
        module = parse_module(VECTOR_ADD, "vector_add.ir")
        started = time.perf_counter()
        result = compile_module(module, args.target, label="add_kernel")
        compiled = time.perf_counter() - started
        print(f"target: {result.target}  ({result.target_reason})")
        print(f"pipeline: {result.pipeline}")
        print(f"compiled in {compiled * 1e3:.1f} ms")
        if args.show_ir:
            print(print_ir(result.module))
        arrays = _array_module(result.backend.name)
        if not result.backend.can_launch() or arrays is None:
            why = ("compiles but cannot launch kernels yet" if not result.backend.can_launch()
                   else "needs torch with CUDA for its arrays, which is not available")
            if args.target:
                print(f"backend '{result.backend.name}' {why}; use --target interp")
                return 1
            # Show the run on the interpreter rather than stopping the demo.
            print(f"backend '{result.backend.name}' {why}; running on the interpreter instead")
            result = compile_module(parse_module(VECTOR_ADD, "vector_add.ir"), "interp", label="add_kernel")
            arrays = _array_module("interp")
        launcher = _launcher(result)
        rng = np.random.default_rng(0)
        x = rng.standard_normal(args.n, dtype=np.float32)
        y = rng.standard_normal(args.n, dtype=np.float32)
        grid = ((args.n + 1023) // 1024, 1, 1)
        x_dev, y_dev, out_dev = arrays(x), arrays(y), arrays(np.zeros_like(x))
        started = time.perf_counter()
        launcher(grid, [x_dev, y_dev, out_dev, args.n])
        out = _to_host(out_dev)
        ran = time.perf_counter() - started
        ok = np.array_equal(out, x + y)
        print(f"ran add_kernel over {args.n} elements on {grid[0]} programs in {ran * 1e3:.1f} ms: "
              + ("matches NumPy" if ok else "MISMATCH against NumPy"))
        return 0 if ok else 1
    except PolytileError as exc:
        from .cli import format_error

        print(format_error(exc), file=sys.stderr)
        return 1
    except BrokenPipeError:  # `python -m polytile.demo | head`
        return 0


def _array_module(backend: str):
    """How to place a NumPy array where ``backend`` runs kernels (None: no way here)."""
    if backend == "interp":
        return lambda array: array
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return lambda array: torch.from_numpy(array).cuda()


def _to_host(array):
    if hasattr(array, "cpu"):
        import torch

        torch.cuda.synchronize()
        return array.cpu().numpy()
    return array


def _launcher(result):
    from .backend import LaunchParam

    kernel = result.module.lookup_symbol("add_kernel")
    params = [LaunchParam(a.name_hint or f"arg{i}", a.type) for i, a in enumerate(kernel.arguments)]
    return result.backend.make_launcher(compiled=result, kernel_name="add_kernel", params=params,
                                        options=result.options)


if __name__ == "__main__":
    sys.exit(main())
