"""The local CPU data plane: a model's compiled Serve application on a laptop-sized Ray.

Everything on the Ray Serve side runs for real (HAProxy ingress, direct streaming, the request
router, the OpenAI API); only the engine is a simulation (`serving.local.engine`), selected the
way Ray Serve LLM allows, with RAYLLM_VLLM_ENGINE_CLS.

- `simulation`: the simulated engine's model of tokens, prefix cache and timing (no Ray imports);
- `app`: the compiled application and cluster environment, changed only where the CPU demands it;
- `engine`: the simulated engine, a subclass of Ray Serve LLM's LLMEngine;
- `runtime`: start a local Ray, deploy, wait for the endpoint, shut down;
- `bench`: the load generator and the side-by-side benchmark.
"""
