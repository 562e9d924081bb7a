"""polytile-tma: tensor descriptors (Triton's ``TensorDescriptor`` and
``tl.make_tensor_descriptor``) as a polytile plugin.

What it adds, all through polytile's public hooks (see ``polytile_tma.plugin``):

* the ``tma`` dialect: the ``!tma.desc<...>`` type and the ops on it (``polytile_tma.ops``);
* the language names ``pl.make_tensor_descriptor`` and the methods of a descriptor
  (``polytile_tma.language``);
* the pass ``lower-tensor-descriptors``, which turns descriptor ops into the core's block
  and pointer ops on every target (``polytile_tma.lowering``);
* host descriptors, ``polytile_tma.host.TensorDescriptor``.

Importing this package imports nothing of polytile's compiler: the hooks import what they
register when polytile first asks for it.
"""

__version__ = "0.1.0"
