"""The GPU worker pods one model needs, per machine type its replica groups run on: GPUs, CPU,
memory, shared memory and Ray's object store per pod, the Ray resources the node advertises,
and how many pods the groups take at their replica bounds. Each shape holds the plan's own
`ReplicaGroup` objects it hosts, so the pods and the plan cannot name different groups."""

from __future__ import annotations

import math

from pydantic import Field

from serving import catalog
from serving.catalog import GIB
from serving.frozen import Frozen
from serving.plan.placement import nodes_for
from serving.plan.planner import GroupPlan, Plan
from serving.plan.replicas import ReplicaGroup, Role
from serving.spec.profile import ModelSpec

# Ray's object store lives in /dev/shm; LLM serving passes small objects (weights come from disk),
# so a tenth of the pod is plenty. NCCL and vLLM's message queues take a little more per GPU.
OBJECT_STORE_FRACTION = 0.1
OBJECT_STORE_MAX_BYTES = 32 * GIB
SHM_PER_GPU_BYTES = 2 * GIB


class WorkerShape(Frozen):
    """One group of identical GPU worker pods. A pod takes a whole node: one Ray node per GKE
    node, so a STRICT_PACK group that fits a node fits a pod."""

    name: str = Field(description="Worker group name, e.g. 'gpu-a3-highgpu-8g'.")
    replica_groups: list[ReplicaGroup] = Field(
        description="The plan's replica groups (server, prefill, decode) it hosts."
    )
    machine_type: str
    gke_accelerator: str = Field(description="Value of the cloud.google.com/gke-accelerator label.")
    gpus: int = Field(description="nvidia.com/gpu per pod: all of the node's GPUs.")
    cpus: float = Field(description="CPU request and limit per pod.")
    memory_bytes: int = Field(description="Memory request and limit per pod.")
    shared_memory_bytes: int = Field(description="Size of the memory-backed /dev/shm volume.")
    object_store_bytes: int = Field(description="Ray object store, inside /dev/shm.")
    ray_resources: dict[str, float] = Field(
        description="Custom Ray resources the node advertises, e.g. accelerator_type:A100-80G."
    )
    local_ssd_bytes: int = Field(description="Node-local SSD for caches (0 when none).")
    nodes_per_replica: int = Field(description="Nodes one model replica spans (max of its roles).")
    min_replicas: int = Field(description="Pods at the models' minimum replicas.")
    max_replicas: int = Field(description="Pods at the models' maximum replicas.")

    @property
    def roles(self) -> list[Role]:
        """The roles of the replica groups it hosts."""
        return [group.role for group in self.replica_groups]


def allocatable(machine: catalog.MachineType) -> tuple[float, int]:
    """(CPUs, memory bytes) a worker pod takes on a node of this type: the catalog's pod
    capacity, rounded down to a tenth of a core and a whole GiB."""
    capacity = catalog.pod_capacity(machine.name)
    return math.floor(capacity.cpus * 10) / 10, capacity.memory_bytes // GIB * GIB


def worker_shapes(spec: ModelSpec, model_plan: Plan) -> list[WorkerShape]:
    """The worker groups a model needs: one per machine type its replica groups run on, sized
    from the plan (pods = nodes, since a pod takes its node)."""
    by_machine: dict[str, list[GroupPlan]] = {}
    for group in model_plan.groups:
        by_machine.setdefault(group.placement.machine_type, []).append(group)
    shapes = []
    for machine_name, groups in by_machine.items():
        machine = catalog.MACHINE_TYPES[machine_name]
        cpus, memory_bytes = allocatable(machine)
        object_store = max(
            2 * GIB, min(OBJECT_STORE_MAX_BYTES, int(memory_bytes * OBJECT_STORE_FRACTION))
        )
        object_store = object_store // GIB * GIB
        shapes.append(
            WorkerShape(
                name=f"gpu-{machine_name}",
                replica_groups=[g.replica_group for g in groups],
                machine_type=machine_name,
                gke_accelerator=machine.gke_accelerator,
                gpus=machine.gpus_per_node,
                cpus=cpus,
                memory_bytes=memory_bytes,
                shared_memory_bytes=object_store + SHM_PER_GPU_BYTES * machine.gpus_per_node,
                object_store_bytes=object_store,
                ray_resources={f"accelerator_type:{spec.gpu.ray_accelerator_type}": 1.0},
                local_ssd_bytes=machine.local_ssd_bytes,
                nodes_per_replica=max(g.placement.nodes_per_replica for g in groups),
                min_replicas=nodes_for([g.placement for g in groups], "min"),
                max_replicas=nodes_for([g.placement for g in groups], "max"),
            )
        )
    return shapes
