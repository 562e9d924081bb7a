"""The settings of polytile-warpspec (declared through ``polytile_register_settings``)."""

from polytile.config import BOOL, INT, InvalidValue, Setting


def _registers(value: int) -> None:
    if value and (not 24 <= value <= 256 or value % 8):
        raise InvalidValue(f"{value} is not allowed; a warp group's registers per thread are a multiple of 8 from 24 "
                           "to 256 (0: the default)")


SETTINGS = (
    Setting(
        "warpspec_pingpong", BOOL, False, ("POLYTILE_WARPSPEC_PINGPONG",),
        recompiles=True,
        doc="Whether two or more consumer warp groups of a warp-specialized loop take turns issuing their dots where "
        "the loop has work between them (FlashAttention-3's ping-pong). Off by default: on an H100 it did not speed "
        "up attention (docs/warpspec.md).",
    ),
    Setting(
        "warpspec_overlap", BOOL, True, ("POLYTILE_WARPSPEC_OVERLAP",),
        recompiles=True,
        doc="Whether a warp-specialized loop with two dots runs its second dot one iteration behind, during the work "
        "between them (FlashAttention-3's intra-warpgroup overlap: attention's softmax beside the previous p @ v), "
        "where the one more tile of shared memory and the registers it takes fit (docs/warpspec.md). "
        "pl.WarpSpecialize(overlap=...) decides for one loop.",
    ),
    Setting(
        "warpspec_producer_registers", INT, 40, ("POLYTILE_WARPSPEC_PRODUCER_REGISTERS",), validator=_registers,
        recompiles=True,
        doc="Registers per thread the producer warp group of a warp-specialized loop keeps (setmaxnreg.dec); it "
        "only issues copies, so it gives the rest to the consumers. A multiple of 8 from 24 to 256.",
    ),
    Setting(
        "warpspec_consumer_registers", INT, 0, ("POLYTILE_WARPSPEC_CONSUMER_REGISTERS",), validator=_registers,
        recompiles=True,
        doc="Registers per thread the consumer warps of a warp-specialized loop take (setmaxnreg.inc); 0: as many as "
        "the register file leaves beside the producer's, at most 240. A multiple of 8 from 24 to 256.",
    ),
)
