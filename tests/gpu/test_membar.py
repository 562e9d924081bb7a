"""insert-barriers: a gpu.barrier only where a shared-memory hazard needs one, through
branches, loops (to a fixed point) and calls.  IR text in, IR text out."""

from __future__ import annotations

from polytile.gpu.allocation import AllocateShared
from polytile.gpu.membar import Access, InsertBarriers
from polytile.ir_testing import dedent

from .memory_ir import run


def barriers(text: str) -> str:
    return run(text, AllocateShared(), InsertBarriers())


def body(out: str) -> list[str]:
    """The op names of the output, one per line, without the attributes and types."""
    lines = []
    for line in out.splitlines():
        words = line.split()
        name = next((w for w in words if "." in w and not w.startswith(("%", "{", "#", "@"))), None)
        if name is not None and name != "func.func":
            lines.append(("= " if "=" in words[:2] else "") + name)
    return lines


def from_loop(out: str) -> list[str]:
    ops = body(out)
    return ops[ops.index("= scf.for"):]


def test_read_after_write_write_after_read_and_nothing_between_reads():
    text = """
    func.func @k(%a: tile<64xf32, {A}>) attributes {{kernel = true}} {{
      %0 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>
      %1 = gpu.local_load %0 : tile<64xf32, {A}>
      %2 = gpu.local_load %0 : tile<64xf32, {A}>
      gpu.local_store %a, %0
      func.return
    }}
    """
    assert barriers(text) == dedent("""
    func.func @k(%a: tile<64xf32, {A}>) attributes {gpu.shared_bytes = 256, kernel = true} {
      %0 = gpu.local_alloc source(%a) {gpu.buffer_offset = 0} : !gpu.buffer<64xf32, {S}>
      gpu.barrier
      %1 = gpu.local_load %0 : tile<64xf32, {A}>
      %2 = gpu.local_load %0 : tile<64xf32, {A}>
      gpu.barrier
      gpu.local_store %a, %0
      func.return
    }
    """)


def test_disjoint_buffers_need_no_barrier():
    text = """
    func.func @k(%a: tile<64xf32, {A}>) attributes {{kernel = true}} {{
      %0 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>
      %1 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>
      gpu.local_store %a, %1
      gpu.local_store %a, %0
      func.return
    }}
    """
    # %1 is written twice: a barrier; it also orders %0's first write before its second.
    assert body(barriers(text)) == ["= gpu.local_alloc", "= gpu.local_alloc", "gpu.barrier", "gpu.local_store",
                                    "gpu.local_store", "func.return"]


def test_a_conversion_synchronizes_inside_and_leaves_its_reads_pending():
    # Both conversions use offset 0: the second's writes race with the first's reads.
    # The buffer written before the second conversion is safe to read after it.
    text = """
    func.func @k(%a: tile<64xf32, {A}>) attributes {{kernel = true}} {{
      %0 = gpu.convert_layout %a : tile<64xf32, {B}>
      %1 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>
      %2 = gpu.convert_layout %0 : tile<64xf32, {A}>
      %3 = gpu.local_load %1 : tile<64xf32, {A}>
      func.return
    }}
    """
    assert body(barriers(text)) == ["= gpu.convert_layout", "gpu.barrier", "= gpu.local_alloc", "= gpu.convert_layout",
                                    "= gpu.local_load", "func.return"]
    two = """
    func.func @k(%a: tile<64xf32, {A}>) attributes {{kernel = true}} {{
      %0 = gpu.convert_layout %a : tile<64xf32, {B}>
      %1 = gpu.convert_layout %0 : tile<64xf32, {A}>
      func.return
    }}
    """
    assert body(barriers(two)) == ["= gpu.convert_layout", "gpu.barrier", "= gpu.convert_layout", "func.return"]


def test_a_barrier_already_there_or_the_users_debug_barrier_counts():
    text = """
    func.func @k(%a: tile<64xf32, {A}>) attributes {{kernel = true}} {{
      %0 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>
      tile.barrier
      gpu.local_store %a, %0
      func.return
    }}
    """
    assert "gpu.barrier" not in barriers(text)
    # Running the pass twice adds nothing.
    once = barriers(text.replace("tile.barrier\n", ""))
    assert once.count("gpu.barrier") == 1
    assert run(once.replace("gpu.barrier\n", "tile.barrier\n"), InsertBarriers(), template=False).count("gpu.barrier") == 0


LOOP = """
func.func @k(%a: tile<64xf32, {A}>, %n: i32) attributes {{kernel = true}} {{
  %c0 = arith.constant {{value = 0}} : i32
  %c1 = arith.constant {{value = 1}} : i32
  %r = scf.for %c0, %n, %c1, %a : tile<64xf32, {A}> {{
  ^bb0(%i: i32, %x: tile<64xf32, {A}>):
    BODY
    scf.yield %y
  }}
  func.return
}}
"""


def test_loop_back_edge_barrier_only_when_the_previous_iteration_left_a_conflict():
    # Two conversions on offset 0: the second needs a barrier in every iteration, and the
    # first too, because of the second's reads in the previous iteration.
    two = LOOP.replace("BODY", "%t = gpu.convert_layout %x : tile<64xf32, {B}>\n    "
                               "%y = gpu.convert_layout %t : tile<64xf32, {A}>")
    assert from_loop(barriers(two)) == ["= scf.for", "gpu.barrier", "= gpu.convert_layout", "gpu.barrier",
                                        "= gpu.convert_layout", "scf.yield", "func.return"]
    # One conversion: its reads from the previous iteration race with its own writes.
    one = LOOP.replace("BODY", "%y = gpu.convert_layout %x : tile<64xf32, {A}>").replace(
        "%y = gpu.convert_layout %x : tile<64xf32, {A}>", "%t = gpu.convert_layout %x : tile<64xf32, {B}>\n    "
        "%y = arith.addf %x, %x : tile<64xf32, {A}>")
    assert from_loop(barriers(one))[:4] == ["= scf.for", "gpu.barrier", "= gpu.convert_layout", "= arith.addf"]


def test_loop_that_only_reads_needs_no_barrier():
    text = LOOP.replace("%r = scf.for", "%0 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>\n  "
                                        "%1 = gpu.local_load %0 : tile<64xf32, {A}>\n  %r = scf.for").replace(
        "BODY", "%y = gpu.local_load %0 : tile<64xf32, {A}>")
    assert body(barriers(text))[2:] == ["= gpu.local_alloc", "gpu.barrier", "= gpu.local_load", "= scf.for",
                                        "= gpu.local_load", "scf.yield", "func.return"]


def test_a_write_before_a_loop_that_reads_it_gets_its_barrier_before_the_loop_not_in_every_iteration():
    # Without the load before the loop the first read is in the body: the barrier goes
    # before the loop, which then needs none.
    text = LOOP.replace("%r = scf.for", "%0 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>\n  "
                                        "%r = scf.for").replace(
        "BODY", "%y = gpu.local_load %0 : tile<64xf32, {A}>")
    assert body(barriers(text))[2:] == ["= gpu.local_alloc", "gpu.barrier", "= scf.for", "= gpu.local_load",
                                        "scf.yield", "func.return"]


def test_the_barrier_for_what_came_before_goes_before_an_inner_loop_and_a_while_loop_too():
    # Nested: the write before the outer loop conflicts with the read in the inner body;
    # one barrier before the outer loop does for every iteration of both.
    nested = LOOP.replace("%r = scf.for", "%0 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>\n  "
                                          "%r = scf.for").replace(
        "BODY", "%y = scf.for %c0, %n, %c1, %x : tile<64xf32, {A}> {{\n"
                "    ^bb1(%j: i32, %w: tile<64xf32, {A}>):\n"
                "      %v = gpu.local_load %0 : tile<64xf32, {A}>\n"
                "      scf.yield %v\n"
                "    }}")
    ops = body(barriers(nested))
    assert ops.count("gpu.barrier") == 1
    assert ops.index("= gpu.local_alloc") < ops.index("gpu.barrier") < ops.index("= scf.for")
    # A while loop whose condition block reads what was written before it.
    text = """
    func.func @k(%a: tile<64xf32, {A}>, %n: i32) attributes {{kernel = true}} {{
      %0 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>
      %c0 = arith.constant {{value = 0}} : i32
      %r = scf.while %c0 : i32 {{
      ^bb0(%i: i32):
        %t = gpu.local_load %0 : tile<64xf32, {A}>
        %go = arith.cmpi %i, %n {{predicate = "slt"}} : i1
        scf.condition %go, %i
      }} {{
      ^bb1(%j: i32):
        scf.yield %j
      }}
      func.return
    }}
    """
    ops = body(barriers(text))
    assert ops.count("gpu.barrier") == 1 and ops.index("gpu.barrier") < ops.index("= scf.while")


def test_loop_that_writes_what_it_read_synchronizes_at_the_top_of_the_body():
    text = LOOP.replace("%r = scf.for", "%0 = gpu.local_alloc : !gpu.buffer<64xf32, {S}>\n  %r = scf.for").replace(
        "BODY", "gpu.local_store %x, %0\n    %y = gpu.local_load %0 : tile<64xf32, {A}>")
    assert from_loop(barriers(text))[:6] == ["= scf.for", "gpu.barrier", "gpu.local_store", "gpu.barrier",
                                         "= gpu.local_load", "scf.yield"]


def test_a_write_in_one_branch_is_synchronized_after_the_if():
    text = """
    func.func @k(%a: tile<64xf32, {A}>, %c: i1) attributes {{kernel = true}} {{
      %0 = gpu.local_alloc : !gpu.buffer<64xf32, {S}>
      scf.if %c {{
        gpu.local_store %a, %0
        scf.yield
      }} {{
        scf.yield
      }}
      %1 = gpu.local_load %0 : tile<64xf32, {A}>
      func.return
    }}
    """
    assert body(barriers(text)) == ["= gpu.local_alloc", "scf.if", "gpu.local_store", "scf.yield", "scf.yield",
                                    "gpu.barrier", "= gpu.local_load", "func.return"]


def test_a_barrier_in_both_branches_synchronizes_what_came_before():
    text = """
    func.func @k(%a: tile<64xf32, {A}>, %c: i1) attributes {{kernel = true}} {{
      %0 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>
      scf.if %c {{
        %1 = gpu.convert_layout %a : tile<64xf32, {B}>
        scf.yield
      }} {{
        %2 = gpu.convert_layout %a : tile<64xf32, {B}>
        scf.yield
      }}
      %3 = gpu.local_load %0 : tile<64xf32, {A}>
      func.return
    }}
    """
    # The conversions' own barriers make the buffer's write visible to the load.
    assert "gpu.barrier" not in barriers(text)


CALLS = """
func.func @helper(%a: tile<64xf32, {A}>) -> tile<64xf32, {A}> attributes {{noinline = true}} {{
  %0 = gpu.convert_layout %a : tile<64xf32, {B}>
  %1 = arith.addf %0, %0 : tile<64xf32, {B}>
  %2 = gpu.convert_layout %1 : tile<64xf32, {A}>
  func.return %2
}}
func.func @k(%a: tile<64xf32, {A}>) attributes {{kernel = true}} {{
  %0 = func.call %a {{callee = @helper}} : tile<64xf32, {A}>
  %1 = func.call %0 {{callee = @helper}} : tile<64xf32, {A}>
  func.return
}}
"""


def test_a_callee_reports_what_it_leaves_pending_and_the_caller_synchronizes():
    out = barriers(CALLS)
    helper, kernel = out.split("func.func @k")
    assert helper.count("gpu.barrier") == 1  # between its two conversions
    assert "gpu.always_synchronizes = true" in helper
    assert 'gpu.pending_at_return = [[0, 256, "r"]]' in helper
    # The second call's conversion writes where the first one's left reads pending.
    assert body("func.func @k" + kernel) == ["= func.call", "gpu.barrier", "= func.call", "func.return"]


def test_accesses_conflict_unless_both_read_or_disjoint():
    w, r = Access(0, 16, "w"), Access(8, 16, "r")
    assert w.conflicts(r) and r.conflicts(w) and w.conflicts(w)
    assert not r.conflicts(r) and not w.conflicts(Access(16, 4, "w"))


def test_the_documented_example_is_what_the_passes_produce():
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "gpu-memory.md").read_text()
    shown = re.findall(r"```ir\n(.*?)```", doc, re.S)[0]
    bare = re.sub(r" \{gpu\.scratch_offset = 0\}", "", shown).replace("  gpu.barrier\n", "").replace(
        "gpu.shared_bytes = 256, ", "")
    from polytile.ir_testing import apply_passes

    from .memory_ir import context

    assert apply_passes(bare, AllocateShared(), InsertBarriers(), context=context()) == shown


def test_a_while_loop_leaves_after_its_condition_block():
    # The loop exits right after `before`, whose read of %0 is then still pending: the
    # write after the loop needs a barrier even though `after` ends synchronized.
    text = """
    func.func @k(%a: tile<64xf32, {A}>, %n: i32) attributes {{kernel = true}} {{
      %0 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>
      gpu.barrier
      %1 = scf.while %n : i32 {{
      ^bb0(%k: i32):
        %2 = gpu.local_load %0 : tile<64xf32, {A}>
        %3 = arith.cmpi %k, %n {{predicate = "sgt"}} : i1
        scf.condition %3, %k
      }} {{
      ^bb0(%k_1: i32):
        gpu.barrier
        scf.yield %k_1
      }}
      gpu.local_store %a, %0
      func.return
    }}
    """
    ops = body(barriers(text))
    assert ops[-3:] == ["gpu.barrier", "gpu.local_store", "func.return"], ops
