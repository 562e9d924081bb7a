"""The call graph of a module: which function calls which, and from where.

Nodes are the module's ``func.func`` ops, edges are ``func.call`` sites::

    graph = context.analyses.get(CallGraph, module)
    for func in graph.bottom_up():          # callees before callers
        ...
    cycle = graph.find_cycle()              # ["a", "b"]: a calls b, b calls a

Functions may be given by op or by name everywhere.  Orders are deterministic (module
order, then call order) so passes built on the graph produce stable output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Union

from ..errors import VerificationError
from .manager import Analysis, AnalysisManager

#: A function given by its op or its symbol name.
FuncRef = Union[str, Any]

#: Decides whether an edge counts (``inline`` ignores calls to ``noinline`` functions).
EdgeFilter = Callable[["CallEdge"], bool]


@dataclass(frozen=True, eq=False)
class CallEdge:
    """One ``func.call`` op: ``caller`` (the function containing it) calls ``callee``."""

    caller: Any
    callee: Any
    call: Any

    @property
    def location(self) -> Any:
        return self.call.location


class CallGraph(Analysis):
    """Functions and the calls between them, for a ``builtin.module``.

    A call to a symbol that is not a function of the module is invalid IR and raises
    :class:`~polytile.errors.VerificationError` naming the call and its location.
    """

    def __init__(self, op: Any, analyses: AnalysisManager | None = None):
        super().__init__(op, analyses)  # type: ignore[arg-type]
        self._functions: dict[str, Any] = {}
        for func in _module_functions(op):
            name = func.attributes.get("sym_name")
            if name in self._functions:
                raise VerificationError(f"redefines symbol '@{name}'", func.name, func.location)
            self._functions[name] = func
        self._out: dict[str, list[CallEdge]] = {name: [] for name in self._functions}
        self._in: dict[str, list[CallEdge]] = {name: [] for name in self._functions}
        self.edges: list[CallEdge] = []
        for name, func in self._functions.items():
            for inner in func.walk():
                if inner.name != "func.call":
                    continue
                callee = self._resolve(inner)
                edge = CallEdge(func, callee, inner)
                self.edges.append(edge)
                self._out[name].append(edge)
                self._in[callee.attributes["sym_name"]].append(edge)
        self._reachable: set[str] | None = None

    def _resolve(self, call: Any) -> Any:
        ref = call.attributes.get("callee")
        target_name = getattr(ref, "name", None)
        if target_name is None:
            raise VerificationError("has no 'callee' symbol to call", call.name, call.location)
        target = self._functions.get(target_name)
        if target is None:
            other = _lookup_symbol(self.op, target_name)
            what = f"a '{other.name}', not a function" if other is not None else "not defined in this module"
            raise VerificationError(f"calls '@{target_name}', which is {what}", call.name, call.location)
        return target

    # -- nodes ------------------------------------------------------------------------
    @property
    def functions(self) -> list[Any]:
        """Every function, in module order."""
        return list(self._functions.values())

    def function(self, func: FuncRef) -> Any:
        """The ``func.func`` op named ``func``; VerificationError when there is none."""
        return self._functions[self._name(func)]

    def _name(self, func: FuncRef) -> str:
        name = func if isinstance(func, str) else func.attributes.get("sym_name")
        if name not in self._functions:
            raise VerificationError(f"no function '@{name}' in this module")
        return name

    def __contains__(self, func: FuncRef) -> bool:
        name = func if isinstance(func, str) else getattr(func, "attributes", {}).get("sym_name")
        return name in self._functions and (isinstance(func, str) or self._functions[name] is func)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self._functions)

    # -- edges ------------------------------------------------------------------------
    def calls_in(self, func: FuncRef) -> list[CallEdge]:
        """The calls that ``func`` makes, in program order."""
        return list(self._out[self._name(func)])

    def call_sites(self, func: FuncRef) -> list[Any]:
        """The ``func.call`` ops that call ``func``, wherever they are."""
        return [edge.call for edge in self._in[self._name(func)]]

    def callees(self, func: FuncRef) -> list[Any]:
        """The functions ``func`` calls, each once, in order of first call."""
        return _unique(edge.callee for edge in self._out[self._name(func)])

    def callers(self, func: FuncRef) -> list[Any]:
        """The functions that call ``func``, each once, in module order of the callers."""
        callers = {id(edge.caller) for edge in self._in[self._name(func)]}
        return [f for f in self._functions.values() if id(f) in callers]

    def calls_between(self, caller: FuncRef, callee: FuncRef) -> list[Any]:
        """The ``func.call`` ops in ``caller`` that call ``callee``."""
        target = self._name(callee)
        return [e.call for e in self._out[self._name(caller)] if e.callee.attributes["sym_name"] == target]

    def _successors(self, name: str, follow: EdgeFilter | None) -> list[str]:
        names = (e.callee.attributes["sym_name"] for e in self._out[name] if follow is None or follow(e))
        return _unique(names)

    # -- orders and cycles ------------------------------------------------------------
    def bottom_up(self, follow: EdgeFilter | None = None) -> list[Any]:
        """Every function, callees before their callers.

        Functions of one recursion cycle come out together, in an unspecified but stable
        order.  ``follow`` restricts the edges that constrain the order.
        """
        return [self._functions[name] for component in self._components(follow) for name in component]

    def find_cycle(self, follow: EdgeFilter | None = None) -> list[str] | None:
        """Names of the functions on a recursion cycle, or None.

        ``["a", "b"]`` means ``a`` calls ``b`` and ``b`` calls ``a``; ``["f"]`` is a function
        that calls itself.  Only edges accepted by ``follow`` count.
        """
        for component in self._components(follow):
            if len(component) > 1:
                return self._cycle_within(set(component), component[0], follow)
            name = component[0]
            if name in self._successors(name, follow):
                return [name]
        return None

    def _cycle_within(self, members: set[str], start: str, follow: EdgeFilter | None) -> list[str]:
        # Inside a strongly connected component every node reaches ``start``; a
        # breadth-first search from it finds a shortest way back, which reads best.
        parents: dict[str, str] = {}
        frontier = [start]
        while frontier:
            following = []
            for name in frontier:
                for succ in self._successors(name, follow):
                    if succ not in members:
                        continue
                    if succ == start:
                        path = [name]
                        while path[-1] != start:
                            path.append(parents[path[-1]])
                        return path[::-1]
                    if succ not in parents:
                        parents[succ] = name
                        following.append(succ)
            frontier = following
        raise AssertionError("a strongly connected component without a cycle")

    def _components(self, follow: EdgeFilter | None) -> list[list[str]]:
        """Strongly connected components, callees' components first (Tarjan's order),
        each component in module order.  Iterative: deep call chains must not hit
        Python's recursion limit."""
        order = {name: i for i, name in enumerate(self._functions)}
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        components: list[list[str]] = []
        counter = 0
        for root in self._functions:
            if root in index:
                continue
            work = [(root, iter(self._successors(root, follow)))]
            index[root] = low[root] = counter
            counter += 1
            stack.append(root)
            on_stack.add(root)
            while work:
                node, successors = work[-1]
                advanced = False
                for succ in successors:
                    if succ not in index:
                        index[succ] = low[succ] = counter
                        counter += 1
                        stack.append(succ)
                        on_stack.add(succ)
                        work.append((succ, iter(self._successors(succ, follow))))
                        advanced = True
                        break
                    if succ in on_stack:
                        low[node] = min(low[node], index[succ])
                if advanced:
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        name = stack.pop()
                        on_stack.discard(name)
                        component.append(name)
                        if name == node:
                            break
                    components.append(sorted(component, key=order.__getitem__))
        return components

    # -- reachability -----------------------------------------------------------------
    @property
    def kernels(self) -> list[Any]:
        """The entry points: functions with ``kernel = true``."""
        return [f for f in self._functions.values() if f.attributes.get("kernel") is True]

    def reachable_from(self, roots: Iterable[FuncRef], follow: EdgeFilter | None = None) -> list[Any]:
        """``roots`` and every function they call, directly or not, in module order."""
        seen: set[str] = set()
        frontier = [self._name(r) for r in roots]
        while frontier:
            name = frontier.pop()
            if name in seen:
                continue
            seen.add(name)
            frontier.extend(self._successors(name, follow))
        return [f for n, f in self._functions.items() if n in seen]

    def is_reachable_from_kernels(self, func: FuncRef) -> bool:
        """Whether a kernel is, or calls (through any chain), ``func``."""
        if self._reachable is None:
            self._reachable = {f.attributes["sym_name"] for f in self.reachable_from(self.kernels)}
        return self._name(func) in self._reachable


def _module_functions(module: Any) -> list[Any]:
    functions = getattr(module, "functions", None)
    if callable(functions):
        return list(functions())
    return [op for region in module.regions for block in region.blocks for op in block if op.name == "func.func"]


def _lookup_symbol(module: Any, name: str) -> Any | None:
    for region in module.regions:
        for block in region.blocks:
            for op in block:
                if op.attributes.get("sym_name") == name:
                    return op
    return None


def _unique(items: Iterable[Any]) -> list[Any]:
    seen: set[int] = set()
    out = []
    for item in items:
        key = item if isinstance(item, str) else id(item)  # ops compare by identity
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out
