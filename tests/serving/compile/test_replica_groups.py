"""A spec's replica groups are worked out once, by the planner, and the compiler and the worker
pods read those same objects: the planner, the Serve application and the pods agree on every
group's role, layout and replica bounds because they hold one object, not because three
functions happen to split the spec alike."""

from __future__ import annotations

import pytest
from compiled_support import compile_spec, llama_8b

from serving.compile.compiler import compile
from serving.compile.patterns import llm_configs_of
from serving.plan.placement import nodes_for
from serving.plan.planner import plan
from serving.plan.replicas import ReplicaGroup, replica_groups
from serving.spec.parts import Autoscaling
from serving.spec.profile import ModelSpec

# A P/D pair whose sides differ in layout and bounds, so a reader that mixed them up would show.
PD_SIDES = {
    "prefill": {"autoscaling": {"min_replicas": 2, "max_replicas": 6}},
    "decode": {"parallelism": {"tensor": 2}, "autoscaling": {"min_replicas": 1, "max_replicas": 3}},
}


def server() -> ModelSpec:
    return llama_8b(autoscaling={"min_replicas": 2, "max_replicas": 5})


def pd_pair() -> ModelSpec:
    return llama_8b(machine_type="a3-highgpu-8g", disaggregation=PD_SIDES)


def moe_data_parallel() -> ModelSpec:
    return llama_8b(
        name="qwen3-30b-a3b",
        source="Qwen/Qwen3-30B-A3B",
        architecture="qwen3-30b-a3b",
        parallelism={"tensor": 1, "data": 8, "expert": True},
    )


@pytest.fixture(params=[server, pd_pair, moe_data_parallel], ids=["server", "pd", "dp"])
def spec(request: pytest.FixtureRequest) -> ModelSpec:
    made: ModelSpec = request.param()
    return made


class TestTheSpecIsSplitOnce:
    def test_a_pd_profile_gives_a_prefill_and_a_decode_group_with_their_own_layout_and_bounds(
        self,
    ) -> None:
        prefill, decode = replica_groups(pd_pair())
        assert (prefill.role, decode.role) == ("prefill", "decode")
        assert (prefill.parallelism.tensor, decode.parallelism.tensor) == (1, 2)
        assert (prefill.gpus_per_replica, decode.gpus_per_replica) == (1, 2)
        assert (prefill.min_replicas, prefill.max_replicas) == (2, 6)
        assert (decode.min_replicas, decode.max_replicas) == (1, 3)

    def test_a_data_parallel_group_takes_dp_times_tp_gpus_per_replica(self) -> None:
        (group,) = replica_groups(moe_data_parallel())
        assert group.role == "server"
        assert group.gpus_per_replica == 8

    def test_the_plan_holds_the_groups_the_spec_splits_into(self, spec: ModelSpec) -> None:
        model_plan = plan(spec)
        assert model_plan.replica_groups == replica_groups(spec)
        for group in model_plan.groups:
            assert (group.role, group.parallelism) == (
                group.replica_group.role,
                group.replica_group.parallelism,
            )
            assert group.placement.gpus_per_replica == group.replica_group.gpus_per_replica
            assert group.placement.min_replicas == group.replica_group.min_replicas
            assert group.placement.max_replicas == group.replica_group.max_replicas


class TestTheCompilerReadsThePlansGroups:
    def test_every_worker_shape_holds_the_plans_own_replica_group_objects(
        self, spec: ModelSpec
    ) -> None:
        compiled = compile_spec(spec)
        planned = compiled.plan.replica_groups
        hosted = [group for shape in compiled.worker_shapes for group in shape.replica_groups]
        assert len(hosted) == len(planned)
        assert all(any(group is mine for mine in planned) for group in hosted)
        assert all(any(group is theirs for theirs in hosted) for group in planned)

    def test_a_worker_shapes_pods_are_the_nodes_its_planned_groups_take(
        self, spec: ModelSpec
    ) -> None:
        compiled = compile_spec(spec)
        for shape in compiled.worker_shapes:
            groups = [g for g in compiled.plan.groups if g.replica_group in shape.replica_groups]
            assert shape.roles == [g.role for g in groups]
            assert shape.min_replicas == nodes_for([g.placement for g in groups], "min")
            assert shape.max_replicas == nodes_for([g.placement for g in groups], "max")

    def test_each_llm_config_has_its_groups_layout_and_replica_bounds(
        self, spec: ModelSpec
    ) -> None:
        compiled = compile_spec(spec)
        configs = llm_configs_of(compiled.application["args"])
        assert [role for role, _ in configs] == [g.role for g in compiled.plan.replica_groups]
        for (_, config), group in zip(configs, compiled.plan.replica_groups, strict=True):
            engine = config["engine_kwargs"]
            assert engine["tensor_parallel_size"] == group.parallelism.tensor
            assert engine.get("data_parallel_size", 1) == group.parallelism.data
            bounds = config["deployment_config"]["autoscaling_config"]
            assert (bounds["min_replicas"], bounds["max_replicas"]) == (
                group.min_replicas,
                group.max_replicas,
            )

    def test_the_compiler_follows_the_plans_group_not_a_fresh_split_of_the_spec(self) -> None:
        """A plan whose server group says other bounds and knobs than the spec: the application
        and the pods take the plan's, so nothing after the planner splits the spec again."""
        spec = server()
        model_plan = plan(spec)
        (planned,) = model_plan.groups
        asked = Autoscaling(min_replicas=3, max_replicas=7, target_ongoing_requests=5)
        other = ReplicaGroup(role="server", parallelism=planned.parallelism, autoscaling=asked)
        doctored = model_plan.model_copy(
            update={"groups": [planned.model_copy(update={"replica_group": other})]}
        )
        compiled = compile(spec, doctored)
        knobs = compiled.llm_config()["deployment_config"]["autoscaling_config"]
        assert (knobs["min_replicas"], knobs["max_replicas"]) == (3, 7)
        assert knobs["target_ongoing_requests"] == 5
        (shape,) = compiled.worker_shapes
        (hosted,) = shape.replica_groups
        assert hosted is doctored.groups[0].replica_group
        assert hosted == other
