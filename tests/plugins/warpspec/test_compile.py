"""Warp-specialised kernels compiled for sm_90a without a GPU: the PTX (worker warps,
setmaxnreg, the consumers' own barrier, empty-slot arrivals), ptxas assembling it, the
compile metadata for every target, and the same PTX in every process."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from polytile.compiler import compile_module

pytest.importorskip("polytile_nvidia")
pytest.importorskip("polytile_tma")
pytest.importorskip("polytile_warpspec")

from tests.gpu.ptx_assembly import assembles  # noqa: E402

from .kernels import attention_descriptors, matmul_device_descriptors, matmul_pointers  # noqa: E402

F16 = np.zeros((256, 256), np.float16)


def _matmul(target="nvidia:sm_90a", num_warps=4, num_stages=3, ws=True, block=(128, 128, 64)):
    module = matmul_device_descriptors.lower(F16, F16, F16, 256, 256, 256, BLOCK_M=block[0], BLOCK_N=block[1],
                                             BLOCK_K=block[2], WS=ws)
    return compile_module(module, target, num_warps=num_warps, num_stages=num_stages)


def _attention(num_warps=8, causal=False, pingpong=False, ws=True, overlap=False):
    """The attention's loop split, by default without overlap-dots' rotation (what these
    tests look at is the split; test_overlap.py has the rotated loop)."""
    from polytile import config

    q = np.zeros((512, 128), np.float16)
    module = attention_descriptors.lower(q, q, q, q, 0.1, 512, 256, HEAD_DIM=128, BLOCK_M=128, BLOCK_N=64,
                                         CAUSAL=causal, WS=ws)
    with config.override(warpspec_pingpong=pingpong, warpspec_overlap=overlap):
        return compile_module(module, "nvidia:sm_90a", num_warps=num_warps, num_stages=3)


def _outcome(result):
    """The metadata entries, without the loop's place and overlap-dots' word (test_overlap.py's)."""
    return [{k: v for k, v in entry.items() if k not in ("loop", "overlap")}
            for entry in result.metadata["warp_specialize"]]


@pytest.mark.parametrize("num_warps, threads, registers, consumer", [(4, 256, 240, 240), (8, 384, 168, 232)])
def test_the_ptx_has_a_producer_group_and_consumer_warps_with_their_registers(num_warps, threads, registers,
                                                                               consumer):
    result = _matmul(num_warps=num_warps, block=(128, 256 if num_warps == 8 else 128, 64))
    ptx = result.artifacts["ptx"]
    assert _outcome(result) == [{"specialised": True, "producer_registers": 40, "consumer_registers": consumer}]
    assert f".maxntid {threads}\n" in ptx and f".maxnreg {registers}\n" in ptx
    assert ptx.count("setmaxnreg.dec.sync.aligned.u32 40;") == 1
    assert ptx.count(f"setmaxnreg.inc.sync.aligned.u32 {consumer};") == 1
    # The consumers synchronize among themselves only (barrier 1); the whole program's
    # barrier comes only before the split.
    after_split = ptx[ptx.index("setmaxnreg.inc"):]
    assert f"bar.sync 1, {num_warps * 32};" in after_split and "bar.sync 0;" not in after_split
    assert "mbarrier.arrive.release.cta.shared::cta.b64" in ptx  # a consumer warp releases a slot
    # The producer issues the loads; the consumers none (they store C through its map).
    loads = re.compile(r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global")
    assert loads.search(ptx[ptx.index("setmaxnreg.dec"):ptx.index("setmaxnreg.inc")])
    assert not loads.search(after_split)
    assert result.metadata["launch_warps"] == num_warps + 4 and result.metadata["register_cap"] == registers
    assert result.metadata["num_warps"] == num_warps
    assembles(ptx, "sm_90a", "matmul_device_descriptors")


def test_attention_is_split_and_assembles():
    from polytile.ir import print_ir

    result = _attention()
    assert _outcome(result) == [{"specialised": True, "producer_registers": 40, "consumer_registers": 232}]
    # p @ v (A in registers) is retired in its own iteration; then nothing is in flight
    # at the end of one, and each warp releases the iteration's own slot there.
    text = print_ir(result.module)
    body = text[text.index("scf.for"):text.index("ws.yield")]
    lines = [line.strip() for line in body.splitlines()]
    pv = max(i for i, line in enumerate(lines) if " = tile.dot " in line)
    assert "gpu.dot_wait" in lines[pv + 1] and "{pending = 0}" in lines[pv + 1]
    assert "ws.turn" not in text  # no ping-pong unless asked for
    end = next(i for i, line in enumerate(lines) if line.startswith("scf.yield"))
    assert re.match(r"gpu\.mbarrier_arrive %empty, %read_slot, %\w+$", lines[end - 1]), lines[end - 3:end + 1]
    assert "C7514" not in str(result.metadata.get("resources"))  # no serialized wgmma
    assembles(result.artifacts["ptx"], "sm_90a", "attention_descriptors")


def test_the_cubin_keeps_setmaxnreg():
    """nvJitLink compiles PTX as relocatable code, where ptxas drops setmaxnreg (C7504) and
    the consumers keep 168 registers: the kernel goes through the ptxas executable."""
    from polytile_nvidia import assemble

    if assemble.whole_program_assembler() is None:
        pytest.skip("no ptxas executable here")
    for result in (_attention(), _matmul(num_warps=8, block=(128, 256, 64))):
        resources = result.metadata["resources"]
        assert resources["assembler"] == "ptxas"
        assert not any("C7504" in note or "setmaxnreg" in note for note in resources["notes"]), resources
        assert resources["spills"] == {"store_bytes": 0, "load_bytes": 0}
    # Without the hint the kernel is linked as before.
    if assemble.nvjitlink_problem() is None:
        assert _matmul(ws=False).metadata["resources"]["assembler"] == "nvjitlink"


def test_without_the_hint_nothing_changes():
    result = _matmul(ws=False)
    assert "warp_specialize" not in result.metadata and "launch_warps" not in result.metadata
    assert "setmaxnreg" not in result.artifacts["ptx"]


@pytest.mark.parametrize("target, why", [
    ("nvidia:sm_80", "NVIDIA sm_80 has no setmaxnreg, no mbarriers; warp specialization needs them (NVIDIA sm_90a)"),
    ("nvidia:sm_90", "NVIDIA sm_90 has no setmaxnreg; warp specialization needs them (NVIDIA sm_90a)"),
    ("interp", "the target interp runs no warps of its own (warp specialization is for NVIDIA sm_90a)"),
])
def test_targets_without_the_hardware_run_the_loop_unspecialised_and_say_why(target, why):
    result = _matmul(target=target)
    outcome = _outcome(result)
    assert len(outcome) == 1 and not outcome[0]["specialised"] and outcome[0]["why"].startswith(why), outcome
    if target.startswith("nvidia"):
        assert "setmaxnreg" not in result.artifacts["ptx"]


def test_amd_runs_the_loop_unspecialised_and_says_why():
    pytest.importorskip("polytile_amd")
    outcome = _outcome(_matmul(target="amd:gfx942"))
    assert not outcome[0]["specialised"] and "gfx942 has no" in outcome[0]["why"], outcome


def test_a_loop_that_is_not_pipelined_says_so():
    outcome = _outcome(_matmul(num_stages=1))
    assert not outcome[0]["specialised"] and "not pipelined" in outcome[0]["why"]


def _pointer_matmul(num_warps):
    module = matmul_pointers.lower(F16, F16, F16, 256, 256, 256, 256, 256, 256, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                   WS=True)
    return compile_module(module, "nvidia:sm_90a", num_warps=num_warps, num_stages=3)


def test_cp_async_loads_are_copied_by_the_whole_producer_group():
    from polytile.ir import print_ir

    result = _pointer_matmul(4)
    assert _outcome(result) == [{"specialised": True, "producer_registers": 40, "consumer_registers": 240}]
    text = print_ir(result.module)
    consumer, producer = text[text.index("ws.warp_specialize"):].split("\n  } {\n", 1)
    # The consumers issue the prologue's copies (their pointers are theirs) and carry no
    # pointers through the loop; the producer's four warps copy the rest, advancing their
    # own pointers, and arrive per thread (128 arrivals, as the consumers' prologue).
    assert consumer.count("gpu.async_copy ") == 4 and "gpu.async_copy_arrive" in consumer
    loop = consumer[consumer.index("scf.for"):]
    assert "ptr<f16>" not in loop.splitlines()[0] and "tile.addptr" not in loop
    assert producer.count("gpu.async_copy ") == 2 and "tile.addptr" in producer
    assert "producer_working_warps = 4" in text and re.search(r"gpu\.mbarrier_init %\w+ \{count = 128\}", text)
    ptx = result.artifacts["ptx"]
    assert "cp.async.mbarrier.arrive.noinc" in ptx[ptx.index("setmaxnreg.dec"):ptx.index("setmaxnreg.inc")]
    assembles(ptx, "sm_90a", "matmul_pointers")


def test_cp_async_loads_laid_out_for_other_than_four_warps_are_not_split_and_say_so():
    outcome = _outcome(_pointer_matmul(8))
    assert not outcome[0]["specialised"] and "cp.async copies of pointer tiles laid out for 8 warps" in \
        outcome[0]["why"], outcome


# -- determinism (Triton PR #7828: its channel order changed between runs) ---------------

DIGEST = """
import hashlib, sys
import numpy as np
sys.path.insert(0, {root!r})
from polytile.compiler import compile_module
from tests.plugins.warpspec.kernels import (attention_descriptors, matmul_device_descriptors, matmul_persistent,
                                            matmul_pointers)
f16 = np.zeros((256, 256), np.float16)
q = np.zeros((512, 128), np.float16)
kernels = [
    (matmul_device_descriptors.lower(f16, f16, f16, 256, 256, 256, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, WS=True), 4),
    (matmul_pointers.lower(f16, f16, f16, 256, 256, 256, 256, 256, 256, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                           WS=True), 4),
    (attention_descriptors.lower(q, q, q, q, 0.1, 512, 256, HEAD_DIM=128, BLOCK_M=128, BLOCK_N=64, CAUSAL=True,
                                 WS=True), 8),
    (matmul_persistent.lower(f16, f16, f16, 256, 256, 256, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, NUM_PROGRAMS=132,
                             WS=True, FLATTEN=True), 8),
]
for module, warps in kernels:
    result = compile_module(module, "nvidia:sm_90a", num_warps=warps, num_stages=3)
    assert result.metadata["warp_specialize"][0]["specialised"], result.metadata["warp_specialize"]
    print(hashlib.sha256(result.artifacts["ptx"].encode()).hexdigest())
"""


def test_the_same_kernels_give_the_same_ptx_in_twenty_processes(tmp_path):
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[3])
    script = DIGEST.format(root=root)

    def digests(seed: int) -> str:
        env = {**os.environ, "PYTHONHASHSEED": str(seed), "POLYTILE_CACHE": "0"}
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    with ThreadPoolExecutor(max_workers=4) as pool:
        outputs = list(pool.map(digests, [1 + 7919 * i for i in range(20)]))
    assert len(outputs[0].split()) == 4
    assert len(set(outputs)) == 1, "the PTX differs between processes:\n" + "\n".join(sorted(set(outputs)))


def test_with_pingpong_the_consumer_groups_take_turns_issuing_each_dot():
    from polytile.ir import print_ir

    result = _attention(pingpong=True)
    text = print_ir(result.module)
    lines = [line.strip() for line in text[text.index("scf.for"):text.index("ws.yield")].splitlines()]
    dots = [i for i, line in enumerate(lines) if " = tile.dot " in line]
    assert len(dots) == 2
    for dot in dots:
        assert lines[dot - 1] == 'ws.turn {step = "wait"}' and lines[dot + 1] == 'ws.turn {step = "pass"}'
    assert 'ws.turn {step = "start"}' in text and 'ws.turn {step = "end"}' in text
    ptx = result.artifacts["ptx"]
    assert "bar.arrive 3, 256;" in ptx and "bar.sync 3, 256;" in ptx and re.search(r"bar\.sync %r\d+, 256;", ptx)
    assembles(ptx, "sm_90a", "attention_descriptors")


def test_with_pingpong_and_the_overlap_the_groups_take_turns_issuing_each_dot():
    # overlap-dots issues q @ k_j and then p_{j-1} @ v_{j-1} (its slot read and A
    # converted between them): each dot still in its own turn.
    from polytile.ir import print_ir

    result = _attention(pingpong=True, overlap=True)
    assert result.metadata["warp_specialize"][0]["overlap"] is True
    text = print_ir(result.module)
    lines = [line.strip() for line in text[text.index("scf.for"):text.index("ws.yield")].splitlines()]
    dots = [i for i, line in enumerate(lines) if " = tile.dot " in line]
    assert len(dots) == 2 and not any("gpu.dot_wait" in line for line in lines[dots[0]:dots[1]]), lines
    for dot in dots:
        assert lines[dot - 1] == 'ws.turn {step = "wait"}' and lines[dot + 1] == 'ws.turn {step = "pass"}'
    assembles(result.artifacts["ptx"], "sm_90a", "attention_descriptors")


def test_the_proxy_fence_after_a_moved_store_moves_with_it():
    # Attention's Q, loaded through pointers and staged in shared memory before the loop
    # for wgmma to read in place, is stored by the consumers (its layout is theirs): the
    # proxy fence after the store must come after it, in the consumer region, not before
    # the split (a race on an H100: wgmma read Q before the generic proxy's writes were
    # ordered).  (A Q loaded through its descriptor is read in its slot: no store.)
    from polytile.ir import print_ir

    q = np.zeros((512, 64), np.float16)
    module = attention_descriptors.lower(q, q, q, q, 0.1, 512, 256, HEAD_DIM=64, BLOCK_M=64, BLOCK_N=64,
                                         CAUSAL=True, WS=True, Q_POINTERS=True)
    result = compile_module(module, "nvidia:sm_90a", num_warps=4, num_stages=3)
    assert _outcome(result) == [{"specialised": True, "producer_registers": 40, "consumer_registers": 240}]
    lines = [line.strip() for line in print_ir(result.module).splitlines()]
    split = next(i for i, line in enumerate(lines) if "ws.warp_specialize" in line)
    store = next(i for i, line in enumerate(lines) if "gpu.local_alloc source(" in line)
    fences = [i for i, line in enumerate(lines) if line == "gpu.fence_async_shared"]
    assert split < store < fences[0] and fences[0] == store + 1, "\n".join(lines[split - 3:store + 4])


# -- what the review of the split found (2026-11-28) ------------------------------------


def test_consumer_warps_that_are_not_whole_warp_groups_are_not_split():
    outcome = _outcome(_matmul(num_warps=2, block=(64, 64, 64)))
    assert not outcome[0]["specialised"] and "whole warp groups" in outcome[0]["why"], outcome


@pytest.mark.parametrize("consumer_warps, maxnreg", [(4, None), (8, None), (8, 160), (4, 128), (12, None)])
def test_the_consumers_never_ask_for_more_than_the_producer_gives_back(consumer_warps, maxnreg):
    # setmaxnreg.inc waits until the pool holds the registers: more would hang.
    from types import SimpleNamespace

    from polytile_warpspec.registers import RegisterPlan, plan_registers

    plan = plan_registers(SimpleNamespace(warp_size=32, registers_per_program=65536), consumer_warps, 4, 0, 0,
                          maxnreg)
    assert isinstance(plan, RegisterPlan), plan
    assert consumer_warps * (plan.consumer - plan.kernel) <= 4 * (plan.kernel - plan.producer)
    assert (consumer_warps + 4) * 32 * plan.kernel <= 65536 and (maxnreg is None or plan.kernel <= maxnreg)


def test_asking_the_consumers_for_too_many_registers_is_a_reason_not_a_hang():
    from polytile import config

    with config.override(warpspec_consumer_registers=256):
        result = _matmul(num_warps=8, block=(128, 256, 64))
    outcome = _outcome(result)
    assert not outcome[0]["specialised"] and "registers per thread do not fit" in outcome[0]["why"], outcome


def test_cp_async_prologue_fills_the_loop_does_not_read_are_waited_for():
    # With fewer iterations than stages - 1, the consumers' prologue fills of the missing
    # iterations still land (zeros): they are waited for before the ring's bytes are reused.
    from polytile.ir import print_ir

    text = print_ir(_pointer_matmul(4).module)
    after = text[text.rindex("ws.yield"):]
    assert after.count("scf.if") == 2 and after.count("gpu.mbarrier_wait") == 2  # slots 0 and 1 (3 stages)
    assert after.index("gpu.mbarrier_wait") < after.index("gpu.mbarrier_inval")


def test_maps_made_in_the_kernel_are_acquired_by_every_thread():
    # The producer's thread (not in warp 0) issues the copies through them.
    ptx = _matmul().artifacts["ptx"]
    acquires = re.findall(r"[^\n]*fence\.proxy\.tensormap::generic\.acquire[^\n]*", ptx)
    assert acquires and not any("@" in line for line in acquires), acquires


def test_a_loop_bound_made_from_tiles_is_a_reason_not_a_crash():
    from .kernels import matmul_from_a_loaded_start

    starts = np.zeros(16, np.int32)
    module = matmul_from_a_loaded_start.lower(F16, F16, F16, starts, 256, 256, 256, BLOCK=128)
    outcome = _outcome(compile_module(module, "nvidia:sm_90a", num_warps=4, num_stages=3))
    assert not outcome[0]["specialised"] and "the producer" in outcome[0]["why"], outcome


@pytest.mark.parametrize("tile_store, specialised", [(True, False), (False, True)])
def test_only_writes_the_consumers_make_before_the_loop_stop_the_split(tile_store, specialised):
    from .kernels import matmul_after_a_store

    flags = np.zeros(16, np.int32)
    module = matmul_after_a_store.lower(F16, F16, F16, flags, 256, 256, 256, BLOCK=128, TILE_STORE=tile_store)
    outcome = _outcome(compile_module(module, "nvidia:sm_90a", num_warps=4, num_stages=3))
    assert outcome[0]["specialised"] == specialised, outcome
    assert specialised or "writes memory before the loop" in outcome[0]["why"]


# --------------------------------------------------------------------------------------
# Per-loop options: pl.WarpSpecialize wins over the settings


def test_a_loops_own_register_split_wins_over_the_settings():
    import polytile.language as pl
    from polytile import config

    with config.override(warpspec_producer_registers=56):
        result = _matmul(num_warps=8, block=(128, 256, 64),
                         ws=pl.WarpSpecialize(producer_registers=24, consumer_registers=224))
    ptx = result.artifacts["ptx"]
    assert _outcome(result) == [{"specialised": True, "producer_registers": 24, "consumer_registers": 224}]
    assert ptx.count("setmaxnreg.dec.sync.aligned.u32 24;") == 1
    assert ptx.count("setmaxnreg.inc.sync.aligned.u32 224;") == 1
    assembles(ptx, "sm_90a", "matmul_device_descriptors")
    # Only what the loop gives is its own: the rest comes from the settings.
    with config.override(warpspec_producer_registers=56):
        result = _matmul(num_warps=8, block=(128, 256, 64), ws=pl.WarpSpecialize(consumer_registers=224))
    assert _outcome(result) == [{"specialised": True, "producer_registers": 56, "consumer_registers": 224}]


def test_a_loops_register_split_that_cannot_fit_leaves_it_unspecialised_and_says_why():
    import polytile.language as pl

    result = _matmul(num_warps=8, block=(128, 256, 64), ws=pl.WarpSpecialize(consumer_registers=256))
    [entry] = _outcome(result)
    assert entry["specialised"] is False and "the consumers' 256 registers per thread do not fit" in entry["why"]
    assert "setmaxnreg" not in result.artifacts["ptx"]


def test_a_loops_pingpong_wins_over_the_setting():
    import polytile.language as pl
    from polytile.ir import print_ir

    on = _attention(pingpong=False, ws=pl.WarpSpecialize(pingpong=True))
    assert 'ws.turn {step = "wait"}' in print_ir(on.module)
    off = _attention(pingpong=True, ws=pl.WarpSpecialize(pingpong=False))
    assert "ws.turn" not in print_ir(off.module)
    assert _outcome(off)[0]["specialised"] is True


@pytest.mark.parametrize("value, message", [
    (dict(producer_registers=20), "a multiple of 8 from 24 to 256"),
    (dict(consumer_registers=250), "a multiple of 8 from 24 to 256"),
    (dict(producer_registers=1.5), "use a compile-time integer"),
    (dict(pingpong="yes"), "use True, False or None"),
    (dict(overlap=1), r"pl.WarpSpecialize\(overlap=1\): use True, False or None"),
])
def test_warp_specialize_options_are_checked(value, message):
    import polytile.language as pl
    from polytile.language.loop_options import LoopOptionError

    with pytest.raises(LoopOptionError, match=message):
        pl.WarpSpecialize(**value)
    with pytest.raises(ValueError):  # a ValueError to host code
        pl.WarpSpecialize(**value)
