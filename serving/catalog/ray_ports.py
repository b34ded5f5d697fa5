"""Ray's ports in a servestack cluster, in one place: the head pod's container ports, the
NetworkPolicies that open them to the cluster's own pods, the `ray start` flags that pin the ones
Ray would pick at random, and the policy pack's check that no control port is open to others.

Facts this rests on (read from Ray 2.56 and KubeRay 1.7 source): Ray picks most ports at random
unless `ray start` is told otherwise, so the node manager, object manager, dashboard agent gRPC
and runtime-env agent ports are pinned here; workers bind 10002-19999; Serve's direct ingress
binds 30000-31000 (HTTP) and 40000-41000 (gRPC); KubeRay sets the metrics port to 8080. NCCL,
Gloo and UCX (NIXL) connect on the kernel's ephemeral range, which no setting narrows; vLLM's
data-parallel groups meet on 29500-29550 and NIXL's side channel on 5600.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RayPort:
    name: str
    port: int
    end_port: int | None = None
    start_param: str | None = None  # the `ray start` flag that pins it, where Ray would pick


# Ray Serve's HTTP proxy (and its HAProxy ingress) on every node: what the edge routes to.
SERVE_PORT = 8000

GCS = RayPort("gcs-server", 6379)
DASHBOARD = RayPort("dashboard", 8265)
# The Ray client server on the head: a client connected here runs code on the cluster.
CLIENT = RayPort("client", 10001)
METRICS = RayPort("metrics", 8080, start_param="metrics-export-port")
# Ray Serve's HAProxy serves HAProxy's Prometheus exporter here (RAY_SERVE_HAPROXY_METRICS_PORT).
SERVE_HAPROXY_METRICS = RayPort("serve-haproxy-metrics", 9101)
SERVE = RayPort("serve", SERVE_PORT)
WORKERS = RayPort("workers", 10002, 19999)

# What the head pod declares as its container ports.
HEAD_PORTS = (GCS, DASHBOARD, CLIENT, SERVE)

# What a cluster's own pods may reach on each other (the client port is not among them).
CLUSTER_PORTS = (
    GCS,
    RayPort("node-manager", 6380, start_param="node-manager-port"),
    RayPort("object-manager", 6381, start_param="object-manager-port"),
    RayPort("dashboard-agent-grpc", 6382, start_param="dashboard-agent-grpc-port"),
    RayPort("runtime-env-agent", 6383, start_param="runtime-env-agent-port"),
    DASHBOARD,
    RayPort("dashboard-agent", 52365, start_param="dashboard-agent-listen-port"),
    METRICS,
    SERVE,
    RayPort("serve-fallback-proxy", 8500),
    RayPort("nixl-side-channel", 5600),
    # vLLM's data-parallel master (29500), torch.distributed (29501) and DP RPC (29550) ports.
    RayPort("vllm-data-parallel", 29500, 29550),
    WORKERS,
    RayPort("serve-direct-ingress-http", 30000, 31000),
    # NCCL, Gloo, UCX and Serve's direct-ingress gRPC (40000-41000) all fall in here.
    RayPort("ephemeral", 32768, 60999),
)

# The ports that run a cluster, by what a policy message calls them: a job submitted to the
# dashboard or a client on the client port runs code on the GPU workers; GCS holds the state.
CONTROL_PORTS = {"GCS": GCS, "dashboard": DASHBOARD, "Ray client": CLIENT}
