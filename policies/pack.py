"""The servestack policy pack's contents: every policy, by area. `__main__.py` assembles them
into the PolicyPack Pulumi runs; the offline preview runs the same list."""

from __future__ import annotations

from pulumi_policy import Policy

from policies.edge import EDGE_POLICIES
from policies.faults import FAULT_POLICIES
from policies.lora import LORA_POLICIES
from policies.node_pools import NODE_POOL_POLICIES
from policies.objects import OBJECT_POLICIES
from policies.platform import PLATFORM_POLICIES
from policies.ray_security import RAY_SECURITY_POLICIES
from policies.serve import SERVING_POLICIES
from policies.topology import TOPOLOGY_POLICIES

PACK_NAME = "servestack-llm-serving"
POLICIES: list[Policy] = [
    *TOPOLOGY_POLICIES,
    *SERVING_POLICIES,
    *LORA_POLICIES,
    *PLATFORM_POLICIES,
    *OBJECT_POLICIES,
    *EDGE_POLICIES,
    *RAY_SECURITY_POLICIES,
    *FAULT_POLICIES,
    *NODE_POOL_POLICIES,
]
