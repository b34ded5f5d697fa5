"""One planned spec compiled into what Ray Serve LLM 2.56 and KubeRay run: the Serve
application and engine arguments (`compiler`), autoscaling, the router table and the
scheduling contract with the node pools."""
