"""Every error polytile raises on purpose.

All of them derive from :class:`PolytileError`, so ``except polytile.PolytileError``
catches everything that is the user's to fix.  Each error carries enough context to be
read on its own: the file and line, the op, the setting, the plugin, and for unknown
names the close matches.
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple


def close_matches(name: str, candidates: Iterable[str], limit: int = 3) -> list[str]:
    """The registered names nearest to ``name``, best first."""
    import difflib  # only ever needed to word an error

    return difflib.get_close_matches(name, list(candidates), n=limit, cutoff=0.5)


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """A ``"; did you mean 'x' or 'y'?"`` suffix, or ``""`` when nothing is close."""
    matches = close_matches(name, candidates)
    if not matches:
        return ""
    quoted = [f"'{m}'" for m in matches]
    joined = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"; did you mean {joined}?"


def user_stack_level(skip: int = 1) -> int:
    """The ``stacklevel`` for :func:`warnings.warn` that shows the first frame outside
    polytile: its files and the code it generates (launchers, guards: ``"<polytile ..."``).
    ``skip``: the frames between the caller of this function and ``warnings.warn``'s
    caller (1: the caller itself calls ``warnings.warn``)."""
    import os
    import sys

    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(skip), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith((package, "<polytile")):
        frame, level = frame.f_back, level + 1
    return level


class SourceLocation(NamedTuple):
    """Where something came from: a Python kernel's file, line and column (1-based)."""

    file: str
    line: int
    column: int = 0

    def __str__(self) -> str:
        if self.column:
            return f"{self.file}:{self.line}:{self.column}"
        return f"{self.file}:{self.line}"


class PolytileError(Exception):
    """Base of every error polytile raises for something the user can fix."""


class ConfigError(PolytileError, ValueError):
    """A setting has a value that is not allowed."""


class NumWarpsError(ConfigError, AssertionError):
    """``num_warps`` is not a power of two: a :class:`ConfigError`, and an
    ``AssertionError`` as Triton raises for it (``pytest.raises(AssertionError)`` in code
    ported from Triton keeps working)."""


class UnsupportedOptionError(ConfigError):
    """A launch option the target's backend does not have (``maxnreg`` on AMD or the
    interpreter, say) was given a value that asks for something.  The autotuner drops a
    config that gives one, as it drops a config that does not fit."""


class UnknownNameError(PolytileError, KeyError):
    """A pass, option, target, op or plugin name that nothing registered.

    The message lists close matches.  ``KeyError`` is a base class so that lookups
    behave like dictionary lookups, but the message is not quoted like a bare KeyError.
    """

    def __init__(self, kind: str, name: str, known: Iterable[str], where: str = ""):
        self.kind = kind
        self.name = name
        self.known = sorted(set(known))
        suffix = did_you_mean(name, self.known)
        if not suffix and self.known and len(self.known) <= 12:
            suffix = "; known: " + ", ".join(self.known)
        location = f" {where}" if where else ""
        super().__init__(f"unknown {kind} '{name}'{location}{suffix}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class UnknownSettingError(UnknownNameError, ConfigError):
    """A setting name that polytile does not have (in a call or in a project file).

    Both an :class:`UnknownNameError` (lookups behave like a dict) and a
    :class:`ConfigError` (``except ConfigError`` catches every configuration mistake).
    """


class IRParseError(PolytileError):
    """Malformed IR text: carries the line and column of the offending token."""

    def __init__(self, message: str, source_name: str, line: int, column: int, source_line: str = ""):
        self.message = message
        self.source_name = source_name
        self.line = line
        self.column = column
        self.source_line = source_line
        text = f"{source_name}:{line}:{column}: error: {message}"
        if source_line:
            text += f"\n  {source_line}\n  {' ' * (column - 1)}^"
        super().__init__(text)


class VerificationError(PolytileError):
    """Invalid IR: names the op and where it came from."""

    def __init__(self, message: str, op_name: str = "", location: object = None):
        self.message = message
        self.op_name = op_name
        self.location = location
        where = f"{location}: " if location is not None else ""
        what = f"'{op_name}' op " if op_name else ""
        super().__init__(f"{where}error: {what}{message}")


class CompilationError(PolytileError):
    """A mistake in a kernel, shown at its source line with a caret."""

    def __init__(self, message: str, location: SourceLocation | None = None, source_line: str | None = None):
        self.message = message
        self.location = location
        self.source_line = source_line
        text = f"{location}: error: {message}" if location else f"error: {message}"
        if source_line is not None and location is not None:
            caret = " " * max(location.column - 1, 0) + "^"
            text += f"\n    {source_line}\n    {caret}"
        super().__init__(text)

    @property
    def error_message(self) -> str:
        """What is wrong, without the place (Triton's ``CompilationError.error_message``)."""
        return self.message


class OutOfResourcesError(CompilationError):
    """A kernel needs more of a per-block resource (shared memory, LDS, registers) than
    the target gives, even after the cheaper choices the compiler tried.

    ``need`` and ``limit`` count ``unit`` (bytes for memory) per ``per`` (a block, a
    workgroup); ``remedies_tried`` names what was tried before giving up.  The autotuner
    drops configs that raise it.
    """

    def __init__(self, *, kernel: str, resource: str, need: int, limit: int, target: str = "",
                 unit: str = "bytes", per: str = "block", remedies_tried: Iterable[str] = (), hint: str = "",
                 location: SourceLocation | None = None, source_line: str | None = None):
        self.kernel = kernel
        self.resource = resource
        self.need = need
        self.limit = limit
        self.target = target
        self.remedies_tried = tuple(remedies_tried)
        where = f"{target} gives" if target else "the target gives"
        tried = f" (after trying: {', '.join(self.remedies_tried)})" if self.remedies_tried else ""
        advice = f"; {hint}" if hint else ""
        super().__init__(f"kernel '{kernel}' needs {need} {unit} of {resource}, more than the {limit} {unit} {where} "
                         f"a {per}{tried}{advice}", location, source_line)

    @property
    def required(self) -> int:
        """``need``, under the name the AMD backend's error used."""
        return self.need


class LaunchError(PolytileError, TypeError):
    """A kernel was launched with arguments or a grid that do not fit; names the kernel and argument."""


class ArgumentOverflowError(LaunchError, OverflowError):
    """An integer argument does not fit in 64 bits (signed or unsigned): a
    :class:`LaunchError` naming the kernel and argument, and an ``OverflowError`` as
    Triton raises for it."""


class LaunchOutOfResourcesError(OutOfResourcesError, LaunchError):
    """The device would not launch a compiled kernel for want of a per-block resource
    (threads, registers, shared memory): both an :class:`OutOfResourcesError`, so the
    autotuner drops the config, and a :class:`LaunchError`.

    Backends raise it (or a subclass) from their launchers; ``need`` and ``limit`` are 0
    where the device did not say (a driver's out-of-resources status).
    """

    def __init__(self, message: str, *, kernel: str, resource: str, need: int = 0, limit: int = 0,
                 target: str = ""):
        self.kernel = kernel
        self.resource = resource
        self.need = need
        self.limit = limit
        self.target = target
        self.remedies_tried = ()
        self.message = message
        self.location = None
        self.source_line = None
        # The launcher's message is whole: no "error:" prefix, as no source line is at fault.
        Exception.__init__(self, message)


class DriverError(PolytileError):
    """A call into a GPU runtime failed (the CUDA driver, HIP): names the call, the kernel
    when there is one, the device, the runtime's error code and its own explanation.

    A backend subclasses it with its runtime's name (``runtime``, "CUDA driver") and the
    hints it adds to known error codes (``hints``: code -> what to do about it)."""

    runtime = "GPU runtime"
    hints: dict = {}

    def __init__(self, call: str, error: str, description: str = "", kernel: str | None = None,
                 device: int | None = None):
        self.call = call
        self.error = error
        self.kernel = kernel
        self.device = device
        super().__init__(self.describe(call, error, description, kernel, device))

    @classmethod
    def describe(cls, call: str, error: str, description: str, kernel: str | None, device: int | None) -> str:
        where = f"kernel '{kernel}': " if kernel else ""
        on = f" on device {device}" if device is not None else ""
        text = f"{where}{cls.runtime} call {call} failed{on} with {error}"
        if description and description != error:
            text += f" ({description})"
        hint = cls.hints.get(error)
        if hint:
            text += f": {hint}"
        return text


class DriverOutOfResourcesError(DriverError, LaunchOutOfResourcesError):
    """A GPU runtime refused a launch for want of a per-block resource (its own
    out-of-resources status): a :class:`DriverError` and a
    :class:`LaunchOutOfResourcesError` (``need`` and ``limit`` are 0: the runtime does not
    say them), so the autotuner drops the configuration.  ``resource`` says which
    resources the runtime's status covers ("registers or threads")."""

    resource = "registers or threads"

    def __init__(self, call: str, error: str, description: str = "", kernel: str | None = None,
                 device: int | None = None):
        self.call = call
        self.error = error
        self.device = device
        LaunchOutOfResourcesError.__init__(self, self.describe(call, error, description, kernel, device),
                                           kernel=kernel or "", resource=type(self).resource)


class NoConfigFitsError(LaunchError):
    """Every config of an autotuned kernel needs more than the target has.

    ``failures``: each config and the :class:`OutOfResourcesError` that dropped it."""

    def __init__(self, kernel: str, failures: dict):
        self.kernel = kernel
        self.failures = dict(failures)
        lines = "\n".join(f"  {config}: {getattr(error, 'message', None) or error}"
                          for config, error in self.failures.items())
        super().__init__(f"'{kernel}': none of its {len(self.failures)} autotuning configs fits the target:\n{lines}\n"
                         "add configs with smaller blocks, fewer stages or fewer warps")


class InterpreterError(PolytileError):
    """A kernel did something wrong while the interpreter ran it (an access out of
    bounds, a division by zero, ...), or cannot be interpreted.

    ``kernel``, ``op_name``, ``location`` (a SourceLocation, or None) and ``program_id``
    say where; each may be None when it does not apply.
    """

    def __init__(self, message: str, *, kernel: str | None = None, op_name: str | None = None,
                 location: object = None, program_id: tuple[int, ...] | None = None):
        self.message = message
        self.kernel = kernel
        self.op_name = op_name
        self.location = location
        self.program_id = program_id
        parts = []
        if kernel is not None:
            parts.append(f"kernel '{kernel}'")
        if program_id is not None:
            parts.append(f"program {tuple(program_id)}")
        where = f"{location}: " if location is not None else ""
        context = f"{', '.join(parts)}: " if parts else ""
        what = f"'{op_name}' " if op_name else ""
        super().__init__(f"{where}error: {context}{what}{message}")


class InterpreterArgumentError(InterpreterError, TypeError):
    """A launch argument does not fit its kernel parameter, or the grid is malformed."""


class InterpreterUnsupportedError(InterpreterError, NotImplementedError):
    """The kernel uses an op or a type the interpreter does not support (yet)."""


class AotError(PolytileError, ValueError):
    """A mistake in what an ahead-of-time compile was asked: the kernel spec, the
    signature, a constexpr or an output to emit."""


class PassFailure(PolytileError):
    """A pass raised while compiling: an internal compiler error, named by pass."""

    def __init__(self, pass_name: str, cause: BaseException, ir_dump_hint: str = ""):
        self.pass_name = pass_name
        self.cause = cause
        hint = f"\n{ir_dump_hint}" if ir_dump_hint else ""
        super().__init__(f"internal compiler error in pass '{pass_name}': {type(cause).__name__}: {cause}{hint}")


class InvalidIRError(PassFailure, VerificationError):
    """A pass left invalid IR (a value used before or without its definition, an op
    against its definition): an internal error of that pass, which names it
    (``pass_name``), its ``stage`` and the plugin and distribution that provide it
    (``owner``; ``plugin`` and ``distribution``, empty for polytile's own passes).
    ``cause`` is what the verifier found; ``suspects``, when the IR was found invalid
    before a plugin's pass after several passes that are not verified by default,
    ``stage/pass`` of each (``pass_name`` is the last).  The op's ``location`` is only
    where the op came from: the kernel's line is not at fault.  The pass manager makes
    it (``polytile.passes.manager.invalid_ir_error``, which words the message)."""

    def __init__(self, message: str, pass_name: str, stage: str, owner: Any, problem: VerificationError,
                 suspects: tuple[str, ...] = (), plugin: str = "", distribution: str = ""):
        self.pass_name = pass_name
        self.stage = stage
        self.owner = owner
        self.suspects = suspects
        self.cause = problem
        self.message = problem.message
        self.op_name = problem.op_name
        self.location = problem.location
        self.plugin = plugin
        self.distribution = distribution
        Exception.__init__(self, message)


class LayoutError(PolytileError, ValueError):
    """A GPU layout that cannot be built, or that does not fit a tile shape (in IR text a
    pass plugin parses, say)."""


class PluginError(PolytileError):
    """A plugin failed to load, or raised in a hook, or clashes with another plugin."""

    def __init__(self, message: str, plugin: str = "", distribution: str = "", hook: str = ""):
        self.plugin = plugin
        self.distribution = distribution
        self.hook = hook
        super().__init__(message)


class PluginConflictError(PluginError):
    """Two plugins claim the same name (a target, a pass, an op)."""


class TargetError(PolytileError):
    """No backend can compile for the requested target, or the target is malformed."""
