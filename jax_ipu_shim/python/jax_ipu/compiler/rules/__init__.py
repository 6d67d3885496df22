"""The front end's rules: each rewrites one kind of StableHLO op into what XLA:CPU computes for it.

The walk (translate.py) offers every op to the rules in ``RULES``'s order; the first rule that takes the op writes
its entries into the document, and an op no rule takes is written as it is (``_Translator.entry``). A rule is a
function ``rule(translator, op, body, scalar_body) -> bool``: it reads the module (facts.py) and the values written
so far, and appends to ``body``. The order is part of the semantics, as it is in XLA (an identity is removed before
a divide rule sees its operand, min/max pairs become clamps before the identities): it is listed here, once.

One module per origin of the rewrite, each saying in its header what it applies and why values cannot change
except as they change on cpu:
- structure: StableHLO and HLO forms in the program format's terms (tuples, if, calls, anchors): no value changes;
- gather_scatter: scatter simplifications and batched indices;
- simplifier: XLA's algebraic simplifier, per series;
- divide: XLA's divide rewrites;
- reductions: reduce and window rewrites (XLA's simplifier, XLA:CPU's window rewriter);
- cpu_loops: what LLVM does inside XLA:CPU's fused loops;
- decompositions: ops a series sends in another form from the one XLA:CPU computes;
- excess_precision: a bf16 op's unrounded f32 value where the program converts it to f32;
- complex64: complex64 as pairs of f32; integer and widening products.
The document-level rewrites that need the whole function (XLA's reassociation, contraction through moves,
duplicate products, dead code) are passes/ instead, run after the walk."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from . import (
               complex64,
               cpu_loops,
               decompositions,
               divide,
               excess_precision,
               gather_scatter,
               reductions,
               simplifier,
               structure,
)

Rule = Callable[[Any, Any, List[Dict[str, Any]], bool], bool]

RULES: Tuple[Rule, ...] = (
    structure.tuple_elements,
    structure.tuple_element,
    structure.hlo_copy,
    structure.rng_shape,
    structure.if_as_case,
    structure.one_trip_loop,
    structure.hlo_custom_call_op,
    structure.hlo_topk,
    structure.tupled_call,
    decompositions.approx_top_k,
    gather_scatter.scatter_out_of_bounds,
    gather_scatter.gather_scatter,
    structure.dce_sink,
    structure.manual_computation,
    structure.splat_constant,
    excess_precision.converted_to_f32,
    excess_precision.upcast_operand,
    excess_precision.dot_read_in_f32,
    simplifier.extremum_pair_as_clamp,
    simplifier.select_of_induction_compare,  # before the rules that rewrite a select's arithmetic
    cpu_loops.bf16_clamp_avx512,
    cpu_loops.extremum_of_negation,
    cpu_loops.extremum_of_select,
    cpu_loops.extremum_of_update,
    cpu_loops.select_of_arithmetic,
    cpu_loops.remainder_by_power_of_two,
    cpu_loops.product_after_negated_product,
    cpu_loops.sum_of_negation,
    simplifier.minus_zero_minus,
    simplifier.sort_of_one,
    simplifier.call_of_sort_of_one,
    simplifier.empty_update,
    simplifier.reverse_of_quotient,
    simplifier.part_of_complex,
    simplifier.product_of_exps,
    cpu_loops.beside_identity_padding,
    gather_scatter.combined_with_scatter,
    simplifier.identity_operand,
    simplifier.double_negation,
    simplifier.moves_that_cancel,
    simplifier.extremum_with_constant,
    simplifier.product_with_predicate,
    cpu_loops.bf16_zero_test,
    divide.divide,
    divide.bf16_divide_by_broadcast,
    reductions.scan_as_tree,
    reductions.one_element_windows,
    simplifier.log,
    simplifier.power_of_exp,
    simplifier.power_of_constant,
    decompositions.tiny_as_zero,
    reductions.reduce_of_concatenate,
    reductions.reduce_through_moves,
    reductions.reduce_of_one_element,
    decompositions.f16_expanded_in_loops,
    decompositions.acosh,
    decompositions.sinh,
    simplifier.sqrt_of_square,
    simplifier.rsqrt_of_reciprocal_square,
    simplifier.abs_of_non_negative,
    decompositions.composite_chlo_op,
    structure.inlined_call,
    decompositions.atan_as_atan2,
    complex64.complex_product,
    complex64.float_product,
    complex64.complex_split,
    simplifier.select_of_compared_predicate,  # last: a rule above that takes a select sees it as jax wrote it
)
