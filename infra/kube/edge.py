"""The cluster edge as plain manifests: each model's route (TLS redirect, API-key gate, rate
limit, timeouts) and the values of the HAProxy ingress controller's chart.

The API-key gate is a backend snippet that compares the SHA-256 of a `Bearer` key with the
hashes the controller writes from its pattern-file ConfigMap. The controller ignores flags it
does not know and drops a snippet HAProxy refuses (a missing pattern file is one), so a gate
that is subtly wrong fails OPEN: `tests/infra/kube/test_edge_gate.py` runs it in a real HAProxy and
the edge policies judge the snippet, the controller's arguments and the ConfigMap together.
"""

from __future__ import annotations

import hashlib
from typing import Any

from infra.kube.namespaces import EDGE_NAMESPACE, SERVING_NAMESPACE
from serving.catalog.pins import EDGE_CHART
from serving.catalog.ray_ports import SERVE_PORT
from serving.compile.scheduling import POOL_LABEL, SYSTEM_POOL
from serving.spec import names
from serving.spec.profile import ModelSpec

INGRESS_CLASS = "haproxy"
EDGE_TLS_SECRET = "edge-tls"
API_KEYS_CONFIGMAP = "edge-api-keys"
API_KEYS_PATTERN = "api-keys"
# The controller writes each key of its pattern-file ConfigMap to `patterns/<key>` beside its
# haproxy.cfg (which sets `default-path config`), so the snippet names it relatively.
PATTERN_DIR = "patterns"
PATTERN_FILES_FLAG = "--configmap-patternfiles"

# Clients send `Authorization: Bearer <key>`. The request passes only with exactly one such
# header, the scheme `Bearer` in any case (RFC 9110 makes schemes case-insensitive), exactly
# one token after it, and that token's SHA-256 among the stored hashes: no key is stored in
# clear, not even in the cluster. The key is then removed, so Ray never sees it.
API_KEY_GATE = (
    "http-request deny deny_status 401 unless"
    " { req.fhdr_cnt(authorization) eq 1 }"
    " { req.fhdr(authorization),word(1,' '),lower -m str bearer }"
    " !{ req.fhdr(authorization),word(3,' ') -m found }"
    " { req.fhdr(authorization),word(2,' '),digest(sha256),hex,lower"
    f" -m str -f {PATTERN_DIR}/{API_KEYS_PATTERN} }}\n"
    "http-request del-header authorization\n"
)
# The HAProxy stats page (no authentication) and the controller's own metrics stay off the load
# balancer; HAProxy's metrics are scraped inside the cluster from the pods' stat port.
STATS_PORT_NAME = "stat"
METRICS_PATH = "/metrics"


def api_key_hashes(keys: list[str]) -> str:
    """The pattern file the edge matches bearer keys against: one lower-case SHA-256 per line.
    An empty key would match an empty bearer, so it is refused."""
    if any(not key.strip() for key in keys):
        raise ValueError("servestack:api_keys holds an empty key; every key must be non-empty")
    return "".join(f"{hashlib.sha256(key.encode()).hexdigest()}\n" for key in keys)


def model_path(spec: ModelSpec) -> str:
    """Where the model answers at the edge: `https://<edge>/<model>/v1/chat/completions`."""
    return f"/{spec.name}/"


def model_ingress(
    spec: ModelSpec, *, host: str | None, requests_per_second: int, stream_timeout_s: int
) -> dict[str, Any]:
    """The model's route through the edge: TLS, API key, a per-client rate limit, timeouts long
    enough for a streamed answer, and the path prefix stripped before Ray Serve sees it."""
    rule: dict[str, Any] = {
        "http": {
            "paths": [
                {
                    "path": model_path(spec),
                    "pathType": "Prefix",
                    "backend": {
                        "service": {
                            "name": names.serve_service_name(spec.name),
                            "port": {"number": SERVE_PORT},
                        }
                    },
                }
            ]
        }
    }
    if host:
        rule["host"] = host
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": names.kubernetes_name(spec.name),
            "namespace": SERVING_NAMESPACE,
            "annotations": {
                "haproxy.org/ssl-redirect": "true",
                "haproxy.org/path-rewrite": f"{model_path(spec)}(.*) /\\1",
                "haproxy.org/rate-limit-requests": str(requests_per_second),
                "haproxy.org/rate-limit-period": "1s",
                "haproxy.org/rate-limit-status-code": "429",
                "haproxy.org/timeout-server": f"{stream_timeout_s}s",
                "haproxy.org/backend-config-snippet": API_KEY_GATE,
            },
        },
        "spec": {"ingressClassName": INGRESS_CLASS, "rules": [rule]},
    }


# The chart's own default request for the controller.
EDGE_RESOURCES = {"cpu": "250m", "memory": "400Mi"}


def edge_values(
    *, replicas: int, internal: bool, source_ranges: list[str], stream_timeout_s: int
) -> dict[str, Any]:
    """Values for the haproxytech `kubernetes-ingress` chart."""
    service: dict[str, Any] = {
        "type": "LoadBalancer",
        "loadBalancerSourceRanges": source_ranges,
        # Only traffic ports on the load balancer: the stats page and the controller's metrics
        # answer anyone who reaches them.
        "enablePorts": {"http": True, "https": True, "quic": True, "stat": False,
                        "prometheus": False},
    }  # fmt: skip
    if internal:
        service["annotations"] = {"networking.gke.io/load-balancer-type": "Internal"}
    return {
        "controller": {
            "kind": "Deployment",
            "replicaCount": replicas,
            "nodeSelector": {POOL_LABEL: SYSTEM_POOL},
            # Requests only, so HAProxy is never CPU-throttled; written out so the fit checks
            # see what is deployed.
            "resources": {"requests": dict(EDGE_RESOURCES)},
            "PodDisruptionBudget": {"enable": True, "minAvailable": 1},
            # One replica per node, so a node upgrade never takes the whole edge down.
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"app.kubernetes.io/name": EDGE_CHART.name}},
                }
            ],
            "ingressClass": INGRESS_CLASS,
            "ingressClassResource": {"name": INGRESS_CLASS},
            "defaultTLSSecret": {
                "enabled": True,
                "secretNamespace": EDGE_NAMESPACE,
                "secret": EDGE_TLS_SECRET,
            },
            "extraArgs": [f"{PATTERN_FILES_FLAG}={EDGE_NAMESPACE}/{API_KEYS_CONFIGMAP}"],
            "config": {
                "ssl-redirect": "true",
                # A streamed answer can run for minutes between the first and last token.
                "timeout-client": f"{stream_timeout_s}s",
                "timeout-server": f"{stream_timeout_s}s",
                "timeout-http-request": "30s",
            },
            "service": service,
        }
    }


def edge_pod_monitoring() -> dict[str, Any]:
    """Google Cloud Managed Service for Prometheus scrapes HAProxy's metrics from each edge pod's
    stat port, inside the cluster."""
    return {
        "apiVersion": "monitoring.googleapis.com/v1",
        "kind": "PodMonitoring",
        "metadata": {"name": "edge-haproxy", "namespace": EDGE_NAMESPACE},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": EDGE_CHART.name}},
            "endpoints": [{"port": STATS_PORT_NAME, "path": METRICS_PATH, "interval": "30s"}],
        },
    }
