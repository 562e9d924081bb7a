"""polytile-nvidia: the NVIDIA GPU backend of polytile."""

from .architectures import ARCHITECTURES, NvidiaArchitecture
from .backend import NvidiaBackend, NvidiaOptions

__version__ = "0.1.0"

__all__ = ["ARCHITECTURES", "NvidiaArchitecture", "NvidiaBackend", "NvidiaOptions"]
