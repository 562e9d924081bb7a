"""The occupancy estimate the plugin records (``lds`` artifact): the AMD backend's
(:mod:`polytile_amd.occupancy`), which its ``resources`` record uses too, so that the two
never disagree."""

from polytile_amd.occupancy import COMPUTE_UNITS, ComputeUnit, Occupancy, occupancy

__all__ = ["COMPUTE_UNITS", "ComputeUnit", "Occupancy", "occupancy"]
