"""What verifying the IR after every plugin pass costs, next to code generation.

The pass manager verifies the IR after every pass a plugin provides (a backend's
assemble passes, polytile-lds's passes, a third party's), whatever ``verify_each``
says.  This measures, for the example kernels on each target:

* ``compile ms``: compile_module, the whole pipeline (the fastest of ``--repeat`` runs);
* ``codegen ms``: its ``llvm`` and ``assemble`` stages (LLVM IR, PTX/cubin, HSACO);
* ``verify ms``: the verifications run by default (``n``: how many), in total: after
  each plugin pass, and before one when passes that are not verified ran since the last
  check (so that the plugin is never blamed for IR it was given broken);
* ``worst ms``: a plugin pass after *every* pass (a no-op one, verified each time),
  the verifications in total: the most that plugins can cost.

    python -m bench.verify_cost [--repeat 5] [--targets interp,nvidia:sm_90a,amd:gfx942]

No GPU needed: the GPU targets compile to a cubin and an HSACO.  Results go to
docs/passes.md ("What the verifier costs").
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

ROOT = Path(__file__).resolve().parents[1]

#: (example file, kernel, signature, constexprs)
KERNELS = [
    ("vector_add", "add_kernel", "*fp32:16,*fp32:16,*fp32:16,i32", {"BLOCK_SIZE": 1024}),
    ("softmax", "softmax_kernel", "*fp32:16,*fp32:16,i32,i32,i32", {"BLOCK_SIZE": 1024}),
    ("layer_norm", "layer_norm_fwd_kernel", "*fp32:16,*fp32:16,*fp32:16,*fp32:16,*fp32:16,*fp32:16,i32,i32,fp32",
     {"BLOCK_SIZE": 1024}),
    ("matmul", "matmul_kernel", "*fp32:16,*fp32:16,*fp32:16,i32,i32,i32,i32,i32,i32,i32,i32,i32",
     {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}),
]


def _module(example: str, kernel: str, signature: str, constexprs: dict):
    from polytile.aot import _constexpr_values, load_kernel, parse_signature
    from polytile.frontend.codegen import generate_kernel
    from polytile.runtime.jit import attach_hints

    fn = load_kernel(f"{ROOT / 'examples' / example}.py:{kernel}")
    entries = parse_signature(signature)
    runtime = [p for p in fn.param_names if p not in fn.constexpr_names()]
    module, _ = generate_kernel(fn, {p: e.type for p, e in zip(runtime, entries)},
                                _constexpr_values(fn, dict(constexprs), runtime))
    attach_hints(module, [e.hint for e in entries])
    return module


def _measure(module, target: str, repeat: int) -> tuple[float, float, float, int]:
    """Compile ms, codegen ms, verify ms (the fastest of ``repeat`` runs each) and the
    number of verifications."""
    from polytile import config
    from polytile.compiler import compile_module
    from polytile.passes import instrumentation
    from polytile.passes import manager as manager_module
    from polytile.passes.instrumentation import PassTimer

    verified: list[float] = []
    real = {name: getattr(manager_module, name) for name in ("_verify_after", "_verify_before")}

    def timing(function):
        def timed(*args):
            start = time.perf_counter()
            function(*args)
            verified.append(time.perf_counter() - start)
        return timed

    for name, function in real.items():
        setattr(manager_module, name, timing(function))
    rows = []
    try:
        for _ in range(repeat):
            verified.clear()
            timer = PassTimer(print_on_finish=False)
            original = instrumentation.instrumentation_from_config
            instrumentation.instrumentation_from_config = lambda artifacts=None: [timer]
            try:
                with config.override(verify_each=False):
                    start = time.perf_counter()
                    result = compile_module(module.clone(), target, label="k")
                    total = time.perf_counter() - start
            finally:
                instrumentation.instrumentation_from_config = original
            del result
            codegen = sum(s for stage, _, s in timer.records if stage in ("llvm", "assemble"))
            rows.append((total, codegen, sum(verified), len(verified)))
    finally:
        for name, function in real.items():
            setattr(manager_module, name, function)
    # The fastest of the runs, column by column: the machine is shared, and a run only
    # gets slower from what else runs on it.
    fastest = lambda i: min(r[i] for r in rows) * 1e3  # noqa: E731
    return fastest(0), fastest(1), fastest(2), rows[-1][3]


def _install_everywhere_plugin():
    """A plugin that puts a no-op pass of its own after every pass (the worst case)."""
    from polytile.passes import Pass
    from polytile.plugins import hookimpl
    from polytile.plugins.manager import get_plugin_manager
    from polytile.plugins.registry import PluginInfo

    @dataclass
    class Noop(Pass):
        name: ClassVar[str] = "bench-noop"

        def run(self, module, context):
            return None

    class Everywhere:
        @staticmethod
        @hookimpl
        def polytile_configure_pipeline(pipeline, target, options):
            for stage in pipeline.stages:
                stage.passes[:] = [q for p in stage.passes for q in (p, Noop())]

    get_plugin_manager().register(Everywhere, PluginInfo("everywhere", "bench-everywhere", "0"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.verify_cost", description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--targets", default="interp,nvidia:sm_90a,amd:gfx942")
    args = parser.parse_args(argv)
    from polytile.passes.builtin import core_pass_classes  # noqa: F401  (warm the imports)

    targets = args.targets.split(",")
    modules = {name: _module(name, *rest) for name, *rest in KERNELS}
    table = []
    for target in targets:  # warm-up: first compiles import LLVM and the backends
        _measure(modules["vector_add"], target, 1)
    for name, module in modules.items():
        for target in targets:
            table.append([name, target, *_measure(module, target, args.repeat)])
    _install_everywhere_plugin()
    for row in table:
        worst = _measure(modules[row[0]], row[1], args.repeat)
        row.extend([worst[2], worst[3]])
    print(f"{'kernel':<11} {'target':<14} {'compile ms':>10} {'codegen ms':>10} {'verify ms':>9} {'n':>3} "
          f"{'share':>6} {'worst ms':>8} {'n':>3} {'share':>6}")
    for name, target, total, codegen, verify, n, worst, worst_n in table:
        print(f"{name:<11} {target:<14} {total:10.1f} {codegen:10.1f} {verify:9.2f} {n:3d} "
              f"{100 * verify / total:5.1f}% {worst:8.2f} {worst_n:3d} {100 * worst / total:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
