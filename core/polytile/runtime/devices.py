"""What the device a kernel will run on offers: ``polytile.device_properties()``.

Persistent kernels launch one program per SM, and Triton users read the count from
``torch.cuda.get_device_properties(0).multi_processor_count`` (which works with polytile
too) or ``triton.runtime.driver.active.utils.get_device_properties(0)``.  polytile's own::

    import polytile as pt

    sms = pt.device_properties()["multiprocessor_count"]
    persistent_matmul[(min(sms, tiles),)](...)

The device is one of the chosen target's backend (``target=``, the ``target`` setting,
else the first active device, as for a launch), so a program that runs on the
interpreter gets the CPU's core count and keeps working.  A target whose backend
compiles but cannot launch has no device: its properties are an error, where a launch
without ``target=`` would fall back to the interpreter.
"""

from __future__ import annotations

from typing import Any

from ..errors import LaunchError

#: Keys every backend's properties have (docs/runtime.md lists the others).
COMMON_KEYS = ("name", "target", "index", "multiprocessor_count", "warp_size", "shared_memory_per_block")


def device_properties(device: int = 0, *, target: Any = None) -> dict[str, Any]:
    """The properties of device ``device`` of the chosen target's backend: ``name``,
    ``target`` (``"nvidia:sm_90a"``), ``index``, ``multiprocessor_count`` (SMs; AMD:
    compute units; the interpreter: CPU cores), ``warp_size`` and
    ``shared_memory_per_block`` (bytes a block may use), and what the backend adds
    (``compute_capability`` on NVIDIA, ``gcn_arch_name`` on AMD).  Raises
    :class:`~polytile.errors.LaunchError` when there is no such device."""
    from ..plugins.manager import get_plugin_manager

    manager = get_plugin_manager()
    choice = manager.choose_target(target)
    backend, resolved = manager.backends.resolve(choice.target)
    devices = [d for d in manager.backends.probe(backend.name).devices if d.target.backend == resolved.backend]
    host = backend.host_device()
    if not devices and host is not None:
        devices = [host]
    if not 0 <= device < len(devices):
        have = f"devices 0-{len(devices) - 1}" if devices else "no device"
        raise LaunchError(f"device_properties({device}): the target {resolved} (from {choice.reason}) has {have}")
    found = devices[device]
    properties = {"name": found.name, "target": str(found.target), "index": found.index, **found.properties}
    missing = [key for key in COMMON_KEYS if key not in properties]
    if missing:
        raise LaunchError(f"device_properties({device}): backend '{backend.name}' does not report "
                          f"{', '.join(missing)} for {found.name}")
    return properties


__all__ = ["device_properties"]
