"""Kernel arguments of types a plugin defines (``polytile_adapt_argument``).

The runtime knows arrays, tensors, numbers and bools.  For any other Python type it asks
the plugins once (the first time a launch passes a value of that type): a plugin that
knows the type returns an :class:`ArgumentAdapter`, which says

* ``key(value)``: the specialization key piece: what about the value decides the
  compiled kernel (a descriptor's element type, rank, block shape and padding, and the
  divisibility facts of its addresses); equal pieces launch the same kernel;
* ``ir_type(key)``: the kernel parameter's IR type for that piece (a plugin's type such
  as ``!tma.desc<...>``), which the frontend wraps in the type's value class;
* ``parts(key)``: the kernel's run-time parameters that one argument passes as (a base
  pointer, its shape and strides), as :class:`LaunchPart` records: each part's name
  suffix, IR type and divisibility;
* ``build(key, parts)``: inside the kernel, the value the parameter name stands for,
  made from the parts (kernel values, in order): a descriptor made from its base, shape
  and strides, of type ``ir_type(key)``;
* ``flatten(value)``: the values of the parts, in order, for one launch;
* ``check(kernel, argument, value)``: raise a :class:`~polytile.errors.LaunchError`
  naming the kernel and the argument when the value cannot be passed;
* ``storage(value)``: the array the kernel may write through the value (a descriptor's
  base), which the autotuner saves and restores between trials;
* ``for_target(target)``: the adapter for kernels compiled for one target (by default
  itself): one with hardware for the type may pass more (a Hopper tensor map).

The JIT keys the launch with ``key``; the frontend gives the kernel one parameter per
part (``a_desc_base``, ``a_desc_shape0`` ...) with the parts' divisibility as hints, and
binds the argument's name to ``build``'s value; the launcher receives the parts, so
every backend packs plain pointers and numbers, and each such argument is flattened at
every launch.  ``kernel.mutated_args`` names the argument when a write goes through any
of its parts.  A native dispatcher (NVIDIA's) plans calls with such arguments too: it
calls ``key_and_parts(value)`` and launches when the key is the planned one.
"""

from __future__ import annotations

from typing import Any, Hashable, NamedTuple


class LaunchPart(NamedTuple):
    """One run-time kernel parameter an adapted argument becomes."""

    #: Appended to the argument's name for the kernel parameter (``a_desc`` + ``_base``).
    suffix: str
    #: The parameter's IR type: a pointer or a scalar.
    type: Any
    #: 16 when every value passed is a multiple of 16 (an address: 16-byte aligned), else 1.
    divisibility: int = 1


class ArgumentAdapter:
    """How values of one Python type pass to kernels (see the module docstring).
    Subclass it and return an instance from ``polytile_adapt_argument``."""

    #: What the type is called in messages ("TensorDescriptor").
    name: str = "argument"
    #: The name of an attribute the type's values change on every change of theirs (an
    #: int from a global counter, say), or None.  A native dispatcher then reuses a value's
    #: parts while the same object has the same version and its first tensor part the same
    #: address, without calling :meth:`key_and_parts`.
    version_attribute: str | None = None
    #: A C function that answers what :meth:`key_and_parts` answers, for a native
    #: dispatcher to call instead (no tuples built, no second read of the address), or
    #: None.  It serves adapters whose parts are a tensor, then integers, then maybe one
    #: by-value blob (a tensor map).  It is a ``PyCapsule`` named
    #: ``"polytile.native_answer.v3"`` holding ``int answer(PyObject *value,
    #: PolytileAnswer *out)``, where ``PolytileAnswer`` is ``{PyObject *key; PyObject
    #: *blob; uint64_t address; long long device; int nwords; long long words[16];}``:
    #: ``key`` (a new reference) the key key_and_parts would give; ``address`` and
    #: ``device`` those of ``parts[0]``, the tensor, read in this call; ``words`` the
    #: ``nwords`` integer parts after it, each packed as its parameter's code packs an int
    #: (range-checked: a value that does not fit sends the launch to the Python path);
    #: ``blob`` (a new reference, or NULL) the bytes of the last part.  It returns 1 with
    #: ``out`` filled, 0 when ``key_and_parts`` must answer, or 2 when the value cannot
    #: pass as planned (the Python path then decides and words the error), never with an
    #: exception set.  The NVIDIA dispatcher defines the struct
    #: (``polytile_nvidia/_dispatch.h``); ``polytile_tma/_descriptor.c`` is an example.
    #: It is used only where it was set by the class that defines the ``key_and_parts``
    #: in effect or by one derived from it (a subclass that overrides ``key_and_parts``
    #: must set its own), and a capsule of another name is ignored.
    native_answer: Any = None

    def key(self, value: Any) -> Hashable:
        raise NotImplementedError

    def ir_type(self, key: Hashable) -> Any:
        raise NotImplementedError

    def parts(self, key: Hashable) -> list[LaunchPart]:
        raise NotImplementedError

    def build(self, key: Hashable, parts: list) -> Any:
        raise NotImplementedError

    def flatten(self, value: Any) -> tuple:
        raise NotImplementedError

    def check(self, kernel: str, argument: str, value: Any) -> None:
        """Raise a LaunchError when ``value`` cannot be passed (by default: never)."""

    def storage(self, value: Any) -> Any:
        """The array a kernel may write through ``value`` (None: none)."""
        return None

    def for_target(self, target: Any) -> "ArgumentAdapter":
        """The adapter that passes values to kernels compiled for ``target`` (the
        resolved :class:`~polytile.Target`): on a target with hardware for the type, a
        plugin may pass other parts (a TMA tensor map on Hopper) and build the kernel's
        value from them.  Its ``key`` must be this adapter's (the launch is keyed before
        the target is known).  ``kernel.lower`` and ``kernel.mutated_args`` use the
        adapter itself.  Default: ``self``."""
        return self

    def key_and_parts(self, value: Any) -> tuple:
        """``(key(value), flatten(value))`` in one call: what a native dispatcher asks at
        each launch it plans (override it to compute both at once)."""
        return self.key(value), self.flatten(value)


def native_answer_of(adapter: ArgumentAdapter) -> Any:
    """``adapter.native_answer`` where it answers for the ``key_and_parts`` in effect: set
    by the class that defines that ``key_and_parts`` or by one derived from it (or on the
    instance), else None (a subclass that overrides ``key_and_parts`` and keeps its
    parent's C answer would have the parent's parts packed)."""
    answer = getattr(adapter, "native_answer", None)
    if answer is None:
        return None
    owners = [vars(adapter), *(vars(klass) for klass in type(adapter).__mro__)]

    def owner(name: str) -> int:
        return next((i for i, names in enumerate(owners) if name in names), len(owners))

    return answer if owner("native_answer") <= owner("key_and_parts") else None


class AdaptedPiece(NamedTuple):
    """A key piece of an adapted argument: its adapter and the adapter's key."""

    adapter: ArgumentAdapter
    key: Hashable


def expand_parameters(params: list, arg_types: dict, hints: tuple, adapted: dict | None) -> list:
    """``(name, IR type, hint, owner)`` of each kernel parameter, adapted arguments
    expanded into their parts (``owner``: the argument's name; its hint ``"D"`` where the
    part's divisibility is 16)."""
    expanded = []
    for name, hint in zip(params, hints):
        piece = (adapted or {}).get(name)
        if piece is None:
            expanded.append((name, arg_types[name], hint, name))
            continue
        for part in piece.adapter.parts(piece.key):
            expanded.append((name + part.suffix, part.type, "D" if part.divisibility == 16 else "", name))
    return expanded


def adapter_for(value: Any) -> ArgumentAdapter | None:
    """The adapter a plugin gives for ``value``'s type, or None (asked once per type by
    :func:`polytile.runtime.binder.kind_of`, which remembers the answer)."""
    from ..plugins.manager import get_plugin_manager

    adapter = get_plugin_manager().call_hook("polytile_adapt_argument", value=value, target=None)
    if adapter is None:
        return None
    if not isinstance(adapter, ArgumentAdapter):
        from ..errors import PluginError

        raise PluginError(f"polytile_adapt_argument returned {type(adapter).__name__} for a "
                          f"{type(value).__name__}; it must return a polytile.runtime.adapters.ArgumentAdapter or None")
    return adapter


def flattening_launcher(launcher: Any, adapters: list) -> Any:
    """``launcher(grid, args)`` wrapped to pass each adapted argument as its parts;
    ``adapters[i]`` is the adapter of run-time argument ``i``, or None."""
    positions = [(i, a) for i, a in enumerate(adapters) if a is not None]

    def launch(grid: Any, args: Any, _inner: Any = launcher, _positions: Any = positions) -> None:
        flat = list(args)
        for i, adapter in reversed(_positions):  # from the end: earlier indices stay valid
            flat[i:i + 1] = adapter.flatten(flat[i])
        _inner(grid, flat)

    return launch


__all__ = ["AdaptedPiece", "ArgumentAdapter", "LaunchPart", "adapter_for", "expand_parameters",
           "flattening_launcher"]
