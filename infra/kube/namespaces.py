"""The cluster's namespaces, named once: NetworkPolicies, Workload Identity members and every
manifest refer to them."""

SERVING_NAMESPACE = "llm"
EDGE_NAMESPACE = "edge"
KUBERAY_NAMESPACE = "kuberay-system"
