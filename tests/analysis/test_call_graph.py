"""CallGraph: nodes, edges, orders, cycles and reachability, from IR text."""

from __future__ import annotations

import pytest

from polytile.analysis.call_graph import CallGraph
from polytile.errors import SourceLocation, VerificationError
from polytile.ir import parse_module, verify
from polytile.passes.pass_base import PassContext
from polytile.ir_testing import dedent

PROGRAM = """
func.func @leaf(%a: i32) -> i32 {
  func.return %a
}
func.func @mid(%a: i32) -> i32 {
  %0 = func.call %a {callee = @leaf} : i32
  %1 = func.call %0 {callee = @leaf} : i32
  func.return %1
}
func.func @slow(%a: i32) -> i32 attributes {noinline = true} {
  %0 = func.call %a {callee = @leaf} : i32
  func.return %0
}
func.func @unused(%a: i32) -> i32 {
  %0 = func.call %a {callee = @mid} : i32
  func.return %0
}
func.func @k(%n: i32) attributes {kernel = true} {
  %0 = func.call %n {callee = @mid} : i32
  %1 = scf.for %n, %n, %n, %0 : i32 {
  ^bb0(%iv: i32, %acc: i32):
    %2 = func.call %acc {callee = @slow} : i32
    scf.yield %2
  }
  func.return
}
"""


def graph_of(text: str) -> CallGraph:
    module = parse_module(dedent(text))
    verify(module)
    return CallGraph(module)


def names(funcs) -> list[str]:
    return [f.sym_name for f in funcs]


def test_nodes_are_the_functions_in_module_order():
    graph = graph_of(PROGRAM)
    assert names(graph.functions) == ["leaf", "mid", "slow", "unused", "k"]
    assert len(graph) == 5
    assert "mid" in graph and "nope" not in graph
    assert graph.function("slow").sym_name == "slow"
    assert names(graph.kernels) == ["k"]


def test_callees_and_callers_are_unique_and_ordered():
    graph = graph_of(PROGRAM)
    assert names(graph.callees("mid")) == ["leaf"]
    assert names(graph.callees("k")) == ["mid", "slow"]
    assert names(graph.callees("leaf")) == []
    assert names(graph.callers("leaf")) == ["mid", "slow"]
    assert names(graph.callers("mid")) == ["unused", "k"]
    assert names(graph.callers("k")) == []


def test_call_sites_are_the_call_ops_including_nested_ones():
    graph = graph_of(PROGRAM)
    sites = graph.call_sites("leaf")
    assert len(sites) == 3 and all(op.name == "func.call" for op in sites)
    (slow_site,) = graph.call_sites("slow")
    assert slow_site.parent_op.name == "scf.for"
    assert [e.callee.sym_name for e in graph.calls_in("k")] == ["mid", "slow"]
    assert len(graph.calls_between("mid", "leaf")) == 2
    assert graph.calls_between("k", "leaf") == []


def test_functions_may_be_given_by_op_or_name():
    graph = graph_of(PROGRAM)
    mid = graph.function("mid")
    assert graph.callees(mid) == graph.callees("mid")
    assert mid in graph


def test_bottom_up_puts_callees_before_callers():
    graph = graph_of(PROGRAM)
    order = names(graph.bottom_up())
    assert sorted(order) == sorted(names(graph.functions))
    position = {name: i for i, name in enumerate(order)}
    for edge in graph.edges:
        assert position[edge.callee.sym_name] <= position[edge.caller.sym_name], edge


def test_bottom_up_is_stable():
    assert names(graph_of(PROGRAM).bottom_up()) == names(graph_of(PROGRAM).bottom_up())


def test_acyclic_graph_has_no_cycle():
    assert graph_of(PROGRAM).find_cycle() is None


RECURSIVE = """
func.func @a(%x: i32) -> i32 {
  %0 = func.call %x {callee = @b} : i32
  func.return %0
}
func.func @b(%x: i32) -> i32 {
  %0 = func.call %x {callee = @c} : i32
  func.return %0
}
func.func @c(%x: i32) -> i32 attributes {noinline = true} {
  %0 = func.call %x {callee = @a} : i32
  func.return %0
}
func.func @k(%x: i32) attributes {kernel = true} {
  %0 = func.call %x {callee = @a} : i32
  func.return
}
"""


def test_mutual_recursion_is_found():
    graph = graph_of(RECURSIVE)
    assert graph.find_cycle() == ["a", "b", "c"]


def test_cycle_members_are_ordered_together_in_bottom_up():
    order = names(graph_of(RECURSIVE).bottom_up())
    assert order[-1] == "k"
    assert sorted(order[:3]) == ["a", "b", "c"]


def test_follow_filter_ignores_edges():
    graph = graph_of(RECURSIVE)
    inlinable_only = graph.find_cycle(follow=lambda edge: not edge.callee.attributes.get("noinline"))
    assert inlinable_only is None
    # Without the edge into @c, @b's callee (c) need not come before it.
    order = names(graph.bottom_up(follow=lambda edge: edge.callee.sym_name != "c"))
    assert order.index("b") < order.index("a") < order.index("k")


def test_self_recursion_is_a_cycle_of_one():
    graph = graph_of("""
        func.func @f(%x: i32) -> i32 {
          %0 = func.call %x {callee = @f} : i32
          func.return %0
        }
    """)
    assert graph.find_cycle() == ["f"]


def test_shortest_cycle_is_reported_from_the_first_member():
    graph = graph_of("""
        func.func @a(%x: i32) {
          func.call %x {callee = @b}
          func.call %x {callee = @c}
          func.return
        }
        func.func @b(%x: i32) {
          func.call %x {callee = @c}
          func.return
        }
        func.func @c(%x: i32) {
          func.call %x {callee = @a}
          func.return
        }
    """)
    assert graph.find_cycle() == ["a", "c"]


def test_reachability_from_kernels():
    graph = graph_of(PROGRAM)
    assert graph.is_reachable_from_kernels("k")
    assert graph.is_reachable_from_kernels("mid")
    assert graph.is_reachable_from_kernels("slow")
    assert graph.is_reachable_from_kernels("leaf")
    assert not graph.is_reachable_from_kernels("unused")
    assert names(graph.reachable_from(["unused"])) == ["leaf", "mid", "unused"]


def test_call_to_an_unknown_function_is_an_error_naming_the_call_and_its_location():
    module = parse_module(dedent("""
        func.func @k(%x: i32) attributes {kernel = true} {
          %0 = func.call %x {callee = @missing} : i32 loc("kern.py":7:9)
          func.return
        }
    """))
    with pytest.raises(VerificationError) as info:
        CallGraph(module)
    assert info.value.op_name == "func.call"
    assert info.value.location == SourceLocation("kern.py", 7, 9)
    assert str(info.value) == ("kern.py:7:9: error: 'func.call' op calls '@missing', "
                               "which is not defined in this module")


def test_unknown_function_name_in_a_query_is_an_error():
    with pytest.raises(VerificationError, match="no function '@nope'"):
        graph_of(PROGRAM).callees("nope")


def test_graph_is_an_analysis_cached_by_the_manager():
    module = parse_module(dedent(PROGRAM))
    context = PassContext()
    first = context.analyses.get(CallGraph, module)
    assert context.analyses.get(CallGraph, module) is first
    assert context.analyses.computed == 1


def test_deep_call_chains_do_not_hit_the_recursion_limit():
    depth = 1500
    parts = ["func.func @f0(%x: i32) {\n  func.return\n}"]
    for i in range(1, depth):
        parts.append(f"func.func @f{i}(%x: i32) {{\n  func.call %x {{callee = @f{i - 1}}}\n  func.return\n}}")
    graph = graph_of("\n".join(reversed(parts)))
    assert names(graph.bottom_up()) == [f"f{i}" for i in range(depth)]
    assert graph.find_cycle() is None
