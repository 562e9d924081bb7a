"""Modules that plugins provide under ``polytile.tools`` (Triton's ``triton.tools`` names).

A plugin distribution lists them in the entry point group ``polytile.tools``: the entry
point's name is the submodule (``tensor_descriptor``), its value the module that provides
it (``polytile_tma.host``).  ``import polytile.tools.tensor_descriptor`` then gives a
module with that module's public names, so a Triton program's

    from triton.tools.tensor_descriptor import TensorDescriptor

ports as ``from polytile.tools.tensor_descriptor import TensorDescriptor``.  A name no
installed distribution provides is a ``ModuleNotFoundError`` that names the distribution
that would, when polytile knows of one.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any

#: The entry point group plugins list their tool modules in.
GROUP = "polytile.tools"
#: Tool modules of plugins polytile knows of, with their distribution: only for the error
#: when none is installed (a plugin need not be listed here).
PROVIDED_BY = {"tensor_descriptor": "polytile-tma"}


def provider(name: str) -> str | None:
    """The module an installed distribution provides ``polytile.tools.<name>`` with, or None."""
    from ..plugins import distributions  # the scan plugin discovery reads (importlib.metadata's rules)

    for entry_point in distributions.entry_points(GROUP):
        if entry_point.name == name:
            return entry_point.value.split(":", 1)[0].strip()
    return None


class _PluginTools(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``polytile.tools.<name>`` in the distributions' entry points."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        prefix = __name__ + "."
        if not fullname.startswith(prefix) or "." in fullname[len(prefix):]:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> None:
        return None  # a new module, filled below: the provider's own keeps its identity

    def exec_module(self, module: Any) -> None:
        name = module.__name__.rpartition(".")[2]
        source = provider(name)
        if source is None:
            message = f"No module named '{module.__name__}': no installed distribution provides it"
            if name in PROVIDED_BY:
                message += f" (it comes with '{PROVIDED_BY[name]}': pip install {PROVIDED_BY[name]})"
            raise ModuleNotFoundError(message, name=module.__name__)
        provided = importlib.import_module(source)
        names = getattr(provided, "__all__", None) or [n for n in vars(provided) if not n.startswith("_")]
        module.__dict__.update({n: getattr(provided, n) for n in names})
        module.__all__ = list(names)
        module.__doc__ = provided.__doc__


if not any(isinstance(finder, _PluginTools) for finder in sys.meta_path):
    sys.meta_path.append(_PluginTools())
