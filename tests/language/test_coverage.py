"""Every public name the language promises has a test in this directory.

COVERAGE maps each name (of polytile.language, or of polytile for the host side) to the
tests that exercise it against NumPy; a name without a test, a test that does not exist,
or a name the package lacks fails here."""

import ast
from pathlib import Path

import pytest

import polytile
import polytile.language as pl

HERE = Path(__file__).parent

HOST = {
    "jit": ["test_control_flow.py::test_nested_and_noinline_calls", "test_triton_compat.py::test_01_vector_add"],
    "autotune": ["test_control_flow.py::test_autotune_and_config", "test_triton_compat.py::test_03_matmul_with_autotune"],
    "heuristics": ["test_control_flow.py::test_heuristics"],
    "Config": ["test_control_flow.py::test_autotune_and_config"],
    "cdiv": ["test_control_flow.py::test_host_helpers", "test_triton_compat.py::test_01_vector_add"],
    "next_power_of_2": ["test_control_flow.py::test_host_helpers", "test_triton_compat.py::test_02_fused_softmax"],
}

LANGUAGE = {
    # kernels and calls
    "constexpr": ["test_control_flow.py::test_constexpr_parameters", "test_control_flow.py::test_constexpr_global"],
    # indexing and creation
    "program_id": ["test_creation.py::test_program_id_and_num_programs_in_three_dimensions"],
    "num_programs": ["test_creation.py::test_program_id_and_num_programs_in_three_dimensions"],
    "arange": ["test_creation.py::test_arange"],
    "full": ["test_creation.py::test_full_zeros_and_likes"],
    "zeros": ["test_creation.py::test_full_zeros_and_likes"],
    "zeros_like": ["test_creation.py::test_full_zeros_and_likes"],
    "full_like": ["test_creation.py::test_full_zeros_and_likes"],
    "cast": ["test_creation.py::test_casts_between_every_dtype", "test_creation.py::test_bitcast"],
    "cdiv": ["test_creation.py::test_cdiv"],
    "multiple_of": ["test_creation.py::test_hints_keep_values_and_reach_the_ir"],
    "max_contiguous": ["test_creation.py::test_hints_keep_values_and_reach_the_ir"],
    "max_constancy": ["test_creation.py::test_hints_keep_values_and_reach_the_ir"],
    "static_range": ["test_creation.py::test_static_range_and_range"],
    "range": ["test_creation.py::test_static_range_and_range", "test_triton_compat.py::test_02_fused_softmax",
              "test_creation.py::test_range_loop_options_keep_the_results"],
    "static_assert": ["test_creation.py::test_static_assert_and_static_print"],
    "static_print": ["test_creation.py::test_static_assert_and_static_print"],
    "device_assert": ["test_debug.py::test_device_assert"],
    "device_print": ["test_debug.py::test_device_print"],
    "debug_barrier": ["test_debug.py::test_device_print"],
    # memory
    "load": ["test_memory.py::test_masked_load_with_other_and_masked_store",
             "test_memory.py::test_cache_and_eviction_hints_keep_values_and_reach_the_ir",
             "test_block_pointers.py::test_load_with_boundary_check_at_edges"],
    "store": ["test_memory.py::test_masked_load_with_other_and_masked_store",
              "test_block_pointers.py::test_store_with_boundary_check"],
    "atomic_add": ["test_atomics.py::test_atomic_rmw", "test_atomics.py::test_contended_atomics_lose_nothing"],
    "atomic_max": ["test_atomics.py::test_atomic_rmw"],
    "atomic_min": ["test_atomics.py::test_atomic_rmw"],
    "atomic_and": ["test_atomics.py::test_atomic_rmw"],
    "atomic_or": ["test_atomics.py::test_atomic_rmw"],
    "atomic_xor": ["test_atomics.py::test_atomic_rmw"],
    "atomic_xchg": ["test_atomics.py::test_atomic_rmw"],
    "atomic_cas": ["test_atomics.py::test_atomic_cas", "test_atomics.py::test_atomic_cas_on_floats"],
    "make_block_ptr": ["test_block_pointers.py::test_load_with_boundary_check_at_edges"],
    "advance": ["test_block_pointers.py::test_matmul_advance_in_loop"],
    # math
    "where": ["test_math.py::test_binary_math", "test_operators.py::test_operators"],
    "minimum": ["test_math.py::test_binary_math"],
    "maximum": ["test_math.py::test_binary_math"],
    "clamp": ["test_math.py::test_binary_math"],
    "abs": ["test_math.py::test_unary_math", "test_math.py::test_math_on_integers"],
    "fma": ["test_math.py::test_binary_math"],
    **{name: ["test_math.py::test_unary_math"] for name in
       ("exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "erf", "floor", "ceil", "sigmoid")},
    "softmax": ["test_math.py::test_softmax"],
    "umulhi": ["test_math.py::test_umulhi"],
    "fdiv": ["test_math.py::test_binary_math"],
    "div_rn": ["test_math.py::test_binary_math"],
    # shapes
    "reshape": ["test_builtins.py::test_shapes", "test_shapes.py::test_view_permute_broadcast_and_indexing"],
    "view": ["test_shapes.py::test_view_permute_broadcast_and_indexing"],
    "expand_dims": ["test_builtins.py::test_shapes"],
    "broadcast": ["test_shapes.py::test_view_permute_broadcast_and_indexing"],
    "broadcast_to": ["test_builtins.py::test_shapes"],
    "trans": ["test_builtins.py::test_shapes"],
    "permute": ["test_builtins.py::test_shapes", "test_shapes.py::test_view_permute_broadcast_and_indexing"],
    "join": ["test_shapes.py::test_join_split", "test_shapes.py::test_join_broadcasts_and_scalars"],
    "interleave": ["test_shapes.py::test_interleave_and_assume"],
    "assume": ["test_shapes.py::test_interleave_and_assume", "test_shapes.py::test_assume_needs_a_true_boolean"],
    "flip": ["test_sorting.py::test_sort_flip_and_topk_match_numpy"],
    "sort": ["test_sorting.py::test_sort_flip_and_topk_match_numpy", "test_sorting.py::test_reorder_errors"],
    "topk": ["test_sorting.py::test_sort_flip_and_topk_match_numpy", "test_sorting.py::test_reorder_errors"],
    "gather": ["test_gather.py::test_gather_2d", "test_gather.py::test_gather_1d",
               "test_gather.py::test_bad_gathers_are_named"],
    "ravel": ["test_shapes.py::test_ravel_is_row_major"],
    "histogram": ["test_histogram.py::test_histogram", "test_histogram.py::test_histogram_with_a_mask"],
    "inline_asm_elementwise": ["test_inline_asm.py::test_nvidia_ptx_holds_the_assembly_and_assembles",
                               "test_inline_asm.py::test_the_interpreter_says_it_runs_no_assembly"],
    "split": ["test_shapes.py::test_join_split"],
    "cat": ["test_shapes.py::test_cat"],
    # reductions and scans
    "sum": ["test_builtins.py::test_reductions", "test_reductions_indexed.py::test_float16_sum_accumulates_in_float32"],
    "max": ["test_builtins.py::test_reductions", "test_reductions_indexed.py::test_argmax_argmin"],
    "min": ["test_builtins.py::test_reductions", "test_reductions_indexed.py::test_argmax_argmin"],
    "argmax": ["test_reductions_indexed.py::test_argmax_argmin"],
    "argmin": ["test_reductions_indexed.py::test_argmax_argmin"],
    "xor_sum": ["test_reductions_indexed.py::test_xor_sum"],
    "reduce": ["test_builtins.py::test_reduce_with_jit_combine"],
    "cumsum": ["test_scans.py::test_cumsum_cumprod", "test_scans.py::test_cumsum_sizes"],
    "cumprod": ["test_scans.py::test_cumsum_cumprod"],
    "associative_scan": ["test_scans.py::test_associative_scan_with_a_non_commutative_combine"],
    # dot and random numbers
    "dot": ["test_dot.py::test_dot", "test_dot.py::test_dot_input_precision", "test_dot.py::test_dot_out_dtype"],
    "dot_scaled": ["test_dot_scaled.py::test_dot_scaled_matches_the_emulation",
                   "test_dot_scaled.py::test_every_pair_of_formats_on_the_interpreter",
                   "test_dot_scaled.py::test_mistakes_are_located_errors"],
    "rand": ["test_random.py::test_randint_and_rand"],
    "randn": ["test_random.py::test_randn"],
    "randint": ["test_random.py::test_randint_and_rand"],
    "randint4x": ["test_random.py::test_randint4x_is_philox"],
    "rand4x": ["test_random.py::test_rand4x_randn4x_and_philox"],
    "randn4x": ["test_random.py::test_rand4x_randn4x_and_philox"],
    "philox": ["test_random.py::test_rand4x_randn4x_and_philox"],
    # dtypes
    **{name: ["test_dtypes.py::test_dtype_names_and_predicates", "test_dtypes.py::test_round_trip_through_memory"]
       for name in ("int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                    "float32", "float64")},
    **{name: ["test_dtypes.py::test_dtype_names_and_predicates", "test_dtypes.py::test_narrow_floats"]
       for name in ("bfloat16", "float8e4nv", "float8e5")},
}

#: The issue's list, written out once more on purpose: COVERAGE must name each of them.
PROMISED_LANGUAGE = """
constexpr program_id num_programs arange full zeros zeros_like full_like cast cdiv multiple_of max_contiguous
static_range range static_assert static_print device_assert device_print debug_barrier
load store atomic_add atomic_max atomic_min atomic_and atomic_or atomic_xor atomic_xchg atomic_cas make_block_ptr
advance where minimum maximum clamp abs fma exp exp2 log log2 sqrt sqrt_rn rsqrt sin cos erf floor ceil sigmoid
softmax umulhi fdiv div_rn reshape view expand_dims broadcast broadcast_to trans permute join split cat
sum max min argmax argmin xor_sum reduce cumsum cumprod associative_scan dot rand randn randint randint4x
int1 int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 float64 float8e4nv float8e5
""".split()
PROMISED_HOST = "jit autotune heuristics Config cdiv next_power_of_2".split()


def _tests_in(file_name):
    tree = ast.parse((HERE / file_name).read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_every_promised_name_exists_and_has_a_test():
    assert sorted(set(PROMISED_LANGUAGE) - set(LANGUAGE)) == []
    assert sorted(set(PROMISED_HOST) - set(HOST)) == []
    assert [n for n in LANGUAGE if not hasattr(pl, n)] == []
    assert [n for n in HOST if not hasattr(polytile, n)] == []


@pytest.mark.parametrize("module, mapping", [("polytile.language", LANGUAGE), ("polytile", HOST)])
def test_every_listed_test_exists(module, mapping):
    cache = {}
    missing = []
    for name, tests in mapping.items():
        assert tests, f"{module}.{name} has no test"
        for ref in tests:
            file_name, test_name = ref.split("::")
            if file_name not in cache:
                cache[file_name] = _tests_in(file_name)
            if test_name not in cache[file_name]:
                missing.append(f"{name}: {ref}")
    assert missing == []


def test_every_public_builtin_of_the_language_is_listed():
    # A builtin added to polytile.language without a test here fails: list it above.
    from polytile.language.core import is_builtin

    builtins = {n for n in pl.__all__ if is_builtin(getattr(pl, n))}
    unlisted = builtins - set(LANGUAGE)
    assert sorted(unlisted) == []
