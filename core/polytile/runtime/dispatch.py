"""Plans for a backend's native dispatcher: ``kernel[grid](...)`` without Python code of ours.

A launch through the generated entry point (:func:`.binder.make_entry`) costs a few
microseconds of Python: binding, one probe per argument, a key tuple, a dict get, then
the backend's launcher.  A backend whose launcher has a native dispatcher (NVIDIA's C
launch module) can do all of it in one C call for the calls it has a *plan* for.

A plan is made from one call the Python path has just launched, and says:

* the call's shape: how many positional arguments and which keywords;
* for each argument passed, what any later value must be for the call to make the
  very key the Python path made: a constexpr or launch option equal to the same value
  (of the same type), an int in the same range (i32, i64, u64) with the same hint
  (``== 1``, divisible by 16, neither), a float, a bool, a None, a torch tensor of the
  same type and dtype whose address is 16-byte aligned or not as before;
* which kernel parameter each run-time argument is packed into, and the values of the
  parameters left to their defaults;
* for an argument a plugin adapts (a tensor descriptor): the key its adapter gave, which
  a later value's must equal, and the parameters its parts fill;
* the compiled kernel's guard (its compile-time globals unchanged) and what a callable
  grid sees.

Only values whose key the checks decide completely are planned (exact ``int``,
``float``, ``bool``, ``None``, ``str`` and torch tensors); for anything else, and for
every call that fails a check, the dispatcher hands the call to the Python path, which
explains mistakes in the runtime's words exactly as before.  So a plan never launches a
kernel the Python path would not have launched for the same call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..language import core as lc
from .args import is_torch_tensor
from .binder import kind_of

#: Types whose key piece is their value (compared by type and equality in C).
_EQUAL_TYPES = (int, bool, float, str, type(None))
_I32 = (-0x80000000, 0x7FFFFFFF)
_I64 = (-0x8000000000000000, 0x7FFFFFFFFFFFFFFF)
_U64_MAX = 0xFFFFFFFFFFFFFFFF


@dataclass(frozen=True)
class SlotCheck:
    """What one argument passed must be, and where it goes.

    ``check`` is ``"equal"`` (``expected`` is the value), ``"none"``, ``"tensor"``
    (``expected`` is ``(tensor type, dtype)``), ``"int"``, ``"float"`` or ``"bool"``;
    ``hint`` is ``"aligned"`` / ``"unaligned"`` for tensors, ``"one"`` / ``"divisible"`` /
    ``"other"`` for ints, ``"any"`` where the parameter is not specialized; ``range`` is
    ``"i32"``, ``"i64"`` or ``"u64"`` for ints; ``parameter`` is the index of the kernel
    parameter (in the launcher's order) it is packed into, or -1.
    """

    check: str
    expected: Any = None
    hint: str = "any"
    range: str = ""
    parameter: int = -1
    #: ``"adapted"`` (a plugin's argument, a tensor descriptor): how many kernel
    #: parameters from ``parameter`` on its parts fill; ``expected`` is ``(key_and_parts,
    #: key, version_attribute, native_answer)``: the adapter's call, the key the value must
    #: have, and the adapter's shortcuts (see :class:`~polytile.runtime.adapters.ArgumentAdapter`).
    parts: int = 0


@dataclass
class CallPlan:
    """One call's plan (see the module docstring), for :meth:`LauncherBase.dispatch_plan`."""

    nargs: int
    kwnames: tuple[str, ...] | None
    slots: list[SlotCheck]
    #: Names of the slots, for the dict a callable grid receives.
    slot_names: tuple[str, ...]
    #: Kernel parameter index -> the default value packed for it (not passed).
    defaults: dict[int, Any] = field(default_factory=dict)
    #: What a callable grid sees besides the arguments passed.
    meta_base: dict[str, Any] = field(default_factory=dict)
    guard: Any = None
    #: What the call returns: the compiled kernel.
    result: Any = None


def plan_call(fn: Any, compiled: Any, args: tuple, kwargs: dict | None) -> CallPlan | None:
    """The plan of ``fn[grid](*args, **kwargs)``, which launched ``compiled``; None when
    some argument is of a kind the dispatcher cannot check."""
    kwargs = kwargs or {}
    names = fn.param_names
    if len(args) > len(names):
        return None
    if getattr(compiled, "global_scratch", 0) and \
            not getattr(getattr(compiled, "backend_launcher", None), "dispatches_global_scratch", False):
        # A kernel with global scratch calls the allocator at each launch: only a
        # dispatcher that does (the launcher says so) may launch it.
        return None
    parameters = fn.signature.parameters
    constexprs = fn.constexpr_names()
    launch_order = [p.name for p in compiled.params]
    given = dict(zip(names, args))
    slots: list[SlotCheck] = []
    slot_names: list[str] = []
    options: dict[str, Any] = {}
    # An adapted argument passes as its adapter for the kernel's target says.
    target = getattr(compiled, "target", None)
    for position, value in enumerate(args):
        name = names[position]
        slot = _slot(fn, name, value, constexprs, launch_order, target)
        if slot is None:
            return None
        slots.append(slot)
        slot_names.append(name)
    for name, value in kwargs.items():
        if name in parameters:
            if name in given or parameters[name].kind is parameters[name].POSITIONAL_ONLY:
                return None
            given[name] = value
            slot = _slot(fn, name, value, constexprs, launch_order, target)
        else:
            options[name] = value
            slot = SlotCheck("equal", value) if type(value) in _EQUAL_TYPES else None
        if slot is None:
            return None
        slots.append(slot)
        slot_names.append(name)
    defaults: dict[int, Any] = {}
    meta_base = {**compiled.grid_defaults, **options}
    for name in names:
        if name in given:
            continue
        default = parameters[name].default
        if default is parameters[name].empty:
            return None
        meta_base[name] = default
        default = lc.unwrap(default)
        if name in constexprs or default is None:
            continue
        if type(default) not in (int, float, bool) or name not in launch_order:
            return None
        defaults[launch_order.index(name)] = default
    return CallPlan(nargs=len(args), kwnames=tuple(kwargs) or None, slots=slots, slot_names=tuple(slot_names),
                    defaults=defaults, meta_base=meta_base, guard=compiled.guard, result=compiled)


def _slot(fn: Any, name: str, value: Any, constexprs: set[str], launch_order: list[str],
          target: Any = None) -> SlotCheck | None:
    if name in constexprs:
        return SlotCheck("equal", value) if type(value) in _EQUAL_TYPES else None
    if value is None:
        return SlotCheck("none")  # compiled in, as the Python path keys it
    kind = kind_of(value)
    if kind is not None and kind.adapter is not None:
        return _adapted_slot(kind.adapter.for_target(target), name, value, launch_order)
    if name not in launch_order:
        return None
    parameter = launch_order.index(name)
    specialized = name not in fn.do_not_specialize
    cls = type(value)
    if cls is bool:
        return SlotCheck("bool", parameter=parameter)
    if cls is float:
        return SlotCheck("float", parameter=parameter)
    if cls is int:
        if _I32[0] <= value <= _I32[1]:
            range_ = "i32"
        elif _I64[0] <= value <= _I64[1]:
            range_ = "i64"
        elif 0 <= value <= _U64_MAX:
            range_ = "u64"
        else:
            return None
        hint = "any" if not specialized else "one" if value == 1 else "other" if value & 15 else "divisible"
        return SlotCheck("int", hint=hint, range=range_, parameter=parameter)
    if kind is not None and kind.name == "tensor" and is_torch_tensor(value):
        hint = "any" if not specialized else "unaligned" if value.data_ptr() & 15 else "aligned"
        return SlotCheck("tensor", (cls, value.dtype), hint=hint, parameter=parameter)
    return None


def _adapted_slot(adapter: Any, name: str, value: Any, launch_order: list[str]) -> SlotCheck | None:
    """A plugin's argument: keyed by its adapter's key, packed as its parts (the kernel
    parameters ``name + suffix``, one after another)."""
    key = adapter.key(value)
    names = [name + part.suffix for part in adapter.parts(key)]
    if not names or names[0] not in launch_order:
        return None
    first = launch_order.index(names[0])
    if launch_order[first:first + len(names)] != names:
        return None
    from .adapters import native_answer_of

    return SlotCheck("adapted", (adapter.key_and_parts, key, adapter.version_attribute, native_answer_of(adapter)),
                     parameter=first, parts=len(names))


__all__ = ["CallPlan", "SlotCheck", "plan_call"]
