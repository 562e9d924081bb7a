"""Host time per launch with tensor descriptors: three pointers, three reused
``TensorDescriptor``s and three new ones per launch, polytile against Triton, in one
process on one GPU (issue 15's launch targets).  Run: ``python -m bench.descriptor_launch``
(needs an NVIDIA GPU, torch, Triton and polytile-tma).  The 1-D descriptors pass as
pointers and ints; the 2-D ones on Hopper also pass a tensor map each.  Not yet part of ``python -m bench
launch``, which times fresh processes."""
import statistics, time, torch
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
ROUNDS, BATCH = 12, 2000


def batch(fn, n=BATCH):
    """Host time per launch of ``n`` launches, in microseconds."""
    t0 = time.perf_counter()
    for _ in range(n): fn()
    seconds = time.perf_counter() - t0
    torch.cuda.synchronize()
    return seconds / n * 1e6

pd = [TensorDescriptor.from_tensor(v, [128]) for v in (x, y, z)]
td = [TD.from_tensor(v, [128]) for v in (x, y, z)]
x2, y2, z2 = (v.view(32, 32) for v in (x, y, z))
pd2 = [TensorDescriptor.from_tensor(v, [32, 32]) for v in (x2, y2, z2)]
td2 = [TD.from_tensor(v, [32, 32]) for v in (x2, y2, z2)]
cases = {
 "polytile pointers": lambda: p_ptrs[(1,)](x, y, z, BLOCK=128),
 "polytile descriptors reused": lambda: p_descs[(1,)](*pd, BLOCK=128),
 "polytile descriptors new": lambda: p_descs[(1,)](*[TensorDescriptor.from_tensor(v, [128]) for v in (x, y, z)], BLOCK=128),
 "polytile 2-D descriptors reused": lambda: p_descs2d[(1,)](*pd2, BLOCK=32),
 "polytile 2-D descriptors new": lambda: p_descs2d[(1,)](*[TensorDescriptor.from_tensor(v, [32, 32]) for v in (x2, y2, z2)], BLOCK=32),
 "polytile descriptors in kernel": lambda: p_made[(1,)](x, y, z, BLOCK=32),
 "triton pointers": lambda: t_ptrs[(1,)](x, y, z, BLOCK=128),
 "triton descriptors reused": lambda: t_descs[(1,)](*td, BLOCK=128),
 "triton descriptors in kernel": lambda: t_made[(1,)](x, y, z, BLOCK=32),
 "triton descriptors new": lambda: t_descs[(1,)](*[TD.from_tensor(v, [128]) for v in (x, y, z)], BLOCK=128),
 "triton 2-D descriptors reused": lambda: t_descs2d[(1,)](*td2, BLOCK=32),
 "triton 2-D descriptors new": lambda: t_descs2d[(1,)](*[TD.from_tensor(v, [32, 32]) for v in (x2, y2, z2)], BLOCK=32),
}
for fn in cases.values():  # warm up: compile, plan, cache
    for _ in range(200): fn()
torch.cuda.synchronize()
# Rounds that run every case once in turn, so that every case sees the same machine (a
# batch that runs while the host is busy elsewhere is slow for all cases of its round):
# each case's best batch, and each ratio to its pointers as the median of the rounds'.
times = {name: [] for name in cases}
for _ in range(ROUNDS):
    for name, fn in cases.items():
        times[name].append(batch(fn))
rows = {name: min(t) for name, t in times.items()}
torch.cuda.synchronize()
assert torch.equal(z, x + y)
for name, best in rows.items():
    pointers = times[name.split()[0] + " pointers"]
    ratio = statistics.median(t / p for t, p in zip(times[name], pointers))
    print(f"{name:32s} {best:6.2f} us  {ratio:4.2f}x its pointers (median of {ROUNDS} rounds)")
