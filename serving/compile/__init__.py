"""One planned spec compiled into what Ray Serve LLM 2.56 and KubeRay run: the entry
(`compiler`), the serving patterns with Ray's builders (`patterns/`), one LLMConfig per replica
group (`llm_config`, with `engine` arguments, `weights` and `autoscaling`), the fast-path
`environment`, the worker pods (`workers`), the router table and the scheduling contract with
the node pools."""
