"""polytile-lds: LDS sizing and occupancy for the AMD backend of polytile."""

from .occupancy import Occupancy, occupancy
from .passes import REMEDIES, LdsFit, LdsVerify, register_remedy

__version__ = "0.1.0"

__all__ = ["LdsFit", "LdsVerify", "Occupancy", "REMEDIES", "occupancy", "register_remedy"]
