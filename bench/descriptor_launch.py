"""Host time per launch with tensor descriptors: three pointers, three reused
``TensorDescriptor``s and three new ones per launch, polytile against Triton, in one
process on one GPU (issue 15's launch targets).  Run: ``python -m bench.descriptor_launch``
(needs an NVIDIA GPU, torch, Triton and polytile-tma).  The 1-D descriptors pass as
pointers and ints; the 2-D ones on Hopper also pass a tensor map each.  Not yet part of ``python -m bench
launch``, which times fresh processes."""
import time, torch
import polytile as pt, polytile.language as pl
from polytile_tma.host import TensorDescriptor
import triton, triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor as TD

@pt.jit
def p_ptrs(a, b, c, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(c + offs, pl.load(a + offs) + pl.load(b + offs))

@pt.jit
def p_descs(a, b, c, BLOCK: pl.constexpr):
    c.store([0], a.load([0]) + b.load([0]))

@pt.jit
def p_descs2d(a, b, c, BLOCK: pl.constexpr):
    # 2-D blocks: on Hopper each descriptor also passes its tensor map.
    c.store([0, 0], a.load([0, 0]) + b.load([0, 0]))

@pt.jit
def p_made(a, b, c, BLOCK: pl.constexpr):
    # Descriptors made in the kernel: on Hopper, tensor maps built in the launch's scratch.
    da = pl.make_tensor_descriptor(a, [BLOCK, BLOCK], [BLOCK, 1], [BLOCK, BLOCK])
    db = pl.make_tensor_descriptor(b, [BLOCK, BLOCK], [BLOCK, 1], [BLOCK, BLOCK])
    dc = pl.make_tensor_descriptor(c, [BLOCK, BLOCK], [BLOCK, 1], [BLOCK, BLOCK])
    dc.store([0, 0], da.load([0, 0]) + db.load([0, 0]))

@triton.jit
def t_descs2d(a, b, c, BLOCK: tl.constexpr):
    c.store([0, 0], a.load([0, 0]) + b.load([0, 0]))

@triton.jit
def t_made(a, b, c, BLOCK: tl.constexpr):
    da = tl.make_tensor_descriptor(a, [BLOCK, BLOCK], [BLOCK, 1], [BLOCK, BLOCK])
    db = tl.make_tensor_descriptor(b, [BLOCK, BLOCK], [BLOCK, 1], [BLOCK, BLOCK])
    dc = tl.make_tensor_descriptor(c, [BLOCK, BLOCK], [BLOCK, 1], [BLOCK, BLOCK])
    dc.store([0, 0], da.load([0, 0]) + db.load([0, 0]))

@triton.jit
def t_ptrs(a, b, c, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(c + offs, tl.load(a + offs) + tl.load(b + offs))

@triton.jit
def t_descs(a, b, c, BLOCK: tl.constexpr):
    c.store([0], a.load([0]) + b.load([0]))

def alloc(size, align, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


triton.set_allocator(alloc)  # device-side descriptors need one, in both
pt.set_allocator(alloc)

x, y, z = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda"), torch.zeros(1024, device="cuda")
def timeit(fn, n=5000):
    for _ in range(200): fn()
    torch.cuda.synchronize()
    best = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n): fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return best

pd = [TensorDescriptor.from_tensor(v, [128]) for v in (x, y, z)]
td = [TD.from_tensor(v, [128]) for v in (x, y, z)]
x2, y2, z2 = (v.view(32, 32) for v in (x, y, z))
pd2 = [TensorDescriptor.from_tensor(v, [32, 32]) for v in (x2, y2, z2)]
td2 = [TD.from_tensor(v, [32, 32]) for v in (x2, y2, z2)]
rows = {  # best of 3 batches of 5000 launches, after 200 to warm up
 "polytile pointers": timeit(lambda: p_ptrs[(1,)](x, y, z, BLOCK=128)),
 "polytile descriptors reused": timeit(lambda: p_descs[(1,)](*pd, BLOCK=128)),
 "polytile descriptors new": timeit(lambda: p_descs[(1,)](*[TensorDescriptor.from_tensor(v, [128]) for v in (x, y, z)], BLOCK=128)),
 "polytile 2-D descriptors reused": timeit(lambda: p_descs2d[(1,)](*pd2, BLOCK=32)),
 "polytile 2-D descriptors new": timeit(lambda: p_descs2d[(1,)](*[TensorDescriptor.from_tensor(v, [32, 32]) for v in (x2, y2, z2)], BLOCK=32)),
 "polytile descriptors in kernel": timeit(lambda: p_made[(1,)](x, y, z, BLOCK=32)),
 "triton pointers": timeit(lambda: t_ptrs[(1,)](x, y, z, BLOCK=128)),
 "triton descriptors reused": timeit(lambda: t_descs[(1,)](*td, BLOCK=128)),
 "triton descriptors in kernel": timeit(lambda: t_made[(1,)](x, y, z, BLOCK=32)),
 "triton descriptors new": timeit(lambda: t_descs[(1,)](*[TD.from_tensor(v, [128]) for v in (x, y, z)], BLOCK=128)),
 "triton 2-D descriptors reused": timeit(lambda: t_descs2d[(1,)](*td2, BLOCK=32)),
 "triton 2-D descriptors new": timeit(lambda: t_descs2d[(1,)](*[TD.from_tensor(v, [32, 32]) for v in (x2, y2, z2)], BLOCK=32)),
}
torch.cuda.synchronize()
assert torch.equal(z, x + y)
pointers = {"polytile": rows["polytile pointers"], "triton": rows["triton pointers"]}
for k, v in rows.items():
    print(f"{k:32s} {v:6.2f} us  {v / pointers[k.split()[0]]:4.2f}x its pointers")
