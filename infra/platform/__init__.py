"""The GKE platform a stack needs: its schema and loading, the platform plan, pools, fits,
resilience and monitoring, derived and checked before any resource is registered."""
