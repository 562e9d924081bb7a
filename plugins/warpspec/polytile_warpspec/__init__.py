"""polytile-warpspec: ``pl.range(..., warp_specialize=True)`` on NVIDIA sm_90a.

A pipelined loop is split into a *producer* warp group, which issues the loop's copies
into its ring (polytile-tma's bulk copies, or cp.async) as soon as a slot is free, and
the kernel's own warps, the *consumers*, which run the math and what follows the loop; full and empty mbarriers per slot are the channel between them.  See
docs/warpspec.md.
"""

__all__: list[str] = []
