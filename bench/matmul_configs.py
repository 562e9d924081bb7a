"""The configs the autotuned matmul rows tune over, for polytile and Triton alike.

The first six fp16 configs of Triton's matmul tutorial for CUDA
(``python/tutorials/03-matrix-multiplication.py``, ``get_cuda_autotune_config``), with
the bench kernel's parameter names.  Each kernel module makes its own ``Config`` objects
from these (``pt.Config`` / ``triton.Config``), so both autotuners get the same list.
"""

#: (meta-parameters, num_warps, num_stages)
AUTOTUNE_CONFIGS = (
    ({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, 8, 3),
    ({"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    ({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    ({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    ({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    ({"BLOCK_M": 128, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
)
