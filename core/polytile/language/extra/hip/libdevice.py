"""Triton's ``tl.extra.hip.libdevice``: the functions of :mod:`polytile.language.extra.libdevice`."""

from ..libdevice import *  # noqa: F401,F403
from ..libdevice import __all__  # noqa: F401
