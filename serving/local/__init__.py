"""The local CPU data plane: a model's compiled Serve application on a laptop-sized Ray.

Everything on the Ray Serve side runs for real (HAProxy ingress, direct streaming, the request
router, the OpenAI API); only the engine is a simulation (`serving.local.engine.simulated`),
selected the way Ray Serve LLM allows, with RAYLLM_VLLM_ENGINE_CLS.

- `runtime/`: the compiled application made runnable on a CPU, a local Ray started, deployed,
  watched and shut down, and everything it leaves behind removed;
- `engine/`: the simulated engine (a subclass of Ray Serve LLM's LLMEngine), its model of
  tokens, prefix cache and timing, and the tiny models vLLM's CPU build serves;
- `bench/`: the workloads, the load generator and the side-by-side benchmarks;
- `faults/`: fault runs against real Ray Serve and its HAProxy.
"""
