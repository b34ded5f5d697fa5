"""The local benchmark: workloads, the load generator and runner, its figures and chart,
the router and real-engine comparisons."""
