"""Autoscaling from the plan: each knob Ray Serve reads follows from what the planner says a
replica sustains within the profile's latency targets, and from how long a replica takes to load.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from compiled_support import compile_spec, llama_8b
from ray.serve.config import AutoscalingConfig
from repo import REPO

from serving.compile.autoscaling import AutoscalingChoice, autoscaling, replica_load_s
from serving.compile.patterns import llm_configs_of
from serving.errors import ProfileValidationError
from serving.plan.placement import choose_machine
from serving.plan.planner import decode_step_s, plan
from serving.plan.replicas import Role
from serving.spec.loading import load_profile
from serving.spec.profile import ModelSpec

PROFILES = sorted((REPO / "stacks" / "models").glob("*.yaml"))


def spec(**changes: Any) -> ModelSpec:
    """The 8B with room to scale (1 to 4 replicas) unless a test says otherwise."""
    return llama_8b(**{"autoscaling": {"min_replicas": 1, "max_replicas": 4}} | changes)


def knobs_of(profile: ModelSpec, role: Role = "server") -> AutoscalingChoice:
    """The knobs of one role, from the spec's plan."""
    return autoscaling(profile, plan(profile), role)


class TestTheTargetIsTheBatchWithinTheLatencyTarget:
    def test_a_replica_at_its_target_decodes_within_the_inter_token_target(self) -> None:
        for itl_ms in (12.0, 20.0, 50.0):
            compiled = spec(latency={"itl_ms": itl_ms}, workload={"input_tokens": 1000})
            knobs = knobs_of(compiled)
            layout = compiled.parallelism
            context = 1000 + compiled.workload.output_tokens // 2
            step_s = decode_step_s(
                compiled, choose_machine(compiled, 1), layout, int(knobs.target_ongoing_requests),
                context,
            )  # fmt: skip
            assert step_s <= itl_ms / 1e3

    def test_a_tighter_inter_token_target_lowers_the_target(self) -> None:
        targets = [
            knobs_of(spec(latency={"itl_ms": ms})).target_ongoing_requests
            for ms in (50.0, 20.0, 12.0)
        ]
        assert targets[0] > targets[1] > targets[2] >= 1

    def test_the_plan_reports_throughput_at_the_same_batch(self) -> None:
        compiled = spec(latency={"itl_ms": 15.0})
        (group,) = plan(compiled).groups
        assert knobs_of(compiled).target_ongoing_requests == group.estimates.decode_batch


class TestTheCapKeepsTheFirstTokenWithinItsTarget:
    def test_the_waiting_requests_see_a_first_token_within_the_target(self) -> None:
        compiled = spec(latency={"ttft_ms": 1500.0})
        (group,) = plan(compiled).groups
        knobs = knobs_of(compiled)
        waiting = knobs.max_ongoing_requests - knobs.target_ongoing_requests
        assert waiting >= 1
        last_first_token_s = group.estimates.ttft_s + waiting / group.estimates.requests_per_s
        assert last_first_token_s <= 1.5

    def test_a_tighter_ttft_target_shortens_the_queue(self) -> None:
        loose = knobs_of(spec(latency={"ttft_ms": 4000.0}))
        tight = knobs_of(spec(latency={"ttft_ms": 500.0}))
        assert loose.target_ongoing_requests == tight.target_ongoing_requests
        assert loose.max_ongoing_requests > tight.max_ongoing_requests

    def test_a_prefill_replica_takes_what_it_prefills_within_the_ttft_target(self) -> None:
        compiled = spec(
            max_model_len=16384,
            workload={"input_tokens": 8000, "output_tokens": 300},
            disaggregation={},
        )
        prefill = plan(compiled).group("prefill")
        knobs = knobs_of(compiled, "prefill")
        assert knobs.target_ongoing_requests * prefill.estimates.prefill_s <= 2.0
        assert (knobs.target_ongoing_requests + 1) * prefill.estimates.prefill_s > 2.0


class TestDelaysFollowTheLoadTime:
    def test_a_bigger_checkpoint_loads_longer_and_is_kept_longer(self) -> None:
        small = spec()
        big = spec(
            name="llama-3.3-70b", source="meta-llama/Llama-3.3-70B-Instruct",
            architecture="llama-3.3-70b", parallelism={"tensor": 4},
        )  # fmt: skip
        assert knobs_of(big).load_s > knobs_of(small).load_s
        assert knobs_of(big).downscale_delay_s > knobs_of(small).downscale_delay_s
        assert knobs_of(big).downscale_delay_s >= 3 * knobs_of(big).load_s - 1

    def test_weights_on_gcs_load_faster_than_from_hugging_face(self) -> None:
        hub = spec()
        bucket = spec(source="gs://my-weights/llama-3.1-8b")
        assert replica_load_s(bucket, plan(bucket).groups[0]) < replica_load_s(
            hub, plan(hub).groups[0]
        )

    def test_a_replica_sharing_a_node_starts_no_node(self) -> None:
        alone = spec()  # one GPU on a3-highgpu-1g: every replica needs its own node
        shared = spec(machine_type="a3-highgpu-8g")
        assert knobs_of(alone).load_s - knobs_of(shared).load_s >= 60

    def test_the_upscale_delay_stays_within_its_bounds(self, shipped: ModelSpec) -> None:
        for role, _ in llm_configs_of(compile_spec(shipped).application["args"]):
            assert 10 <= knobs_of(shipped, role).upscale_delay_s <= 120


class TestTheProfileOverrides:
    def test_every_knob_set_in_the_profile_wins(self) -> None:
        asked = {
            "min_replicas": 1, "max_replicas": 3, "target_ongoing_requests": 7,
            "max_ongoing_requests": 9, "upscale_delay_s": 1, "downscale_delay_s": 2,
        }  # fmt: skip
        knobs = knobs_of(spec(autoscaling=asked))
        assert (knobs.target_ongoing_requests, knobs.max_ongoing_requests) == (7, 9)
        assert (knobs.upscale_delay_s, knobs.downscale_delay_s) == (1, 2)

    def test_a_target_alone_raises_the_derived_cap_to_reach_it(self) -> None:
        knobs = knobs_of(spec(autoscaling={"target_ongoing_requests": 5000}))
        assert knobs.max_ongoing_requests == 5000

    def test_a_target_above_the_cap_is_refused(self) -> None:
        with pytest.raises(ProfileValidationError) as caught:
            spec(autoscaling={"target_ongoing_requests": 20, "max_ongoing_requests": 10})
        error = caught.value.errors[0]
        assert error.field == "autoscaling.target_ongoing_requests"
        assert "max_ongoing_requests" in error.fix


@pytest.fixture(params=PROFILES, ids=lambda path: path.stem)
def shipped(request: pytest.FixtureRequest) -> ModelSpec:
    return load_profile(request.param)


def test_shipped_profiles_scale_differently_as_their_plans_differ() -> None:
    """No two shipped replica groups whose plans differ get the same knobs, and every knob set
    is one Ray's AutoscalingConfig accepts."""
    knobs: dict[str, tuple[int, float, int, float, float]] = {}
    for path in PROFILES:
        compiled = load_profile(path)
        for role, config in llm_configs_of(compile_spec(compiled).application["args"]):
            deployment = config["deployment_config"]
            AutoscalingConfig(**deployment["autoscaling_config"])
            choice = knobs_of(compiled, role)
            batch = plan(compiled).group(role).estimates.decode_batch
            knobs[f"{compiled.name}/{role}"] = (
                batch,
                choice.target_ongoing_requests,
                deployment["max_ongoing_requests"],
                choice.upscale_delay_s,
                choice.downscale_delay_s,
            )
            assert deployment["autoscaling_config"]["target_ongoing_requests"] == (
                choice.target_ongoing_requests
            )
    for (one, first), (other, second) in itertools.combinations(knobs.items(), 2):
        assert first[1:] != second[1:], f"{one} and {other} scale alike"
