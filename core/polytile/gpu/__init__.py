"""The target-neutral SIMT lowering toolkit that GPU backends share: layouts (which
thread holds which element), the coalescing heuristic, and the index math behind them.
See docs/gpu-lowering.md.

Importing :mod:`polytile.gpu.layouts` registers the layout attributes with the IR
registry; this package does not import it eagerly, so ``import polytile`` stays light.
"""
