"""How wide a network block may be before it counts as "the internet": one rule for the
program's pre-checks and the policy pack, so a stack the program accepts is one the pack
accepts, and the label by which a stack that means to open its control plane says so."""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Network

# A /8 is already sixteen million addresses; anything wider is treated as everyone.
SMALLEST_AUTHORIZED_PREFIX = 8
# Set on the GKE cluster's resource labels when the stack sets allow_public_control_plane, so
# the pack sees the stack's explicit choice on the resource it judges.
PUBLIC_CONTROL_PLANE_LABEL = "servestack-public-control-plane"
PUBLIC_CONTROL_PLANE_ALLOWED = "allowed"


def too_wide(
    blocks: Iterable[IPv4Network], smallest_prefix: int = SMALLEST_AUTHORIZED_PREFIX
) -> list[IPv4Network]:
    """The blocks wider than a /`smallest_prefix`, widest first."""
    return sorted(
        (block for block in blocks if block.prefixlen < smallest_prefix),
        key=lambda block: block.prefixlen,
    )
