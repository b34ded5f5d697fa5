"""The engines a local run serves with: the simulated engine (`simulated`, `simulation`,
`metrics`) and the tiny models the real vLLM CPU build loads (`tiny_models`)."""
