"""polytile-amd: the AMD GPU backend of polytile."""

from .architectures import ARCHITECTURES, AmdArchitecture
from .backend import AmdBackend, AmdOptions

__version__ = "0.1.0"

__all__ = ["ARCHITECTURES", "AmdArchitecture", "AmdBackend", "AmdOptions"]
