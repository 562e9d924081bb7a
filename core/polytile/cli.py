"""The ``polytile`` command.

    polytile info                       backends, plugins, devices, the chosen target and why
    polytile passes                     every registered pass with its options and owner
    polytile opt in.ir -p PIPELINE      run passes over an IR file, like mlir-opt
    polytile config                     every setting, its value and where it came from
    polytile compile FILE.py:KERNEL ... ahead-of-time compile: every stage's IR, the binary
                                        and a JSON of metadata (see docs/aot.md)

A user error prints ``polytile: error: ...`` and exits with status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence


def _cmd_info(args: argparse.Namespace) -> int:
    from . import config
    from .errors import ConfigError
    from .passes.registry import pass_registry
    from .plugins.manager import PluginManager, get_plugin_manager, reset_plugin_manager

    # info is where a user looks when something is wrong: a bad setting is listed at the
    # end and the rest of the report is still shown.
    problems = config.problems()
    unreadable_disabled = False
    try:
        manager = get_plugin_manager()
    except ConfigError as exc:
        unreadable_disabled = True
        # 'disabled_plugins' is unreadable: show every plugin rather than none.
        if str(exc) not in problems:
            problems.append(str(exc))
        manager = PluginManager(disabled=())
        reset_plugin_manager(manager)
    try:
        pass_registry()  # so that the report shows which plugin provides which passes
    except Exception as exc:  # a broken plugin must not hide the rest of the report
        print(f"warning: passes could not be listed: {exc}", file=sys.stderr)
    info = manager.info(refresh_devices=True)
    out = [f"polytile {info.version}", "", "Backends:"]
    if info.backends_error:
        out.append(f"  error: {info.backends_error}")
    for backend in info.backends:
        archs = ", ".join(f"{backend.name}:{a}" for a in backend.architectures) if backend.architectures \
            else backend.name
        owner = backend.provided_by
        out.append(f"  {backend.name:<8} {backend.description}")
        out.append(f"           from {owner.distribution} {owner.version}".rstrip())
        out.append(f"           targets: {archs}")
        if backend.devices:
            for device in backend.devices:
                out.append(f"           device: {device}")
            out += _launch_path_lines(manager, backend.name)
        elif not backend.architectures:
            out.append("           runs on this machine's CPU: the target used when no device is found")
        else:
            reason = backend.no_device_reason or "no device found"
            out.append(f"           no device: {reason}")
    out += ["", "Plugins:"]
    if info.load_error:
        out.append(f"  error: {info.load_error}")
    for plugin in info.plugins:
        version = f" {plugin.version}" if plugin.version else ""
        line = f"  {plugin.name:<12} {plugin.status:<9} {plugin.distribution}{version} ({plugin.group})"
        out.append(line)
        if plugin.reason:
            out.append(f"               {plugin.reason}")
        for problem in plugin.problems:
            out.append(f"               problem: {problem}")
        for kind, names in sorted(plugin.provides.items()):
            plural = kind + ("es" if kind.endswith("s") else "s")
            out.append(f"               {plural}: {', '.join(names)}")
    if unreadable_disabled:
        out.append("  (the setting 'disabled_plugins' cannot be read, see below: no plugin is disabled)")
    if info.unknown_disabled:
        out.append(f"  (setting 'disabled_plugins' names unknown plugins: {', '.join(info.unknown_disabled)})")
    out += ["", "Target:"]
    if info.target:
        out.append(f"  {info.target}  ({info.target_reason})")
    else:
        out.append(f"  none: {info.target_error}")
    warnings = config.check_environment()
    if problems or warnings:
        out += ["", "Configuration problems:"]
        out += [f"  error: {problem}" for problem in problems]
        out += [f"  warning: {warning}" for warning in warnings]
    print("\n".join(out))
    failed = len(problems) + bool(info.load_error)
    if failed:
        print(f"polytile: error: {failed} problem{'s' if failed > 1 else ''} in the setup (above)", file=sys.stderr)
        return 1
    return 0


def _launch_path_lines(manager: Any, name: str) -> list[str]:
    """How the backend launches kernels and why (fast native path or its fallback), for
    backends that say (an optional ``launch_path()`` method: it may build a helper)."""
    backend = manager.backends.find(name)
    launch_path = getattr(backend, "launch_path", None)
    if not callable(launch_path):
        return []
    try:
        return [f"           launch: {launch_path()}"]
    except Exception as exc:  # a report line must not hide the rest of the report
        return [f"           launch: unknown ({exc})"]


def _cmd_passes(args: argparse.Namespace) -> int:
    from .passes.registry import pass_registry

    registry = pass_registry()
    entries = sorted(registry.items())
    width = max([16, *(len(name) for name, _, _ in entries)])  # the names' column
    for name, cls, owner in entries:
        summary = cls.summary or (cls.__doc__ or "").strip().split("\n")[0]
        print(f"{name:<{width}} {summary}")
        print(f"{'':<{width}} from {owner.distribution}" + (f" {owner.version}" if owner.version else "")
              + (f" (plugin '{owner.name}')" if owner.name != "core" else ""))
        for option, type_name, default, doc in cls.describe_options():
            detail = f" - {doc}" if doc else ""
            print(f"{'':<{width}}   {option}: {type_name} = {default!r}{detail}")
    return 0


def _read_input(path: str) -> tuple[str, str]:
    from .errors import PolytileError

    what = "IR from standard input" if path == "-" else f"IR file '{path}'"
    try:
        if path == "-":
            stdin = getattr(sys.stdin, "buffer", None)
            if stdin is None:  # replaced by a text-only stream (tests, embedding)
                return sys.stdin.read(), "<stdin>"
            data = stdin.read()
        else:
            with open(path, "rb") as handle:
                data = handle.read()
    except OSError as exc:
        raise PolytileError(f"cannot read {what}: {exc.strerror or exc}") from None
    try:
        # Decoded whole, not through a text stream, so that the position below is exact.
        return data.decode("utf-8"), ("<stdin>" if path == "-" else path)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise PolytileError(f"cannot read {what}: it is not UTF-8 text (byte 0x{data[exc.start]:02x} on line "
                            f"{line}, at byte offset {exc.start}); save it as UTF-8") from None


def _write_output(path: str, text: str) -> None:
    from .errors import PolytileError

    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise PolytileError(f"cannot write output file '{path}': {exc.strerror or exc}") from None


def _target_context(target: str, options: Sequence[str] | None) -> tuple[Any, Any]:
    """(the target's whole pipeline, a PassContext for it) from ``--target`` and ``--option``s."""
    from .aot import parse_assignments
    from .passes.default_pipeline import build_pipeline
    from .passes.pass_base import PassContext
    from .plugins.manager import get_plugin_manager

    manager = get_plugin_manager()
    choice = manager.choose_target(target, source="--target")
    backend, resolved = manager.backends.resolve(choice.target)
    parsed = backend.parse_options(parse_assignments(options or [], "--option"))
    return build_pipeline(target=resolved, options=parsed, backend=backend), PassContext(target=resolved,
                                                                                       options=parsed)


def _debug_overrides(args: argparse.Namespace) -> dict:
    """The settings --print-ir-before/--print-ir-after/--time-passes add to."""
    from . import config

    overrides: dict = {}
    if args.print_ir_before:
        overrides["print_ir_before"] = config.get("print_ir_before") + args.print_ir_before
    if args.print_ir_after:
        overrides["print_ir_after"] = config.get("print_ir_after") + args.print_ir_after
    if args.time_passes:
        overrides["time_passes"] = True
    return overrides


def _cmd_opt(args: argparse.Namespace) -> int:
    from . import config
    from .errors import PolytileError
    from .ir import parse_module, print_ir, verify
    from .passes.manager import PassManager
    from .passes.pipeline import parse_pipeline

    if args.option and not args.target:
        raise PolytileError("--option sets a target's option: give the target with --target")
    whole, context = _target_context(args.target, args.option) if args.target else (None, None)
    if args.print_pipeline:
        if whole is None:
            raise PolytileError("--print-pipeline prints a target's pipeline: give the target with --target, "
                                "such as --target nvidia:sm_90a")
        sys.stdout.write(f"{whole}\n")
        if args.input is None:
            return 0
    if args.input is None:
        raise PolytileError("give the IR file to run the passes on (or - for standard input)")
    text, source = _read_input(args.input)
    module = parse_module(text, source, locate=True)
    if not len(module.body.block) and all(not line.strip() or line.lstrip().startswith("//")
                                          for line in text.splitlines()):
        # Nothing at all (an explicit empty 'module {}' is accepted, as mlir-opt does): a
        # wrong path or a failed generator upstream, not an input to pass through silently.
        from .errors import PolytileError

        what = "standard input" if args.input == "-" else f"IR file '{args.input}'"
        raise PolytileError(f"{what} holds no operation ({'it is empty' if not text.strip() else 'only comments'}); "
                            "give it a module, a function or an op to run the passes on")
    verify(module)
    pipeline = parse_pipeline(args.pipeline or "")
    # The flags add to the settings (POLYTILE_PRINT_IR_AFTER=... works here too), and
    # opt verifies after every pass unless told not to, as mlir-opt does.
    overrides: dict = {"verify_each": not args.no_verify_each, **_debug_overrides(args)}
    with config.override(**overrides):
        # With --target, the passes see the target and its options (a backend's passes,
        # the GPU stages' passes need them).
        PassManager(pipeline).run(module, context, label=source)
    result = print_ir(module, print_locations=args.print_locations, layout_aliases=not args.no_layout_aliases)
    if args.output and args.output != "-":
        _write_output(args.output, result)
    else:
        sys.stdout.write(result)
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    from . import config
    from .errors import ConfigError

    invalid = 0
    owner = None
    try:
        rows = config.describe()
    except ConfigError as exc:  # the plugins load after disabled_plugins: show the core's, and why
        rows = config.describe(plugins=False)  # the bad value is among them, counted below
        print(f"# the settings of backends and plugins cannot be listed: {exc}")
    for setting in rows:
        if setting.owner != owner:  # the core's settings, then each backend's or plugin's
            owner = setting.owner
            print(f"# settings of {owner}{' (the core)' if owner == 'polytile' else ''}")
        source = config.source_of(setting.name)
        try:
            value = config.get(setting.name)
            shown = str(value) if hasattr(value, "__fspath__") else repr(value)
        except Exception as exc:  # show every bad value, then fail
            invalid += 1
            shown = f"<invalid: {exc}>"
        env = f" [{setting.env}]" if setting.env else ""
        print(f"{setting.name} = {shown}   ({source}){env}")
    try:
        warnings = config.check_environment()
    except ConfigError:  # reported above: the plugins' variables cannot be told from typos
        warnings = []
    for warning in warnings:
        print(f"warning: {warning}")
    for note in config.notes():
        print(f"note: {note}")
    if invalid:
        print(f"polytile: error: {invalid} setting{'s have' if invalid > 1 else ' has'} an invalid value (above)",
              file=sys.stderr)
        return 1
    return 0


def _cmd_compile(args: argparse.Namespace) -> int:
    from .aot import AotError, compile_kernel, parse_assignments
    from .resources import RESOURCES, describe
    from .warp_specialize import WARP_SPECIALIZE

    constexprs = parse_assignments(args.constexpr or [], "--constexpr")
    options = parse_assignments(args.option or [], "--option")
    for flag, name in ((args.num_warps, "num_warps"), (args.num_stages, "num_stages")):
        if flag is not None:
            if name in options:
                raise AotError(f"--{name.replace('_', '-')} and --option {name}=... both give {name}: keep one")
            options[name] = flag
    from . import config

    with config.override(**_debug_overrides(args)):
        result = compile_kernel(args.kernel, target=args.target, target_source="--target", signature=args.signature,
                                constexprs=constexprs, options=options)
    # Looked up before anything is written, so a misspelled --emit leaves no files behind.
    emitted = result.emit(args.emit) if args.emit else None
    if args.output is not None or emitted is None:
        files = result.write(args.output or ".")
        print(f"polytile: compiled '{result.kernel}' for {result.target}: {len(files)} files in "
              f"{files[0].parent if files else args.output}", file=sys.stderr)
        if RESOURCES in result.metadata:
            print(f"polytile: resources: {describe(result.metadata[RESOURCES])}", file=sys.stderr)
        for loop in result.metadata.get(WARP_SPECIALIZE) or ():
            done = "specialised" if loop.get("specialised") else f"not specialised ({loop.get('why')})"
            overlap = loop.get("overlap")  # polytile-warpspec's overlap-dots, where it was asked for
            if overlap is not None:
                done += "; the second dot overlapped" if overlap is True else f"; {overlap}"
            print(f"polytile: warp_specialize loop at {loop.get('loop')}: {done}", file=sys.stderr)
    if emitted is not None:
        if isinstance(emitted, bytes):
            if sys.stdout.isatty():
                raise AotError(f"--emit {args.emit} is binary ({len(emitted)} bytes): redirect standard output "
                               "to a file, or use -o DIR")
            sys.stdout.flush()
            sys.stdout.buffer.write(emitted)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(emitted if emitted.endswith("\n") else emitted + "\n")
    return 0


def _split_names(text: str) -> list[str]:
    return [part for part in text.split(",") if part]


class _Parser(argparse.ArgumentParser):
    """argparse, plus "did you mean" for a misspelled option."""

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            from .errors import did_you_mean

            command = getattr(parsed, "command", None)
            known = [o for a in self._subparser(command)._actions for o in a.option_strings]
            unknown = next((e for e in extras if e.startswith("-")), extras[0])
            self._subparser(command).error(f"unrecognized argument '{unknown}'{did_you_mean(unknown, known)}")
        return parsed

    def _subparser(self, command: str | None) -> argparse.ArgumentParser:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and command in action.choices:
                return action.choices[command]
        return self


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(prog="polytile", description="polytile: a multi-backend tile-kernel compiler",
                     allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"polytile {__version__}",
                        help="print polytile's version and exit (`polytile info` lists the plugins' too)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    sub.add_parser("info", help="installed backends and plugins, devices, the chosen target and why").set_defaults(
        func=_cmd_info)
    sub.add_parser("passes", help="every registered pass with its options and owner").set_defaults(func=_cmd_passes)
    sub.add_parser("config", help="every setting, its value and where the value came from").set_defaults(
        func=_cmd_config)
    opt = sub.add_parser("opt", help="run a pass pipeline over an IR file (like mlir-opt)")
    opt.add_argument("input", nargs="?", help="IR file, or - for standard input")
    opt.add_argument("-p", "--pipeline", default="", help="pipeline text, e.g. 'canonicalize,cse,licm{...}'")
    opt.add_argument("-t", "--target", help="run the passes for this target (backend:arch, such as "
                     "nvidia:sm_90a), so that a backend's and the GPU stages' passes can run")
    opt.add_argument("--option", action="append", metavar="NAME=VALUE",
                     help="a target option the passes read, such as num_warps=8 (repeatable; needs --target)")
    opt.add_argument("--print-pipeline", action="store_true",
                     help="print the target's whole pipeline (its text, for -p) and exit when no input is given")
    opt.add_argument("-o", "--output", help="write the result here instead of standard output")
    opt.add_argument("--print-ir-before", type=_split_names, metavar="PASSES",
                     help="comma-separated pass names or 'all' (adds to POLYTILE_PRINT_IR_BEFORE)")
    opt.add_argument("--print-ir-after", type=_split_names, metavar="PASSES",
                     help="comma-separated pass names or 'all' (adds to POLYTILE_PRINT_IR_AFTER)")
    opt.add_argument("--time-passes", action="store_true", help="print the time of each pass")
    opt.add_argument("--no-verify-each", action="store_true", help="do not verify the IR after every pass")
    opt.add_argument("--print-locations", action="store_true", help="print source locations (loc(...))")
    opt.add_argument("--no-layout-aliases", action="store_true",
                     help="write every tile layout in full where it is used, not once at the top "
                          "(#blocked0 = #gpu.blocked<...>) with an alias in the types")
    opt.set_defaults(func=_cmd_opt)
    compile_ = sub.add_parser(
        "compile", help="compile a kernel ahead of time (no GPU needed): IR of every stage, binary, metadata",
        description="Compile one specialization of a @jit kernel for a target, without running it. Writes "
        "KERNEL.NN-STAGE.ir (the IR after each stage), the backend's artifacts (KERNEL.ll, KERNEL.ptx, "
        "KERNEL.cubin; KERNEL.s, KERNEL.hsaco for AMD) and KERNEL.json (metadata) into DIR. See docs/aot.md.")
    compile_.add_argument("kernel", metavar="FILE.py:KERNEL", help="the file defining the kernel, and its name")
    compile_.add_argument("-t", "--target", required=True, help="backend:arch, such as nvidia:sm_90a or amd:gfx942")
    compile_.add_argument("-s", "--signature", required=True,
                          help="types of the run-time parameters in order, such as '*fp32:16,*fp32,i32' "
                          "(*DTYPE: pointer; :16 divisible by 16; :1 equal to 1)")
    compile_.add_argument("-c", "--constexpr", action="append", metavar="NAME=VALUE",
                          help="value of a constexpr parameter (repeat for each), such as BLOCK=1024")
    compile_.add_argument("--num-warps", type=int, metavar="N", help="warps per program (backend option num_warps)")
    compile_.add_argument("--num-stages", type=int, metavar="N", help="software pipelining depth (num_stages)")
    compile_.add_argument("--option", action="append", metavar="NAME=VALUE",
                          help="any other backend option, such as maxnreg=128 (repeatable)")
    compile_.add_argument("-o", "--output", metavar="DIR",
                          help="directory for the files (created when needed); default: the current directory, "
                          "or none with --emit")
    compile_.add_argument("--print-ir-before", type=_split_names, metavar="PASSES",
                          help="print the IR before these passes, comma-separated, or 'all' (adds to "
                          "POLYTILE_PRINT_IR_BEFORE)")
    compile_.add_argument("--print-ir-after", type=_split_names, metavar="PASSES",
                          help="print the IR (and the artifacts made) after these passes, comma-separated, or "
                          "'all' (adds to POLYTILE_PRINT_IR_AFTER)")
    compile_.add_argument("--time-passes", action="store_true", help="print the time of each pass")
    compile_.add_argument("--emit", metavar="STAGE",
                          help="print one stage or artifact to standard output: a stage (frontend, tile, "
                          "distribute, ...), an artifact (llvm or ll, ptx, cubin, amdgcn or s, hsaco) or json")
    compile_.set_defaults(func=_cmd_compile)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import PolytileError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except PolytileError as exc:
        print(format_error(exc), file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


def format_error(exc: BaseException) -> str:
    """``polytile: error: ...``; messages that carry their own ``file:line: error:``
    prefix keep it instead of getting a second ``error:``."""
    text = str(exc)
    first_line = text.split("\n", 1)[0]
    if first_line.startswith("error: "):
        return f"polytile: {text}"
    if ": error: " in first_line:
        return f"polytile: {text}"
    return f"polytile: error: {text}"


if __name__ == "__main__":
    sys.exit(main())
