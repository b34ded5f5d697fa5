"""The GKE platform a stack needs, derived and checked before any resource is registered.

`plan_platform` plans and compiles each model of a stack once (`compile_stack`), sums what the
plans ask of each machine type, and turns the stack into one frozen spec per component
(`infra.platform.specs`): the network, the cluster, the system node pool and one GPU node pool
per machine type the plans use. The Pulumi components in `infra/deploy/components/` turn specs into
resources and decide nothing; `servestack pools` prints the same specs offline.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from infra.kube.compute_class import ClassStep, compute_class, compute_class_name
from infra.kube.disruption import Resilience
from infra.kube.manifests import compile_for
from infra.kube.model_objects import ModelObjects, StackFacts, build_model_objects
from infra.kube.namespaces import KUBERAY_NAMESPACE
from infra.platform.config import Stack
from infra.platform.fits import PodFit, check_fits, stack_pods
from infra.platform.resilience import resilience_for
from infra.platform.specs import ClusterSpec, GpuPoolSpec, NetworkSpec, SystemPoolSpec
from infra.platform.stack_config import NAMESPACE, GpuPoolOptions
from serving import catalog
from serving.catalog.consumption import compact_refusal, run_limit_refusal
from serving.compile.compiler import CompiledModel
from serving.compile.scheduling import NODE_SURGE
from serving.errors import ProfileValidationError, ServestackError
from serving.frozen import Frozen
from serving.plan.planner import Plan, plan
from serving.plan.rules import tensor_across_nodes
from serving.plan.rules.step_holds_layout import step_cannot_hold
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


@dataclass
class _Demand:
    """What the plans ask of one machine type, summed over models and replica groups."""

    min_nodes: int = 0
    max_nodes: int = 0
    upgrade_room: int = 0
    spans_nodes: bool = False
    models: list[str] = field(default_factory=list)
    tensor: int = 0  # the widest tensor-parallel group
    pod_gpus: int = 0  # the GPUs of the largest worker pod


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
    demands = _gpu_demands(stack, models, judge_layouts)
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
        for pool in _gpu_pools_of(
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
        profile: compile_model(stack, spec, plan(spec, stack.config.prices))
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


def _gpu_demands(
    stack: Stack, models: dict[str, CompiledModel], judge_layouts: bool = True
) -> dict[str, _Demand]:
    """Nodes per machine type over every model's replica groups; a plan that cannot work, or a
    tensor-parallel group wider than its pool's nodes, stops the platform here."""
    problems: list[ServestackError] = []
    demands: dict[str, _Demand] = {}
    for model, compiled in models.items():
        model_plan = compiled.plan
        where = display_path(stack.profile_path(model))
        look = f"`servestack plan {stack.name} --model {model}` shows a layout that fits"
        too_wide = False
        for group in model_plan.groups:
            placement = group.placement
            tensor = group.parallelism.tensor
            if tensor > placement.gpus_per_node:
                too_wide = True
                problems.append(
                    ServestackError(
                        where,
                        "parallelism.tensor",
                        tensor_across_nodes(
                            tensor, placement.machine_type, placement.gpus_per_node
                        ),
                        f"use tensor: {placement.gpus_per_node} or less, with pipeline stages "
                        f"across nodes; {look}",
                    )
                )
            demand = demands.setdefault(placement.machine_type, _Demand())
            demand.spans_nodes |= placement.spans_nodes
            demand.tensor = max(demand.tensor, tensor)
            if model not in demand.models:
                demand.models.append(model)
        # The pool holds what the model's RayService worker groups may scale to (one pod per
        # node), so the two can never disagree.
        for shape in compiled.worker_shapes:
            demand = demands[shape.machine_type]
            demand.pod_gpus = max(demand.pod_gpus, shape.gpus)
            demand.min_nodes += shape.min_replicas
            demand.max_nodes += shape.max_replicas
            # Models upgrade one at a time: the largest new cluster at its minimum.
            demand.upgrade_room = max(demand.upgrade_room, shape.min_replicas)
        for verdict in model_plan.verdicts:
            if verdict.severity != "error" or (too_wide and verdict.code == "tp-crosses-node"):
                continue
            problems.append(ServestackError(where, verdict.field, verdict.message, look))
    if problems and judge_layouts:
        raise ProfileValidationError(problems)
    return demands


def _gpu_pools_of(
    machine_type: str,
    demand: _Demand,
    options: GpuPoolOptions | None,
    cluster: ClusterSpec,
    source: str,
    judge_layouts: bool = True,
) -> list[GpuPoolSpec]:
    """The pool of one machine type, or one pool per step of its capacity chain."""
    if options is None or not options.capacity:
        return [_gpu_pool(machine_type, demand, options, cluster, source, judge_layouts)]
    key = f"{NAMESPACE}:gpu_pools.{machine_type}.capacity"
    name = compute_class_name(machine_type)
    pools = []
    for index, step in enumerate(options.capacity):
        step_machine = step.machine_type or machine_type
        cannot = step_cannot_hold(
            step_machine,
            catalog.MACHINE_TYPES[machine_type].accelerator,
            tensor=demand.tensor,
            pod_gpus=demand.pod_gpus,
        )
        if cannot is not None and judge_layouts:
            raise ServestackError(
                source, f"{key}.{index}.machine_type",
                f"{cannot} ({', '.join(demand.models)})",
                f"use a machine type of the same GPU with {demand.pod_gpus} or more GPUs per "
                f"node, e.g. {machine_type}, or drop the step",
            )  # fmt: skip
        reservation = step.reservation
        flex = step.flex_start
        stepped = options.model_copy(
            update={
                "capacity": [],
                "spot": step.mode == "spot",
                "flex_start": flex is not None,
                "reservation_affinity": reservation.affinity if reservation else "none",
                "reservations": [reservation.name] if reservation and reservation.name else [],
                "spot_shutdown_grace_s": (
                    options.spot_shutdown_grace_s if step.mode == "spot" else None
                ),
            }
        )
        pool = _gpu_pool(
            step_machine, demand, stepped, cluster, f"{source}", judge_layouts,
            key_prefix=f"{key}.{index}.",
            chain={
                "compute_class": name, "chain_of": machine_type, "chain_step": index,
                "max_run_duration_s": flex.max_run_duration_s if flex else None,
                "class_min_nodes": demand.min_nodes, "min_nodes": 0,
            },
        )  # fmt: skip
        if judge_layouts:
            _check_step(pool, cluster, source, f"{key}.{index}")
        pools.append(pool)
    return pools


def _check_step(pool: GpuPoolSpec, cluster: ClusterSpec, source: str, key: str) -> None:
    """What GKE will not provision of one chain step, in the pack's words."""
    if pool.compact:
        refusal = compact_refusal(
            pool.machine_type,
            zones=len(pool.zones),
            flex_start=pool.flex_start,
            queued=pool.queued_provisioning,
        )
        if refusal is not None:
            raise ServestackError(
                source, key, refusal,
                "put a reservation, Spot or on-demand step in its place, or a layout that "
                "needs no compact placement (inside one node)",
            )  # fmt: skip
    if pool.max_run_duration_s is not None:
        for exclusion in cluster.maintenance_exclusions:
            window = (exclusion.end_time - exclusion.start_time).total_seconds()
            refusal = run_limit_refusal(
                pool.machine_type, pool.max_run_duration_s, exclusion.name, window
            )
            if refusal is not None:
                raise ServestackError(
                    source, key, refusal,
                    "put a reservation step before the flex-start one, or split the exclusion "
                    f"into windows of at most {pool.max_run_duration_s // 86400} days",
                )  # fmt: skip


def _gpu_pool(
    machine_type: str,
    demand: _Demand,
    options: GpuPoolOptions | None,
    cluster: ClusterSpec,
    source: str,
    judge_layouts: bool = True,
    *,
    key_prefix: str | None = None,
    chain: dict[str, Any] | None = None,
) -> GpuPoolSpec:
    options = options or GpuPoolOptions()
    prefix = key_prefix or f"{NAMESPACE}:gpu_pools.{machine_type}."
    machine = catalog.MACHINE_TYPES[machine_type]
    stocking = catalog.zones_offering(machine.gke_accelerator, cluster.region)
    if not stocking:
        regions = ", ".join(catalog.regions_offering(machine.gke_accelerator))
        raise ServestackError(
            source, "gcp:region",
            f"{cluster.region} has no zone stocking {machine.gke_accelerator}, the GPU of "
            f"{machine_type}, on which {', '.join(demand.models)} are planned",
            f"use a region that stocks it ({regions}), or give those models another accelerator",
        )  # fmt: skip
    wanted = demand.max_nodes + demand.upgrade_room + NODE_SURGE
    reserved = options.reserved_nodes
    specific = options.reservation_affinity == "specific"
    if specific and reserved is not None and reserved < wanted and judge_layouts:
        raise ServestackError(
            source, f"{NAMESPACE}:gpu_pools.{machine_type}.reserved_nodes",
            f"at peak the {machine_type} pool needs {wanted} nodes ({demand.max_nodes} at "
            f"the models' max_replicas, {demand.upgrade_room} for a RayService upgrade's new "
            f"cluster, {NODE_SURGE} surge node for a node upgrade) but its reservations "
            f"hold {reserved}: an upgrade at peak would wait for capacity that never comes",
            f"reserve {wanted} VMs (reserved_nodes: {wanted}), use reservation_affinity: "
            "any (the rest on demand), or lower the models' max_replicas",
        )  # fmt: skip
    compact = demand.spans_nodes if options.compact_placement is None else options.compact_placement
    if demand.spans_nodes and not compact and judge_layouts:
        raise ServestackError(
            source, f"{NAMESPACE}:gpu_pools.{machine_type}.compact_placement",
            f"a replica of {', '.join(demand.models)} spans {machine_type} nodes, and without "
            "compact placement its ranks may sit racks apart",
            "remove compact_placement: false (compact placement is on wherever a replica spans "
            "nodes)",
        )  # fmt: skip
    if options.zones:
        zones = list(options.zones)
    elif cluster.cluster_zone:
        zones = [cluster.cluster_zone]
    else:
        # Where the pool may span zones, every stocking zone widens the autoscaler's choice.
        zones = list(stocking[:1] if compact else stocking)
    return validate(
        GpuPoolSpec,
        options.model_dump()
        | {
            "zones": zones,
            "machine_type": machine_type,
            "region": cluster.region,
            "min_nodes": demand.min_nodes,
            "max_nodes": demand.max_nodes + demand.upgrade_room,
            "upgrade_room_nodes": demand.upgrade_room,
            "replicas_span_nodes": demand.spans_nodes,
            "models": tuple(demand.models),
        }
        | (chain or {}),
        source,
        prefix,
    )
