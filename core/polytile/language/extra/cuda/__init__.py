"""Triton's ``tl.extra.cuda``: ``libdevice`` (the same functions as ``pl.extra.libdevice``,
which every target lowers) and the names plugins register under ``extra.cuda``."""

from __future__ import annotations

from typing import Any

from ...extensions import namespace_attribute, namespace_names


def __getattr__(name: str) -> Any:
    return namespace_attribute(__name__, "extra.cuda", name)


def __dir__() -> list[str]:
    return sorted({"libdevice", *namespace_names("extra.cuda")})
