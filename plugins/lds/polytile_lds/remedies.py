"""What ``lds-fit`` tries when a kernel needs more LDS than the architecture has.

A remedy is ``remedy(module, kernel, context) -> bool``: it changes ``kernel`` (a
``func.func`` whose ``gpu.shared_bytes`` is over the limit) so that it needs less LDS,
and says whether it changed anything.  ``lds-fit`` tries the registered remedies
cheapest first, measuring the need again after each that changed the IR, and stops as
soon as the kernel fits.

The order is :data:`REMEDY_ORDER`; a remedy whose name is not there comes after those,
in registration order.  Each name there is a slot:

- ``"fewer-pipeline-stages"``: for the software pipelining pass to fill (the pass that
  allocates one LDS ring slot per stage): fewer stages, fewer slots.  On AMD that pass
  changes nothing yet (it needs an async copy unit the AMD lowering does not use), so
  ``num_stages`` costs no LDS and nothing registers the slot; it keeps its place first,
  since dropping a stage keeps every op's code.
- ``"conversions-in-rounds"`` (built in, :func:`conversions_in_rounds`): layout
  conversions, transposes and reshapes move their tile through LDS in several rounds,
  one slab at a time, with a barrier between rounds (``gpu.scratch_rounds``, see
  :mod:`polytile.gpu.allocation`).  It costs a barrier per extra round, only in the ops
  it splits.
"""

from __future__ import annotations

from typing import Any, Callable

from polytile.passes.pass_base import PassContext

#: ``remedy(module, kernel, context) -> bool`` (see the module docstring).
Remedy = Callable[[Any, Any, PassContext], bool]
#: Registered remedies by name.
REMEDIES: dict[str, Remedy] = {}
#: The slots, cheapest first (see the module docstring).
REMEDY_ORDER = ("fewer-pipeline-stages", "conversions-in-rounds")


def register_remedy(name: str) -> Callable[[Remedy], Remedy]:
    """Decorator: try ``fn`` when a kernel needs more LDS than the architecture has; its
    place in the order is its slot in :data:`REMEDY_ORDER`, else after those."""
    def register(fn: Remedy) -> Remedy:
        REMEDIES[name] = fn
        return fn
    return register


def in_order(remedies: dict[str, Remedy]) -> list[tuple[str, Remedy]]:
    """``remedies`` cheapest first: the slots of :data:`REMEDY_ORDER`, then the others."""
    slot = {name: index for index, name in enumerate(REMEDY_ORDER)}
    names = sorted(remedies, key=lambda name: slot.get(name, len(REMEDY_ORDER)))
    return [(name, remedies[name]) for name in names]


def lds_limit(arch: str) -> int:
    from polytile_amd.architectures import ARCHITECTURES

    return ARCHITECTURES[arch].lds_bytes


@register_remedy("conversions-in-rounds")
def conversions_in_rounds(module: Any, kernel: Any, context: PassContext) -> bool:
    """Split the kernel's largest conversions into rounds until it fits in LDS (or none
    splits further)."""
    from polytile.gpu.allocation import SHARED_BYTES_ATTR, fit_by_rounds
    from polytile.gpu.lowering.target import NUM_WARPS_ATTR, gpu_target_of, num_warps_of

    callees = {op.attributes["sym_name"]: int(op.attributes.get(SHARED_BYTES_ATTR, 0)) for op in module.walk()
               if op.name == "func.func" and op is not kernel}
    num_warps = kernel.attributes.get(NUM_WARPS_ATTR, num_warps_of(context))
    _, changed = fit_by_rounds(kernel, gpu_target_of(context), num_warps, lds_limit(context.target.arch), callees)
    return changed
