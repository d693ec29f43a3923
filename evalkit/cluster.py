"""Ray, imported only where a command was given `--ray` (`sweep --ray`, `load --ray`): without it installed, one line
naming the extra that brings it."""

from __future__ import annotations

from typing import Any

from evalkit.errors import UsageError


def import_ray() -> Any:
    """The `ray` module, or one line naming the extra that brings it."""
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray: pip install 'evalkit[cluster]'") from None
    return ray


def connect(ray: Any, address: str) -> None:
    """Join the cluster at `address` (`auto`: the local one), or one line saying none answered."""
    try:
        ray.init(address=address, log_to_driver=True, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise UsageError(f"--ray {address}: no Ray cluster answered ({str(e).splitlines()[0]})") from None
