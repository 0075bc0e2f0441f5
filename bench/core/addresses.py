"""Network addresses as bench reads them: whether a host is this machine only, and the host of a URI."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Return whether ``host`` is reachable from this machine only (``localhost`` or a loopback IP)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_of(address: str) -> str:
    """Return the host of ``tcp://host:port``, ``host:port`` or ``[v6]:port`` (the address itself if no port)."""
    rest = address.split("://", 1)[-1]
    return rest.rsplit(":", 1)[0].strip("[]") if ":" in rest else rest
