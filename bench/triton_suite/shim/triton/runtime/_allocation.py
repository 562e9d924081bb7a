"""``triton.runtime._allocation``: the allocator that allocates nothing."""


class NullAllocator:
    def __call__(self, size: int, alignment: int, stream):
        raise RuntimeError("no allocator was set (triton.set_allocator)")
