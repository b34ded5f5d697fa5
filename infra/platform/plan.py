"""The GKE platform a stack needs, derived and checked before any resource is registered.

`plan_platform` plans and compiles each model of a stack once (`compile_stack`), has
`infra.platform.pools` sum what the plans ask of each machine type, and turns the stack into one
frozen spec per component (`infra.platform.specs`, `infra.platform.pool_specs`): the network, the
cluster, the system node pool and one GPU node pool per machine type the plans use (or per step
of its capacity chain). The Pulumi components in `infra/deploy/components/` turn specs into
resources and decide nothing; `servestack pools` prints the same specs offline.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from pydantic import Field

from infra.kube.compute_class import ClassStep, compute_class, compute_class_name
from infra.kube.disruption import Resilience
from infra.kube.manifests import compile_for
from infra.kube.model_objects import ModelObjects, StackFacts, build_model_objects
from infra.kube.namespaces import KUBERAY_NAMESPACE
from infra.platform.config import Stack
from infra.platform.fits import PodFit, check_fits, stack_pods
from infra.platform.pool_specs import GpuPoolSpec, SystemPoolSpec
from infra.platform.pools import gpu_demands, gpu_pools_of
from infra.platform.resilience import resilience_for
from infra.platform.specs import ClusterSpec, NetworkSpec
from infra.platform.stack_config import NAMESPACE
from serving.compile.compiler import CompiledModel
from serving.errors import ServestackError
from serving.frozen import Frozen
from serving.plan.planner import Plan, plan
from serving.spec.loading import display_path, validate
from serving.spec.profile import ModelSpec


class PlatformPlan(Frozen):
    """Everything the Pulumi program builds for one stack, before it builds it."""

    stack: str
    node_service_account_id: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
    network: NetworkSpec
    cluster: ClusterSpec
    system_pool: SystemPoolSpec
    gpu_pools: tuple[GpuPoolSpec, ...]
    pods: tuple[PodFit, ...] = Field(
        default=(), description="Every kind of pod and the room a node of its pool has."
    )
    models: dict[str, CompiledModel] = Field(
        default_factory=dict,
        exclude=True,
        description="Each model planned and compiled once, by profile name, for the serving "
        "plane and its dashboards.",
    )
    objects: dict[str, ModelObjects] = Field(
        default_factory=dict,
        exclude=True,
        description="Each model's Kubernetes objects, built and size-checked once, by profile "
        "name: what the serving plane registers.",
    )
    compute_classes: tuple[dict[str, Any], ...] = Field(
        default=(),
        exclude=True,
        description="One GKE ComputeClass per capacity chain, built once: what the serving "
        "plane registers.",
    )


def plan_platform(stack: Stack, *, judge_layouts: bool = True) -> PlatformPlan:
    """The specs for one stack, or a `ServestackError` naming the file, key and fix.

    `pulumi up` refuses a model whose plan cannot work before registering anything
    (`judge_layouts`). `servestack preview` turns that off to register every resource and let
    the policy pack judge the layouts, as `pulumi preview --policy-pack` would, every violation
    at once and by name.
    """
    source = display_path(stack.path)
    config = stack.config
    prefix = f"{NAMESPACE}:"
    project = _required(stack.gcp.project, source, "gcp:project", "your GCP project id")
    region = _required(stack.gcp.region, source, "gcp:region", "a region, e.g. us-central1")
    models = compile_stack(stack)
    demands = gpu_demands(stack, models, judge_layouts)
    objects = {profile: stack_model_objects(stack, profile, m) for profile, m in models.items()}

    network = validate(
        NetworkSpec,
        {"region": region} | config.model_dump(
            include={"subnet_cidr", "pods_cidr", "services_cidr", "control_plane_cidr"}
        ),
        source,
        prefix,
    )  # fmt: skip
    cluster = validate(
        ClusterSpec,
        {"project": project, "region": region} | config.model_dump(
            include=set(ClusterSpec.model_fields) - {"project", "region"}
        ),
        source,
        prefix,
    )  # fmt: skip
    system_pool = validate(
        SystemPoolSpec,
        {
            "machine_type": config.system_machine_type,
            "min_nodes": config.system_min_nodes,
            "max_nodes": config.system_max_nodes,
        },
        source,
        f"{prefix}system_",
    )
    for machine_type in config.gpu_pools.keys() - demands.keys():
        planned = ", ".join(sorted(demands)) or "none"
        raise ServestackError(
            source, f"{prefix}gpu_pools.{machine_type}",
            f"no model of this stack is planned onto {machine_type} (planned: {planned})",
            f"remove the entry, or set machine_type: {machine_type} in a model profile",
        )  # fmt: skip
    gpu_pools = tuple(
        pool
        for machine_type, demand in demands.items()
        for pool in gpu_pools_of(
            machine_type,
            demand,
            config.gpu_pools.get(machine_type),
            cluster,
            source,
            judge_layouts,
        )
    )
    step_machines: dict[str, list[str]] = {}
    for pool in gpu_pools:
        if pool.chain_of is not None:
            step_machines.setdefault(pool.chain_of, []).append(pool.machine_type)
    pods = stack_pods(stack, models, system_pool.machine_type, step_machines)
    if judge_layouts:
        # The preview registers a pod that cannot fit, for the policy pack to name.
        check_fits(stack, pods, system_pool.max_nodes)
    return PlatformPlan(
        stack=stack.name,
        node_service_account_id=node_service_account_id(stack.name),
        network=network,
        cluster=cluster,
        system_pool=system_pool,
        gpu_pools=gpu_pools,
        pods=tuple(pods),
        models=models,
        objects=objects,
        compute_classes=tuple(_compute_classes(gpu_pools)),
    )


def stack_compute_classes(stack: Stack) -> dict[str, str]:
    """The ComputeClass of each machine type the stack gives a capacity chain."""
    return {
        machine_type: compute_class_name(machine_type)
        for machine_type, options in stack.config.gpu_pools.items()
        if options.capacity
    }


def _compute_classes(pools: tuple[GpuPoolSpec, ...]) -> list[dict[str, Any]]:
    steps: dict[str, list[ClassStep]] = {}
    for pool in pools:
        if pool.compute_class is None:
            continue
        steps.setdefault(pool.compute_class, []).append(
            ClassStep(
                machine_type=pool.machine_type,
                mode=pool.mode,
                reservation=pool.reservations[0] if pool.reservations else None,
                reservation_affinity=pool.reservation_affinity,
                max_run_s=pool.max_run_duration_s,
                driver_version=pool.gpu_driver_version,
                reservation_zone=pool.reservation_zone,
            )
        )
    return [compute_class(name, chain) for name, chain in steps.items()]


def stack_resilience(stack: Stack) -> Resilience:
    """The notice, drains and caches of the stack's nodes (without the GCS store's address,
    which only the Pulumi program knows)."""
    config = stack.config
    return resilience_for(
        config.gpu_pools,
        stream_timeout_s=config.stream_timeout_s,
        weights_cache=config.weights_cache,
    )


def compile_model(stack: Stack, spec: ModelSpec, model_plan: Plan) -> CompiledModel:
    """One planned model of the stack, compiled for the stack's nodes."""
    return compile_for(spec, model_plan, stack_resilience(stack))


def compile_stack(stack: Stack) -> dict[str, CompiledModel]:
    """Every model of the stack planned once (at the stack's prices) and compiled once."""
    return {
        profile: compile_model(
            stack, spec, plan(spec, stack.config.prices, calibration=stack.calibration(spec))
        )
        for profile, spec in stack.profiles.items()
    }


def stack_facts(stack: Stack) -> StackFacts:
    """What the stack sets in every model's objects."""
    config = stack.config
    return StackFacts(
        image=config.ray_image,
        host=config.edge_host,
        requests_per_second=config.edge_rate_limit_rps,
        stream_timeout_s=config.stream_timeout_s,
        hf_token="hf_token" in stack.secrets,
        token_generation=config.ray_token_generation,
        resilience=stack_resilience(stack),
        operator_namespace=KUBERAY_NAMESPACE if config.kuberay_install == "helm" else None,
        cluster_ranges=(config.subnet_cidr, config.pods_cidr, config.services_cidr),
        compute_classes=stack_compute_classes(stack),
    )


def stack_model_objects(stack: Stack, profile: str, model: CompiledModel) -> ModelObjects:
    """One model's Kubernetes objects as this stack registers them, size-checked against the
    Kubernetes API's limits (a refusal names the model's profile)."""
    return build_model_objects(model, stack_facts(stack), display_path(stack.profile_path(profile)))


def node_service_account_id(stack: str) -> str:
    """A service account id (6-30 characters) per stack; a long stack name is shortened with a
    hash of it, so two stacks in one project never share node credentials."""
    slug = re.sub(r"[^a-z0-9]+", "-", stack.lower()).strip("-") or "stack"
    account = f"servestack-{slug}-nodes"
    if len(account) <= 30:
        return account
    digest = hashlib.sha256(stack.encode()).hexdigest()[:4]
    return f"{f'servestack-{slug}'[:19].rstrip('-')}-{digest}-nodes"


def _required(value: str | None, source: str, key: str, what: str) -> str:
    if not value:
        raise ServestackError(
            source, key, "is required to build the cluster",
            f"add '{key}: <{what}>' to the stack file, or run `pulumi config set {key} ...`",
        )  # fmt: skip
    return value
