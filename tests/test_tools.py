"""``polytile.tools.<name>``: modules plugins provide through the entry point group
``polytile.tools`` (core/polytile/tools)."""

from __future__ import annotations

import importlib
import sys

import pytest


def test_the_tensor_descriptor_path_of_triton_ports_by_changing_the_import():
    pytest.importorskip("polytile_tma", reason="polytile-tma provides polytile.tools.tensor_descriptor")
    from polytile.tools.tensor_descriptor import TensorDescriptor
    from polytile_tma.host import TensorDescriptor as provided

    assert TensorDescriptor is provided


def test_a_tool_no_distribution_provides_is_a_module_not_found_error_naming_who_would(monkeypatch):
    import polytile.tools as tools

    monkeypatch.setattr(tools, "provider", lambda name: None)
    monkeypatch.delitem(sys.modules, "polytile.tools.tensor_descriptor", raising=False)
    with pytest.raises(ModuleNotFoundError, match=r"No module named 'polytile.tools.tensor_descriptor': no "
                                                  r"installed distribution provides it \(it comes with "
                                                  r"'polytile-tma': pip install polytile-tma\)"):
        importlib.import_module("polytile.tools.tensor_descriptor")
    with pytest.raises(ModuleNotFoundError, match="polytile.tools.no_such_tool': no installed distribution"):
        importlib.import_module("polytile.tools.no_such_tool")
    monkeypatch.delitem(sys.modules, "polytile.tools.tensor_descriptor", raising=False)


def test_a_provided_module_is_found_through_the_entry_points(monkeypatch):
    import types

    import polytile.tools as tools

    fake = types.ModuleType("fake_tool_provider")
    fake.Thing = object()
    fake.__all__ = ["Thing"]
    monkeypatch.setitem(sys.modules, "fake_tool_provider", fake)
    monkeypatch.setattr(tools, "provider", lambda name: "fake_tool_provider" if name == "widget" else None)
    monkeypatch.delitem(sys.modules, "polytile.tools.widget", raising=False)
    module = importlib.import_module("polytile.tools.widget")
    assert module.Thing is fake.Thing and module.__all__ == ["Thing"]
    monkeypatch.delitem(sys.modules, "polytile.tools.widget", raising=False)
