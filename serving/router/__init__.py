"""ONLY what runs inside the cluster: servestack's request routers and the server class that
reports its engine's cache. It imports Ray and the standard library alone (import-linter
holds it to that) and ships whole, as a ConfigMap (`infra.kube.router_code`)."""
