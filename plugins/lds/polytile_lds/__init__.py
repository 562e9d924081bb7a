"""polytile-lds: LDS sizing and occupancy for the AMD backend of polytile."""

from .occupancy import Occupancy, occupancy
from .passes import LdsFit, LdsVerify
from .remedies import REMEDIES, REMEDY_ORDER, conversions_in_rounds, register_remedy

__version__ = "0.1.0"

__all__ = ["LdsFit", "LdsVerify", "Occupancy", "REMEDIES", "REMEDY_ORDER", "conversions_in_rounds", "occupancy",
           "register_remedy"]
