"""polytile-warpspec: ``pl.range(..., warp_specialize=True)`` on NVIDIA sm_90a.

A pipelined loop whose ring copies one thread issues (polytile-tma's bulk copies) is
split into a *producer* warp group, which issues the copies into the ring as soon as a
slot is free, and the kernel's own warps, the *consumers*, which run the math and what
follows the loop; full and empty mbarriers per slot are the channel between them.  See
docs/warpspec.md.
"""

__all__: list[str] = []
