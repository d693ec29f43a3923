"""A `pynvml` stand-in for tests without a GPU: one card drawing a constant `FAKE_NVML_WATTS` (default 300 W).

Its energy counter is that power times the seconds since the module loaded, as a real card's counter (mJ) grows."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

WATTS = float(os.environ.get("FAKE_NVML_WATTS", "300"))
_T0 = time.time() - 1000.0  # the driver loaded a while ago


class NVMLError(Exception):
    pass


def nvmlInit() -> None:
    if os.environ.get("FAKE_NVML_FAIL"):
        raise NVMLError("Driver Not Loaded")


def nvmlShutdown() -> None:
    pass


def nvmlDeviceGetCount() -> int:
    return 1


def nvmlDeviceGetHandleByIndex(i: int) -> int:
    return i


def nvmlDeviceGetPowerUsage(h: int) -> int:
    return int(WATTS * 1000)


def nvmlDeviceGetTotalEnergyConsumption(h: int) -> int:
    return int((time.time() - _T0) * WATTS * 1000)


def nvmlDeviceGetUtilizationRates(h: int) -> SimpleNamespace:
    return SimpleNamespace(gpu=87, memory=40)


def nvmlDeviceGetMemoryInfo(h: int) -> SimpleNamespace:
    return SimpleNamespace(used=20 * 2**30, total=141 * 2**30, free=121 * 2**30)


def nvmlDeviceGetName(h: int) -> str:
    return "NVIDIA H200 (fake)"
