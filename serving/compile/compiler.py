"""The compiler: one planned model spec into what Ray Serve LLM 2.56 and KubeRay run.

`compile(spec, plan)` returns a `CompiledModel`, the one object every later stage reads:
- `serve_config`: the `serveConfigV2` document, one application built by the one serving
  pattern (`serving.compile.patterns`) that serves the spec, with Ray's public builder; each of
  its LLMConfigs (`serving.compile.llm_config`: engine arguments from `serving.compile.engine`,
  weights from `serving.compile.weights`, LoRA adapters from `serving.compile.lora`, knobs from
  `serving.compile.autoscaling`) describes one replica group of the plan. The only code of ours
  the cluster runs is servestack's request router, where the profile names it
  (`serving.compile.routers`);
- `cluster_env`: the fast-path variables for the Ray head and every worker container
  (`serving.compile.environment`);
- `worker_shapes`: the GPU worker pods one model needs, per machine type
  (`serving.compile.workers`).

Machine, placement and replica groups come from the plan, never worked out again; infra turns
the result into Kubernetes objects and policies judge those objects with the planner's rules.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from serving.compile.environment import cluster_env
from serving.compile.patterns import llm_configs_of, pattern_for
from serving.compile.workers import WorkerShape, worker_shapes
from serving.frozen import Frozen
from serving.plan.planner import Plan
from serving.plan.replicas import Role
from serving.spec.profile import ModelSpec

# The annotation carrying the model profile a RayService was compiled from: policies rebuild the
# spec from it and overlay the layout the resource actually deploys.
PROFILE_ANNOTATION = "servestack.io/profile"


def application(
    spec: ModelSpec, model_plan: Plan, *, graceful_shutdown_s: int | None = None
) -> dict[str, Any]:
    """One Serve application: direct streaming serves exactly one model per application.
    `graceful_shutdown_s`: see `serving.compile.llm_config.deployment_config`."""
    pattern = pattern_for(spec)
    return {
        "name": spec.name,
        "route_prefix": "/",
        "import_path": pattern.import_path,
        "args": pattern.builder_args(spec, model_plan, graceful_shutdown_s),
    }


def serve_config(
    spec: ModelSpec, model_plan: Plan, *, graceful_shutdown_s: int | None = None
) -> dict[str, Any]:
    """The RayService's `serveConfigV2`: one model, one application (ray.serve.schema's
    ServeDeploySchema)."""
    return {
        "applications": [application(spec, model_plan, graceful_shutdown_s=graceful_shutdown_s)]
    }


class CompiledModel(Frozen):
    """What one planned spec compiles to: the stage every later one (manifests, render, the
    Pulumi components, the local data plane) reads instead of planning or compiling again."""

    spec: ModelSpec
    plan: Plan
    serve_config: dict[str, Any] = Field(description="The RayService's serveConfigV2.")
    cluster_env: dict[str, str] = Field(description="Environment of the head and every worker.")
    worker_shapes: list[WorkerShape]

    @property
    def application(self) -> dict[str, Any]:
        """The one Serve application of `serve_config`."""
        app: dict[str, Any] = self.serve_config["applications"][0]
        return app

    def llm_config(self, role: Role = "server") -> dict[str, Any]:
        """The LLMConfig of one replica group."""
        configs = llm_configs_of(self.application["args"])
        return next(config for found, config in configs if found == role)

    @property
    def machine_types(self) -> list[str]:
        """The machine types the worker pods run on."""
        return [shape.machine_type for shape in self.worker_shapes]


def compile(
    spec: ModelSpec, model_plan: Plan, *, graceful_shutdown_s: int | None = None
) -> CompiledModel:
    """Compile a spec with its plan. `graceful_shutdown_s`: how long a stopping replica may
    finish its requests (`serving.compile.llm_config.deployment_config`)."""
    return CompiledModel(
        spec=spec,
        plan=model_plan,
        serve_config=serve_config(spec, model_plan, graceful_shutdown_s=graceful_shutdown_s),
        cluster_env=cluster_env(spec),
        worker_shapes=worker_shapes(spec, model_plan),
    )
