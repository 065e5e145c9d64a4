"""Logical devices: the harness's ``logical_devices`` switch (inside the user's process)."""

from __future__ import annotations

from typing import Any


def configure_logical_devices(tf: Any, n: int) -> str:
    """Before the script touches a device: make ``n`` replicas' worth of devices visible.

    With GPUs, the first ``n`` physical GPUs stay visible (the rest are hidden); without GPUs, the CPU
    is split into ``n`` logical devices, so that ``MirroredStrategy`` can run ``n`` replicas on it.
    Returns what was done, for the run's facts.
    """
    if n < 1:
        raise ValueError(f"logical devices: need at least 1 (got {n})")
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        if n > len(gpus):
            return f"{n} replicas asked, {len(gpus)} GPUs present: all kept"
        tf.config.set_visible_devices(gpus[:n], "GPU")
        return f"{n} of {len(gpus)} GPUs visible"
    cpus = tf.config.list_physical_devices("CPU")
    if n > 1:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
        )
    return f"CPU split into {n} logical device(s)"
