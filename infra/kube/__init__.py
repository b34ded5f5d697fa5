"""The Pulumi-free Kubernetes layer: each model's objects as plain-dict manifests."""
