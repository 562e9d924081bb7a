"""Random numbers against a NumPy reference implementation of Philox 4x32-10."""

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.runtime import jit

M32 = np.uint64(0xFFFFFFFF)


def philox_reference(seed, offsets, n_rounds=10):
    """Philox 4x32 as Salmon et al. (and Triton) define it, in uint64 NumPy arithmetic."""
    seed = np.uint64(seed & 0xFFFFFFFFFFFFFFFF)
    k0, k1 = seed & M32, seed >> np.uint64(32)
    c0 = offsets.astype(np.int64).astype(np.uint64) & M32
    c1 = c2 = c3 = np.zeros_like(c0)
    a, b = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    for _ in range(n_rounds):
        p0, p2 = c0, c2
        c0 = ((b * p2) >> np.uint64(32)) ^ c1 ^ k0
        c2 = ((a * p0) >> np.uint64(32)) ^ c3 ^ k1
        c1 = (b * p2) & M32
        c3 = (a * p0) & M32
        k0 = (k0 + np.uint64(0x9E3779B9)) & M32
        k1 = (k1 + np.uint64(0xBB67AE85)) & M32
    return [c.astype(np.uint32) for c in (c0, c1, c2, c3)]


def uniform_reference(x):
    x = x.view(np.int32)
    x = np.where(x < 0, -x - 1, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


@jit
def random_kernel(seed, out_ptr, N: pl.constexpr, KIND: pl.constexpr, ROUNDS: pl.constexpr):
    offs = pl.program_id(0) * N + pl.arange(0, N)
    if KIND == "randint4x":
        a, b, c, d = pl.randint4x(seed, offs, ROUNDS)
        base = out_ptr + pl.program_id(0) * 4 * N
        pl.store(base + pl.arange(0, N), a)
        pl.store(base + N + pl.arange(0, N), b)
        pl.store(base + 2 * N + pl.arange(0, N), c)
        pl.store(base + 3 * N + pl.arange(0, N), d)
    elif KIND == "randint":
        pl.store(out_ptr + offs, pl.randint(seed, offs, n_rounds=ROUNDS))
    elif KIND == "rand":
        pl.store(out_ptr + offs, pl.rand(seed, offs, ROUNDS))
    else:
        pl.store(out_ptr + offs, pl.randn(seed, offs, ROUNDS))


@pytest.mark.parametrize("seed", [0, 42, 2**31 - 1, -7])
@pytest.mark.parametrize("rounds", [10, 7])
def test_randint4x_is_philox(target, seed, rounds):
    n, programs = 64, 2
    out = np.zeros(4 * n * programs, dtype=np.uint32)
    random_kernel[(programs,)](seed, out, N=n, KIND="randint4x", ROUNDS=rounds, target=target)
    got = out.reshape(programs, 4, n).transpose(1, 0, 2).reshape(4, -1)
    expected = philox_reference(seed, np.arange(n * programs), rounds)
    for stream in range(4):
        np.testing.assert_array_equal(got[stream], expected[stream])


def test_randint_and_rand(target):
    n = 1024
    ints = np.zeros(n, dtype=np.uint32)
    random_kernel[(1,)](123, ints, N=n, KIND="randint", ROUNDS=10, target=target)
    np.testing.assert_array_equal(ints, philox_reference(123, np.arange(n))[0])
    u = np.zeros(n, dtype=np.float32)
    random_kernel[(1,)](123, u, N=n, KIND="rand", ROUNDS=10, target=target)
    np.testing.assert_array_equal(u, uniform_reference(ints))
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.05


def test_rand_stays_below_one_at_the_extremes():
    extremes = np.array([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF], dtype=np.uint32)
    u = uniform_reference(extremes)
    assert u.max() < 1.0 and u.min() == 0.0


def test_randn(target):
    n = 4096
    z = np.zeros(n, dtype=np.float32)
    random_kernel[(1,)](7, z, N=n, KIND="randn", ROUNDS=10, target=target)
    i1, i2, _, _ = philox_reference(7, np.arange(n))
    u1, u2 = np.maximum(np.float32(1e-7), uniform_reference(i1)), uniform_reference(i2)
    expected = np.sqrt(np.float32(-2.0) * np.log(u1)) * np.cos(np.float32(6.283185307179586) * u2)
    np.testing.assert_allclose(z, expected, rtol=1e-5, atol=1e-5)
    assert abs(z.mean()) < 0.1 and abs(z.std() - 1) < 0.1


def test_same_seed_and_offsets_give_the_same_numbers(target):
    a, b = np.zeros(256, np.float32), np.zeros(256, np.float32)
    random_kernel[(1,)](5, a, N=256, KIND="rand", ROUNDS=10, target=target)
    random_kernel[(2,)](5, b, N=128, KIND="rand", ROUNDS=10, target=target)  # other blocking, same offsets
    np.testing.assert_array_equal(a, b)
    c = np.zeros(256, np.float32)
    random_kernel[(1,)](6, c, N=256, KIND="rand", ROUNDS=10, target=target)
    assert not np.array_equal(a, c)


def test_random_errors():
    @jit
    def float_offsets(seed, out_ptr):
        pl.store(out_ptr, pl.rand(seed, 1.5))

    with pytest.raises(CompilationError, match="random offsets must be integers"):
        float_offsets.lower(1, np.zeros(1, np.float32))

    @jit
    def wide_offsets(seed, out_ptr):
        pl.store(out_ptr, pl.rand(seed, pl.arange(0, 4).to(pl.int64)))

    with pytest.raises(CompilationError, match="random offsets must be 32-bit integers"):
        wide_offsets.lower(1, np.zeros(4, np.float32))


@jit
def four_streams_kernel(seed, out_ptr, N: pl.constexpr):
    offs = pl.arange(0, N)
    u0, u1, u2, u3 = pl.rand4x(seed, offs)
    z0, z1, _, _ = pl.randn4x(seed, offs)
    c0, _, _, _ = pl.philox(seed, offs.to(pl.uint32), offs.to(pl.uint32) * 0, offs.to(pl.uint32) * 0,
                            offs.to(pl.uint32) * 0, 10)
    pl.store(out_ptr + offs, u0)
    pl.store(out_ptr + N + offs, u3)
    pl.store(out_ptr + 2 * N + offs, z1)
    pl.store(out_ptr + 3 * N + offs, c0.to(pl.float32, bitcast=True))


def test_rand4x_randn4x_and_philox(target):
    n = 64
    out = np.zeros(4 * n, np.float32)
    four_streams_kernel[(1,)](9, out, N=n, target=target)
    streams = philox_reference(9, np.arange(n))
    np.testing.assert_array_equal(out[:n], uniform_reference(streams[0]))
    np.testing.assert_array_equal(out[n:2 * n], uniform_reference(streams[3]))
    u1, u2 = np.maximum(np.float32(1e-7), uniform_reference(streams[0])), uniform_reference(streams[1])
    z1 = np.sqrt(np.float32(-2.0) * np.log(u1)) * np.sin(np.float32(6.283185307179586) * u2)
    np.testing.assert_allclose(out[2 * n:3 * n], z1, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[3 * n:].view(np.uint32), streams[0])
