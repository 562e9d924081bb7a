"""Operations, blocks, regions, values and the builder: the API passes rewrite IR with."""

from __future__ import annotations

import textwrap

import pytest

from polytile.dialects.arith import AddIOp, ConstantOp, ExtFOp, ExtSIOp, MulIOp, SubIOp
from polytile.dialects.func import FuncOp, ReturnOp
from polytile.dialects.scf import ForOp, IfOp, YieldOp
from polytile.dialects.tile import LoadOp
from polytile.errors import SourceLocation
from polytile.ir import Block, BlockArgument, Builder, InsertionPoint, OpResult, Region, parse_module, print_ir, verify
from polytile.ir import types as t

AddI = AddIOp
MulI = MulIOp
SubI = SubIOp


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def make_func(*arg_types, names=None):
    func = FuncOp.create("f", list(arg_types), arg_names=names)
    return func, Builder.at_end(func.entry_block), func.arguments


def names(block: Block) -> list[str]:
    return [op.name for op in block]


# -- values and use lists ---------------------------------------------------------------


def test_use_lists_track_every_operand():
    func, b, (x, y) = make_func(t.i32, t.i32)
    add = b.create(AddI, x, x)
    mul = b.create(MulI, add.result, y)
    assert [(u.owner, u.index) for u in x.uses] == [(add, 0), (add, 1)]
    assert [(u.owner, u.index) for u in y.uses] == [(mul, 1)]
    assert list(x.users()) == [add]  # each user once
    assert add.result.has_uses and not mul.result.has_uses
    assert isinstance(add.result, OpResult) and add.result.defining_op is add and add.result.index == 0
    assert isinstance(x, BlockArgument) and x.defining_op is None and x.parent_block is func.entry_block
    assert add.result.parent_block is func.entry_block
    assert repr(x.uses[0]) == "Use(arith.addi#0)"


def test_set_operand_moves_the_use():
    func, b, (x, y) = make_func(t.i32, t.i32)
    add = b.create(AddI, x, x)
    add.set_operand(1, y)
    assert add.operands == (x, y)
    assert [u.index for u in x.uses] == [0] and [u.index for u in y.uses] == [1]
    add.set_operand(1, y)  # the same value: nothing changes
    assert len(y.uses) == 1


def test_value_replace_all_uses_with():
    func, b, (x, y) = make_func(t.i32, t.i32)
    add = b.create(AddI, x, x)
    mul = b.create(MulI, x, add.result)
    x.replace_all_uses_with(y)
    assert add.operands == (y, y) and mul.operands == (y, add.result)
    assert x.uses == [] and len(y.uses) == 3
    y.replace_all_uses_with(y)  # replacing with itself is a no-op
    assert len(y.uses) == 3


def test_replace_uses_if():
    func, b, (x, y) = make_func(t.i32, t.i32)
    add = b.create(AddI, x, x)
    mul = b.create(MulI, x, x)
    x.replace_uses_if(y, lambda use: use.owner is mul)
    assert add.operands == (x, x) and mul.operands == (y, y)


def test_op_replace_all_uses_with_checks_the_count():
    func, b, (x, y) = make_func(t.i32, t.i32)
    add = b.create(AddI, x, y)
    user = b.create(SubI, add.result, add.result)
    add.replace_all_uses_with([x])
    assert user.operands == (x, x) and not add.result.uses
    with pytest.raises(ValueError, match="replacing 1 results of 'arith.addi' with 2 values"):
        add.replace_all_uses_with([x, y])


def test_result_accessor():
    func, b, (x,) = make_func(t.i32)
    loop = b.create(ForOp, x, x, x, [x, x], result_types=[t.i32, t.i32])
    with pytest.raises(ValueError, match="'scf.for' has 2 results, not one"):
        loop.result  # noqa: B018
    assert loop.outputs == loop.results and loop.init_args == (x, x)


def test_operands_must_be_values():
    with pytest.raises(TypeError, match="operand of 'arith.addi' must be an IR value, got int 3"):
        AddI([3, 4], [t.i32])


# -- erasing, detaching, moving ---------------------------------------------------------


def test_erase_refuses_an_op_whose_results_are_used():
    func, b, (x,) = make_func(t.i32)
    add = b.create(AddI, x, x)
    b.create(MulI, add.result, x)
    b.create(SubI, add.result, x)
    with pytest.raises(ValueError, match=r"cannot erase 'arith.addi': its result is still used by arith.muli, "
                                         r"arith.subi"):
        add.erase()
    assert add.parent is func.entry_block and len(x.uses) == 4


def test_erase_drops_the_uses_of_the_op_and_of_ops_nested_in_it():
    func, b, (x, c) = make_func(t.i32, t.i1)
    if_op = b.create(IfOp, c, result_types=[])
    inner = Builder.at_end(if_op.then_region.block)
    inner.create(AddI, x, x)
    inner.create(YieldOp, [])
    Builder.at_end(if_op.else_region.block).create(YieldOp, [])
    assert len(x.uses) == 2 and len(c.uses) == 1
    if_op.erase()
    assert x.uses == [] and c.uses == [] and len(func.entry_block) == 0
    assert if_op.parent is None


def test_detach_keeps_uses_and_allows_reinsertion():
    func, b, (x,) = make_func(t.i32)
    first = b.create(AddI, x, x)
    second = b.create(MulI, x, x)
    assert first.detach() is first
    assert first.parent is None and first.prev_op is None and first.next_op is None
    assert names(func.entry_block) == ["arith.muli"] and len(func.entry_block) == 1
    assert len(x.uses) == 4  # detaching is not erasing
    func.entry_block.insert_after(first, second)
    assert names(func.entry_block) == ["arith.muli", "arith.addi"]
    first.detach().detach()  # detaching a detached op is harmless


def test_move_before_and_after():
    func, b, (x,) = make_func(t.i32)
    a, m, s = b.create(AddI, x, x), b.create(MulI, x, x), b.create(SubI, x, x)
    s.move_before(a)
    assert func.entry_block.ops == [s, a, m]
    s.move_after(m)
    assert func.entry_block.ops == [a, m, s]
    other = Block()
    other.append(ConstantOp.build(value=1, result_types=[t.i32]))
    a.move_after(other.first_op)
    assert func.entry_block.ops == [m, s] and names(other) == ["arith.constant", "arith.addi"]
    assert a.parent is other and len(other) == 2 and len(func.entry_block) == 2


def test_inserting_an_op_that_is_in_a_block_is_refused():
    func, b, (x,) = make_func(t.i32)
    add = b.create(AddI, x, x)
    with pytest.raises(ValueError, match="'arith.addi' is already in a block; detach it first"):
        Block().append(add)


# -- the block's linked list ------------------------------------------------------------


def test_block_linked_list_operations():
    block = Block([t.i32])
    (x,) = block.arguments
    a, m, s, c = AddI.build(x, x), MulI.build(x, x), SubI.build(x, x), ConstantOp.build(value=0,
                                                                                          result_types=[t.i32])
    assert len(block) == 0 and block.first_op is None and block.last_op is None and block.terminator is None
    block.append(a)
    block.insert_before(m, a)          # at the front
    block.insert_after(s, a)           # at the back, after the last op
    block.insert_before(c, None)       # None: at the end
    assert block.ops == [m, a, s, c] and len(block) == 4
    assert block.first_op is m and block.last_op is c and block.terminator is c
    assert (m.prev_op, m.next_op, a.prev_op, a.next_op) == (None, a, m, s)
    block.unlink(a)
    assert block.ops == [m, s, c] and m.next_op is s and s.prev_op is m
    block.unlink(m)
    block.unlink(c)
    assert block.ops == [s] and block.first_op is s and block.last_op is s and s.prev_op is None and s.next_op is None
    with pytest.raises(ValueError, match="'arith.addi' is not in this block"):
        block.unlink(a)
    block.unlink(s)
    assert len(block) == 0 and block.first_op is None and block.last_op is None


def _links_are_sound(block: Block) -> None:
    ops, op, prev = [], block.first_op, None
    while op is not None:
        assert op.parent is block and op.prev_op is prev
        ops.append(op)
        prev, op = op, op.next_op
    assert block.last_op is prev and len(block) == len(ops)


def test_inserting_before_an_erased_anchor_is_refused_and_the_list_stays_intact():
    func, b, (x,) = make_func(t.i32)
    a, m = b.create(AddI, x, x), b.create(MulI, x, x)
    m.erase()
    with pytest.raises(ValueError, match=r"the insertion point's anchor op 'arith.muli' is no longer in this block "
                                         r"\(was it erased\?\)"):
        func.entry_block.insert_before(SubI.build(x, x), m)
    with pytest.raises(ValueError, match="anchor op 'arith.muli' is no longer in this block"):
        func.entry_block.insert_after(SubI.build(x, x), m)
    assert func.entry_block.ops == [a]
    _links_are_sound(func.entry_block)


def test_an_anchor_of_another_block_is_refused():
    func, b, (x,) = make_func(t.i32)
    a = b.create(AddI, x, x)
    other = Block()
    c = other.append(ConstantOp.build(value=1, result_types=[t.i32]))
    sub = SubI.build(x, x)
    with pytest.raises(ValueError, match="anchor op 'arith.constant' is in another block"):
        func.entry_block.insert_before(sub, c)
    with pytest.raises(ValueError, match="anchor op 'arith.constant' is in another block"):
        func.entry_block.insert_after(sub, c)
    assert sub.parent is None and func.entry_block.ops == [a] and other.ops == [c]
    _links_are_sound(func.entry_block)
    _links_are_sound(other)


def test_moving_next_to_a_detached_op_leaves_the_op_in_place():
    func, b, (x,) = make_func(t.i32)
    a, m = b.create(AddI, x, x), b.create(MulI, x, x)
    loose = SubI.build(x, x)
    with pytest.raises(ValueError, match="cannot move 'arith.addi' next to 'arith.subi', which is in no block"):
        a.move_before(loose)
    with pytest.raises(ValueError, match="cannot move 'arith.addi' next to itself"):
        a.move_after(a)
    assert func.entry_block.ops == [a, m]
    _links_are_sound(func.entry_block)


def test_a_builder_goes_on_where_its_erased_anchor_was():
    # The usual rewrite: create the replacement before the op, erase the op, create more.
    func, b, (x,) = make_func(t.i32)
    a, m, z = b.create(AddI, x, x), b.create(MulI, x, x), b.create(SubI, x, x)
    here = Builder.before(m)
    c1 = here.create(ConstantOp, value=1, result_types=[t.i32])
    m.erase()
    c2 = here.create(ConstantOp, value=2, result_types=[t.i32])
    c3 = here.create(ConstantOp, value=3, result_types=[t.i32])
    assert func.entry_block.ops == [a, c1, c2, c3, z]
    _links_are_sound(func.entry_block)


def test_a_builder_whose_anchor_was_erased_before_it_inserted_anything_raises():
    func, b, (x,) = make_func(t.i32)
    a, m = b.create(AddI, x, x), b.create(MulI, x, x)
    here = Builder.before(m)
    m.erase()
    with pytest.raises(ValueError, match=r"anchor op 'arith.muli' is no longer in this block \(was it erased\?\); "
                                         "set a new insertion point"):
        here.create(SubI, x, x)
    assert func.entry_block.ops == [a]
    _links_are_sound(func.entry_block)


def test_an_insertion_point_next_to_an_op_in_no_block_is_refused():
    (x,) = Block([t.i32]).arguments
    loose = AddI.build(x, x)
    with pytest.raises(ValueError, match="'arith.addi' is in no block: there is no insertion point next to it"):
        Builder.before(loose)
    with pytest.raises(ValueError, match="'arith.addi' is in no block"):
        InsertionPoint.after(loose)


def test_iterating_a_block_tolerates_erasing_the_current_op():
    func, b, (x,) = make_func(t.i32)
    for _ in range(4):
        b.create(AddI, x, x)
    for op in func.entry_block:
        op.erase()
    assert len(func.entry_block) == 0 and x.uses == []


def test_block_arguments():
    block = Block([t.i32, t.f32], ["a", None])
    assert [a.name_hint for a in block.arguments] == ["a", None]
    extra = block.add_argument(t.i1, "flag")
    assert extra.index == 2 and extra.block is block
    block.erase_argument(1)
    assert [a.type for a in block.arguments] == [t.i32, t.i1] and [a.index for a in block.arguments] == [0, 1]
    AddI.build(block.arguments[0], block.arguments[0])
    with pytest.raises(ValueError, match="cannot erase a block argument that is still used"):
        block.erase_argument(0)


def test_regions_and_parents():
    func, b, (x, c) = make_func(t.i32, t.i1)
    if_op = b.create(IfOp, c, result_types=[])
    inner = Builder.at_end(if_op.then_region.block).create(AddI, x, x)
    assert inner.parent_op is if_op and if_op.parent_op is func and func.parent_op is None
    assert inner.parent_region is if_op.then_region and if_op.then_region.parent is if_op
    assert list(inner.ancestors()) == [if_op, func]
    assert func.is_ancestor_of(inner) and if_op.is_ancestor_of(inner) and not inner.is_ancestor_of(func)
    assert if_op.then_region.block.parent_op is if_op
    with pytest.raises(ValueError, match="region has 2 blocks, expected exactly one"):
        Region([Block(), Block()]).block  # noqa: B018


# -- walking ----------------------------------------------------------------------------

NESTED = ir("""
    func.func @f(%c: i1, %x: i32) {
      %0 = arith.addi %x, %x : i32
      scf.if %c {
        %1 = arith.muli %x, %x : i32
        scf.yield
      } {
        %2 = arith.subi %x, %x : i32
        scf.yield
      }
      func.return
    }
""")


def test_walk_pre_and_post_order():
    module = parse_module(NESTED)
    func = module.body.block.first_op
    assert [op.name for op in func.walk()] == [
        "func.func", "arith.addi", "scf.if", "arith.muli", "scf.yield", "arith.subi", "scf.yield", "func.return"]
    assert [op.name for op in func.walk(post_order=True)] == [
        "arith.addi", "arith.muli", "scf.yield", "arith.subi", "scf.yield", "scf.if", "func.return", "func.func"]
    assert [op.name for op in module.walk()][:2] == ["builtin.module", "func.func"]
    assert [op.name for op in func.body.walk()][:3] == ["arith.addi", "scf.if", "arith.muli"]


def test_erasing_during_a_post_order_walk():
    module = parse_module(NESTED)
    func = module.body.block.first_op
    for op in func.walk(post_order=True):
        if op.name in ("arith.muli", "arith.subi", "arith.addi"):
            op.erase()
    assert print_ir(module) == ir("""
        func.func @f(%c: i1, %x: i32) {
          scf.if %c {
            scf.yield
          } {
            scf.yield
          }
          func.return
        }
    """)
    assert len(func.arguments[1].uses) == 0


# -- cloning ----------------------------------------------------------------------------

LOOP = ir("""
    func.func @f(%lo: i32, %hi: i32, %init: f32, %k: f32) -> f32 {
      %0 = scf.for %lo, %hi, %lo, %init : f32 {
      ^bb0(%i: i32, %acc: f32):
        %1 = arith.addf %acc, %k : f32
        %2 = scf.if %c : f32 {
          scf.yield %1
        } {
          scf.yield %acc
        }
        scf.yield %2
      }
      func.return %0
    }
""").replace("%2 = scf.if %c", "%c = arith.cmpf %1, %k {predicate = \"olt\"} : i1\n    %2 = scf.if %c")


def test_clone_with_a_mapping_copies_regions_and_remaps_operands():
    module = parse_module(LOOP)
    verify(module)
    func = module.body.block.first_op
    lo, hi, init, k = func.arguments
    loop = func.entry_block.first_op
    new_k = func.entry_block.add_argument(t.f32, "k2")
    func.function_type = t.FunctionType((t.i32, t.i32, t.f32, t.f32, t.f32), (t.f32,))
    mapping = {k: new_k}
    copy = loop.clone(mapping)
    func.entry_block.insert_after(copy, loop)
    # The mapping now also maps the loop's results, block arguments and inner results.
    assert mapping[loop.results[0]] is copy.results[0]
    assert mapping[loop.induction_variable] is copy.induction_variable
    old_body, new_body = loop.body.block.ops, copy.body.block.ops
    assert all(mapping[a] is b for old, new in zip(old_body, new_body) for a, b in zip(old.results, new.results))
    # Inner uses point at the copy's values; outer values not in the mapping are shared.
    new_add = new_body[0]
    assert new_add.operands == (copy.region_iter_args[0], new_k)
    assert copy.operands == (lo, hi, lo, init)
    assert len(k.uses) == 2 and len(new_k.uses) == 2  # addf and cmpf
    assert new_body[2].then_region.block.first_op.operands == (new_add.result,)
    # The original is untouched and no op is shared.
    assert loop.body.block.first_op.operands == (loop.region_iter_args[0], k)
    assert not ({id(o) for o in loop.walk()} & {id(o) for o in copy.walk()})
    assert copy.parent is func.entry_block and copy.body.parent is copy
    assert copy.body.block.parent is copy.body
    ret = func.entry_block.last_op
    ret.set_operand(0, copy.results[0])
    verify(module)
    text = print_ir(module)
    assert "%4 = arith.addf %acc_1, %k2 : f32" in text
    assert print_ir(parse_module(text)) == text


def test_clone_keeps_attributes_locations_and_hints_but_copies_the_dict():
    func, b, (x,) = make_func(t.i32)
    add = b.create(AddI, x, x, location=SourceLocation("k.py", 3, 1), **{"pt.hint": [1, 2]})
    add.result.name_hint = "sum"
    copy = add.clone()
    assert copy.attributes == {"pt.hint": (1, 2)} and copy.attributes is not add.attributes
    assert copy.location == add.location and copy.result.name_hint == "sum"
    assert copy.operands == (x, x) and copy.parent is None and len(x.uses) == 4
    copy.set_attr("pt.hint", 3)
    assert add.get_attr("pt.hint") == (1, 2)


# -- the builder ------------------------------------------------------------------------


def test_builder_insertion_points():
    func, b, (x,) = make_func(t.i32)
    a = b.create(AddI, x, x)
    z = b.create(SubI, x, x)
    with b.at(InsertionPoint.before(z)):
        m1 = b.create(MulI, x, x)
        m2 = b.create(MulI, x, x)
    assert func.entry_block.ops == [a, m1, m2, z]
    start = Builder(InsertionPoint.at_start(func.entry_block))
    c1 = start.create(ConstantOp, value=1, result_types=[t.i32])
    c2 = start.create(ConstantOp, value=2, result_types=[t.i32])
    assert func.entry_block.ops[:3] == [c1, c2, a]  # in creation order, before the old first op
    after = Builder.after(a)
    n1, n2 = after.create(AddI, x, x), after.create(AddI, x, x)
    assert func.entry_block.ops == [c1, c2, a, n1, n2, m1, m2, z]
    last = Builder.after(z)
    e = last.create(AddI, x, x)
    assert func.entry_block.last_op is e
    empty = Block()
    Builder(InsertionPoint.at_start(empty)).create(ConstantOp, value=0, result_types=[t.i32])
    assert names(empty) == ["arith.constant"]
    b.create(ReturnOp, [])
    verify(func)


def test_builder_without_insertion_point():
    with pytest.raises(ValueError, match="the builder has no insertion point"):
        Builder().create(ConstantOp, value=0, result_types=[t.i32])


def test_builder_locations():
    here = SourceLocation("k.py", 1, 1)
    there = SourceLocation("k.py", 2, 2)
    func, _, (x,) = make_func(t.i32)
    b = Builder.at_end(func.entry_block, location=here)
    a = b.create(AddI, x, x)
    with b.located(there):
        m = b.create(MulI, x, x)
        s = b.create(SubI, x, x, location="explicit")
    c = b.create(AddI, x, x)
    assert (a.location, m.location, s.location, c.location) == (here, there, "explicit", here)
    # Building next to an op takes that op's location unless told otherwise.
    assert Builder.before(m).create(AddI, x, x).location == there
    assert Builder.after(m, location="given").create(AddI, x, x).location == "given"


def test_builder_at_restores_on_error():
    func, b, (x,) = make_func(t.i32)
    original = b.insertion_point
    with pytest.raises(RuntimeError):
        with b.at(InsertionPoint.at_start(Block())):
            raise RuntimeError
    assert b.insertion_point is original


# -- building from definitions ----------------------------------------------------------


def test_build_infers_result_types_and_stores_no_defaults():
    func, b, (p, m) = make_func(t.TileType((4,), t.PointerType(t.f16)), t.TileType((4,), t.i1))
    load = b.create(LoadOp, p, mask=m)
    assert load.result.type == t.TileType((4,), t.f16)
    assert load.operand_segments == (1, 1, 0)
    assert load.mask is m and load.other is None
    assert load.attributes == {}  # the defaults are read through the properties
    assert (load.cache, load.evict, load.volatile) == ("", "", False)
    load.cache = ".cg"
    assert load.get_attr("cache") == ".cg"
    load.cache = ""  # back to the default: removed, not stored
    assert "cache" not in load.attributes and load.cache == ""
    ext = b.create(ExtFOp, load.result, result_types=[t.TileType((4,), t.f32)])
    assert ext.result.type == t.TileType((4,), t.f32)


def test_build_errors():
    func, b, (x,) = make_func(t.i32)
    with pytest.raises(TypeError, match="arith.addi needs operand 'rhs'"):
        AddI.build(x)
    with pytest.raises(TypeError, match="arith.addi takes 2 operand groups, got 3 positional arguments"):
        AddI.build(x, x, x)
    with pytest.raises(TypeError, match="arith.addi has no operand or attribute named 'bogus'"):
        AddI.build(x, x, bogus=1)
    with pytest.raises(TypeError, match="arith.addi: operand group 'lhs' given twice"):
        AddI.build(x, x, lhs=x)
    with pytest.raises(TypeError, match="arith.extsi cannot infer its result types; pass result_types="):
        ExtSIOp.build(x)


def test_attributes_are_normalized_to_tuples():
    func, b, (x,) = make_func(t.i32)
    add = b.create(AddI, x, x, **{"pt.list": [1, [2, 3]]})
    assert add.attributes["pt.list"] == (1, (2, 3))
    add.set_attr("pt.other", [4])
    assert add.attributes["pt.other"] == (4,)


def test_has_trait_and_definition():
    from polytile.ir.opdef import Commutative, Pure, Terminator

    assert AddI.has_trait(Pure) and AddI.has_trait(Commutative) and not SubI.has_trait(Commutative)
    assert ReturnOp.has_trait(Terminator)
    d = AddI.definition
    assert (d.name, d.dialect, d.summary) == ("arith.addi", "arith", "Integer addition (wrapping).")
    assert [g.name for g in d.operands] == ["lhs", "rhs"] and d.is_pure
    assert LoadOp.definition.needs_segments and not ForOp.definition.needs_segments
