"""Every hook a polytile plugin can implement.

A plugin is a module (or any object) whose functions are marked with
:data:`polytile.plugins.hookimpl` and whose names match a spec below.  It is found
through an entry point in the group ``polytile.backends`` (a backend) or
``polytile.plugins`` (anything else)::

    # pyproject.toml of the distribution "polytile-myplugin"
    [project.entry-points."polytile.plugins"]
    myplugin = "polytile_myplugin.plugin"

The core registers its own backends and passes through these same hooks.

Rules that hold for every hook:

* Hooks are called with keyword arguments only.  An implementation may accept fewer
  arguments than the spec names (``def polytile_cache_key(options)`` is fine), so specs
  can grow new arguments without breaking plugins.
* Implementations run one at a time in pluggy's order: the plugin registered last runs
  first, unless ``@hookimpl(tryfirst=True)`` or ``@hookimpl(trylast=True)`` says otherwise.
  Hook wrappers are not supported.
* The ``polytile_register_*`` hooks fill a registry.  Everything an implementation
  registers is attributed to its plugin.  The core's implementations run first, so a
  name the core registers stays the core's: a plugin registering it fails (below), with
  an error naming both owners.  Two plugins registering the same name is always an
  error naming both distributions.
* A plugin whose hook raises (any hook), or that cannot be imported, is disabled for the
  process with one warning naming it, its distribution and the error: everything it
  registered is removed, its hooks are not called again (``polytile info`` shows why),
  and only asking for something it would have provided raises an error naming it.  With
  the setting ``strict_plugins`` the failure is raised at once instead, as a
  :class:`~polytile.errors.PluginError` naming the plugin, its distribution and the
  hook.  A :class:`~polytile.errors.CompilationError` (a mistake in the user's kernel)
  passes through unchanged.
* The IR verifier runs after every pass a plugin registers or inserts: a pass that
  leaves invalid IR is an internal error naming it, its plugin and its distribution.
* Import vendor modules (``cuda.bindings``, ``hip``) inside hook bodies, never at the
  plugin's import time: plugins are imported whenever polytile needs its plugin manager.
* What a plugin's module registers while it is imported (an op class defined with
  ``define_op`` at module level) belongs to the plugin too, and is removed with it.
* Read settings through :mod:`polytile.config`, not ``os.environ``: every setting and
  environment variable of polytile is declared there (a plugin declares its own with
  :func:`polytile_register_settings`), and ``polytile config`` lists them.

Every example below is executed by the test suite (tests/plugins/test_hookspecs.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from . import hookspec

if TYPE_CHECKING:
    from ..target import Target


# -- registration hooks ---------------------------------------------------------------


@hookspec
def polytile_register_backends(registry: Any) -> None:
    """Register the backends (compilation targets) this plugin provides.

    :param registry: the backend registry.  Call ``registry.register(backend)`` with an
        *instance* of a :class:`polytile.backend.Backend` subclass; it is keyed by
        ``backend.name``, the part of a target before ``:`` (``"amd"`` for
        ``amd:gfx942``).
    :return: ignored.

    Called once per process, the first time polytile needs to know the backends
    (resolving a target, choosing one, ``polytile info``), and again if the setting
    ``disabled_plugins`` changes.  Keep it cheap: create the
    backend object, do not look for devices here (that is
    :meth:`Backend.active_devices`, called later and only when needed).

    Name the entry point after the backend (``amd = "polytile_amd.plugin"``): when the
    plugin fails to import or this hook raises, a request for target ``amd:...`` then
    reports that plugin's error instead of "unknown target backend".

    Example::

        from polytile.backend import Backend
        from polytile.plugins import hookimpl

        class AmdBackend(Backend):
            name = "amd"
            description = "AMD GPUs through HSACO code objects"
            architectures = ("gfx90a", "gfx942", "gfx950")

        @hookimpl
        def polytile_register_backends(registry):
            registry.register(AmdBackend())
    """


@hookspec
def polytile_register_dialects(registry: Any) -> None:
    """Register IR dialects: the ops, types and attributes this plugin adds to the IR.

    :param registry: the IR registry of :mod:`polytile.ir`.  Call
        ``registry.register(dialect)`` with a :class:`polytile.ir.registry.Dialect`
        grouping the op, type and attribute classes; each is keyed by its own name
        (``op.name``, ``type_name``, ``attribute_name``).
    :return: ignored.

    Called once per process, the first time the IR needs a name it does not know (the
    parser meeting ``tma.descriptor_load``, say), so a plugin's dialect costs nothing to
    a program that never uses it.  The interpreter semantics and per-backend lowerings of
    the ops travel with the op definitions.

    Example::

        from polytile.plugins import hookimpl

        @hookimpl
        def polytile_register_dialects(registry):
            # Imported here, not at module level: importing the IR costs time that a
            # program which never meets a tma op should not pay.
            from polytile.ir.registry import Dialect
            from polytile_tma import ops, types
            registry.register(Dialect(
                name="tma",
                ops=(ops.DescriptorLoad, ops.DescriptorStore),
                types=(types.TensorDescriptorType,),
                doc="Hopper tensor memory accelerator",
            ))
    """


@hookspec
def polytile_register_passes(registry: Any) -> None:
    """Register pass classes so that pipelines and ``--pipeline`` text can name them.

    :param registry: the pass registry of :mod:`polytile.passes`.  Call
        ``registry.register(PassClass)`` with the class (not an instance); it is keyed
        by the class's pass name.
    :return: ignored.

    Called once per process, the first time a pass is looked up by name.  Registering a
    pass does not run it: put it into pipelines with :func:`polytile_configure_pipeline`.

    A pass is a ``@dataclass`` subclass of :class:`polytile.passes.Pass` with a
    kebab-case ``name``; its fields are its options (``lds-size{budget-bytes=32768}`` in
    pipeline text).

    Example::

        from dataclasses import dataclass
        from typing import ClassVar

        from polytile.passes import Pass, PreservedAnalyses
        from polytile.plugins import hookimpl

        @dataclass
        class SizeLDS(Pass):
            '''Choose how much LDS (shared memory) each kernel may use.'''
            name: ClassVar[str] = "lds-size"
            budget_bytes: int = 64 * 1024

            def run(self, module, context):
                context.count("lds-size.runs")
                return PreservedAnalyses.all()   # it records a decision, changes no IR

        @hookimpl
        def polytile_register_passes(registry):
            registry.register(SizeLDS)
    """


@hookspec
def polytile_register_builtins(registry: Any) -> None:
    """Register language builtins that kernels reach through ``polytile.language``.

    :param registry: the builtin registry of :mod:`polytile.language.extensions`.
        Call ``registry.register(builtin)`` with a builtin function defined with the
        language's builtin decorator; it is keyed by the function's name and becomes
        ``pl.<name>`` inside kernels.  A builtin name the core already defines is a
        conflict, not an override.  Call ``registry.register_value_class(TypeClass,
        cls)`` to wrap every kernel value of the plugin's IR type ``TypeClass`` (a
        ``DialectType``) in ``cls``, a subclass of ``polytile.language.tensor`` that
        adds the type's methods and properties.
    :return: ignored.

    Called once per process, the first time the frontend resolves a ``pl.`` name it does
    not know, so plain ``import polytile.language`` stays fast.

    Example::

        from polytile.plugins import hookimpl

        @hookimpl
        def polytile_register_builtins(registry):
            from polytile_tma.language import make_tensor_descriptor, tensor_descriptor
            from polytile_tma.types import TensorDescType
            registry.register(make_tensor_descriptor)   # pl.make_tensor_descriptor
            registry.register_value_class(TensorDescType, tensor_descriptor)   # desc.load(...)
    """


@hookspec
def polytile_register_settings(registry: Any) -> None:
    """Declare the settings this plugin reads, so that they join polytile's one registry.

    :param registry: the settings registry of :mod:`polytile.config`.  Call
        ``registry.register(setting)`` with a :class:`polytile.config.Setting`; it is
        keyed by ``setting.name``.
    :return: ignored.

    A setting declared here is read, set and validated exactly like one of the core's:
    ``polytile.config.get(name)``, ``set``/``override``, its ``POLYTILE_*`` environment
    variable and ``[tool.polytile]`` in a project file.  ``polytile config`` lists it with
    its owner, the plugin's distribution.  When the plugin is disabled (setting
    ``disabled_plugins``) its settings leave the registry, and ``get`` of one says which
    plugin it belongs to and why that plugin is not loaded.

    Called once per process, the first time polytile meets a setting name that the core
    does not declare (a ``get``, a key of a project file, an unknown ``POLYTILE_*``
    variable, ``polytile config``).  Keep the declarations in a module of their own that
    imports nothing but :mod:`polytile.config`, so declaring costs no import of a vendor
    module.  Name a setting after the plugin (``tma_``, ``nvidia_``): two plugins
    declaring one name is a conflict, and a name of the core's cannot be taken.

    Example::

        from polytile.config import BOOL, Setting
        from polytile.plugins import hookimpl

        LDS_REPORT = Setting(
            "lds_report", BOOL, False, ("POLYTILE_LDS_REPORT",),
            doc="Print how much shared memory each kernel uses after it is compiled.",
        )

        @hookimpl
        def polytile_register_settings(registry):
            registry.register(LDS_REPORT)   # polytile.config.get("lds_report")
    """


# -- compilation hooks ----------------------------------------------------------------


@hookspec
def polytile_configure_pipeline(pipeline: Any, target: "Target", options: Any) -> None:
    """Insert, replace or remove passes in the pipeline of one compilation.

    :param pipeline: the :class:`~polytile.passes.pipeline.Pipeline` the backend built,
        editable in place.  Its stages (``tile``, ``distribute``, ``memory``, ``llvm``,
        ``assemble``) and every pass in them are named anchors: insert before or after a
        stage or a pass, replace a pass, or remove one.  Name a pass by its stage and
        name (``tile/cse``): a GPU backend runs ``cse`` in its ``distribute`` stage too.
        A bare name (``cse``) means its first occurrence, the tile stage's for a core
        pass on every target, and ``cse#2`` is its second occurrence.  Anchors are by
        name, never by position, so plugins compose.  Each pass you insert is attributed
        to your plugin; if your hook raises, its edits are undone and your plugin is
        disabled (see the rules above).
        Pipelines hold pass instances (``TMALowering()``, or
        ``pass_registry().create("tma-lowering")``); naming an anchor the pipeline lacks is
        an error that names your plugin.
    :param target: the resolved :class:`~polytile.target.Target` (``nvidia:sm_90a``).
    :param options: the backend's parsed options object
        (a :class:`~polytile.backend.BackendOptions` subclass).
    :return: ignored.

    Called once per compilation, after the backend's ``configure_pipeline`` has
    appended its stages, and before any pass runs.  Check ``target`` first: most plugins
    only apply to some backends or architectures.  Whatever makes your change differ
    between compilations must also enter :func:`polytile_cache_key`.

    Example::

        from polytile.plugins import hookimpl

        @hookimpl
        def polytile_configure_pipeline(pipeline, target, options):
            if target.backend != "nvidia" or target.arch != "sm_90a":
                return
            from polytile_tma.passes import TMALowering, TMAPipelineLoops
            pipeline.insert_after("tile/cse", TMALowering())
            pipeline.replace("distribute/pipeline-loops", TMAPipelineLoops(num_stages=options.num_stages))
    """


@hookspec
def polytile_cache_key(target: "Target", options: Any) -> str | None:
    """Return a string that must enter the compile cache key, or ``None``.

    :param target: the resolved target of the compilation.
    :param options: the backend's parsed options object.
    :return: a string (a hash of your settings, a toolchain version), or ``None`` when
        nothing beyond your plugin's name and version matters.

    Every loaded plugin's name and distribution version enter the cache key anyway; use
    this hook for what else changes generated code: a constant or data file of your
    plugin that can change without a new version, an external tool's version.
    Called once per compilation before the on-disk cache is consulted, so keep it fast
    and deterministic (no timestamps, no object ids).

    Example::

        from polytile.plugins import hookimpl

        #: LDS bytes the sizing heuristic aims for; changing it changes the generated code.
        LDS_BUDGET_BYTES = 64 * 1024

        @hookimpl
        def polytile_cache_key(target, options):
            if target.backend != "amd":
                return None
            return f"lds-budget={LDS_BUDGET_BYTES}"
    """


@hookspec(firstresult=True)
def polytile_adapt_argument(value: Any, target: "Target") -> Any:
    """Say how a kernel launch argument of a type the runtime does not know passes.

    :param value: the argument as the user passed it (a tensor descriptor object).
    :param target: ``None``: asked once per Python type, before any target is chosen;
        what depends on the target belongs in the plugin's passes and lowerings.
    :return: a :class:`polytile.runtime.adapters.ArgumentAdapter` for values of this
        type, or ``None`` to let other plugins try.

    Called the first time a launch passes a value of a type the runtime does not know
    (arrays, tensors, numbers and bools it knows), once per type: the answer is kept for
    the process.  The first non-``None`` result wins (``firstresult``).  Return ``None``
    quickly for values that are not yours.

    The adapter keys the launch (``key``), names the kernel parameter's IR type
    (``ir_type``), lists the run-time parameters the argument passes as (``parts``: a
    descriptor's base pointer, shape and strides), builds the value the parameter's name
    stands for inside the kernel from them (``build``), flattens a value into them at
    each launch (``flatten``), checks a value before a launch (``check``), and names the
    array the kernel writes through it for the autotuner (``storage``); see
    :mod:`polytile.runtime.adapters`.

    Example::

        from polytile.plugins import hookimpl

        @hookimpl
        def polytile_adapt_argument(value, target):
            from polytile_tma.host import TensorDescriptor
            if not isinstance(value, TensorDescriptor):
                return None
            from polytile_tma.arguments import ADAPTER
            return ADAPTER
    """


@hookspec
def polytile_compile_metadata(kernel_name: str, target: "Target", metadata: dict[str, Any]) -> None:
    """Add entries to a compiled kernel's metadata.

    :param kernel_name: the kernel's name.
    :param target: the target it was compiled for.
    :param metadata: the metadata dict of the compiled kernel (shared memory bytes,
        number of warps, ...).  Add keys prefixed with your plugin's name; do not change
        the core's or the backend's keys.  Values must be JSON-serialisable: the dict is
        stored in the on-disk cache next to the binary.
    :return: ignored.

    Called once per compilation, after the last pipeline stage, before the result is
    written to the cache; a cache hit reads the stored metadata and does not call it.

    Example::

        from polytile.plugins import hookimpl

        @hookimpl
        def polytile_compile_metadata(kernel_name, target, metadata):
            if target.backend == "amd":
                from polytile_lds.budget import lds_budget
                metadata["lds.budget_bytes"] = lds_budget(target.arch)
    """


#: Hooks that fill a registry (see :meth:`PluginManager.run_registration`).
REGISTRATION_HOOKS: Mapping[str, str] = {
    "polytile_register_backends": "backends",
    "polytile_register_dialects": "IR dialects",
    "polytile_register_passes": "passes",
    "polytile_register_builtins": "language builtins",
    "polytile_register_settings": "settings",
}
