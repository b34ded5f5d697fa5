"""The `servestack` command line, run as users run it: the installed console script in a
subprocess, from a copy of the repository's stacks.

Bad input of every kind ends with exit code 2 and one message on stderr naming the file (as the
user would type it from the working directory), the field and a fix, never a traceback. A plan
prints (and, with --json, carries) the planner's own figures.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import NARROW, copy_repo, edit_yaml, run
from compiled_support import compile_spec, deployable

from infra.config import load_stack
from infra.disruption import resilience_for
from infra.manifests import rayservice
from infra.render import workers_document
from serving.accuracy import error_band
from serving.catalog import MACHINE_TYPES
from serving.compiler import builder
from serving.planner import plan
from serving.recommend import catalog_spec, recommend


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A private copy to break."""
    return copy_repo(tmp_path / "repo")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shared, unedited copy for the commands that only read."""
    return copy_repo(tmp_path_factory.mktemp("pristine"))


# --- bad input ------------------------------------------------------------------------------

DEV_PROFILE = "stacks/models/llama-3.1-8b.yaml"
DEV_STACK = "stacks/Pulumi.dev.yaml"


def _profile(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda root: edit_yaml(root / DEV_PROFILE, change)


def _rename(document: dict[str, Any], old: str, new: str) -> None:
    document[new] = document.pop(old)


def _bad_yaml(root: Path) -> None:
    path = root / DEV_PROFILE
    path.write_text(path.read_text().replace("tensor: 1", "tensor: [1"))


def _unknown_model_in_stack(root: Path) -> None:
    edit_yaml(root / DEV_STACK, lambda d: d["config"].update({"servestack:models": ["llama-8b"]}))


def _misspelt_stack_key(root: Path) -> None:
    edit_yaml(
        root / DEV_STACK, lambda d: _rename(d["config"], "servestack:models", "servestack:modles")
    )


def _two_profiles_one_model(root: Path) -> None:
    shutil.copy(root / DEV_PROFILE, root / "stacks/models/llama-copy.yaml")
    edit_yaml(
        root / DEV_STACK,
        lambda d: d["config"].update({"servestack:models": ["llama-3.1-8b", "llama-copy"]}),
    )


def _unchanged(root: Path) -> None:
    pass


# (id, how to break the copy, arguments, file, field, words the message must carry)
BAD_INPUT: list[tuple[str, Callable[[Path], None], list[str], str, str, list[str]]] = [
    (
        "unknown-key",
        _profile(lambda d: d.update(max_model_lenn=8192)),
        [],
        DEV_PROFILE,
        "max_model_lenn",
        ["did you mean 'max_model_len'?"],
    ),
    (
        "unknown-nested-key",
        _profile(lambda d: d.update(parallelism={"tensr": 1})),
        [],
        DEV_PROFILE,
        "parallelism.tensr",
        ["did you mean 'tensor'?"],
    ),
    (
        "wrong-type",
        _profile(lambda d: d.update(max_model_len="long")),
        [],
        DEV_PROFILE,
        "max_model_len",
        ["'long'"],
    ),
    (
        "unknown-accelerator",
        _profile(lambda d: d.update(accelerator="h100")),
        [],
        DEV_PROFILE,
        "accelerator",
        ["did you mean 'h100-80gb'?"],
    ),
    (
        "unknown-architecture",
        _profile(lambda d: d.update(architecture="llama-3.1-8")),
        [],
        DEV_PROFILE,
        "architecture",
        ["did you mean 'llama-3.1-8b'?"],
    ),
    (
        "context-beyond-the-model",
        _profile(lambda d: d.update(max_model_len=200_000)),
        [],
        DEV_PROFILE,
        "max_model_len",
        ["131,072 positions", "at most 131072"],
    ),
    (
        "tensor-zero",
        _profile(lambda d: d.update(parallelism={"tensor": 0})),
        [],
        DEV_PROFILE,
        "parallelism.tensor",
        ["greater than or equal to 1"],
    ),
    (
        "min-above-max-replicas",
        _profile(lambda d: d.update(autoscaling={"min_replicas": 3, "max_replicas": 2})),
        [],
        DEV_PROFILE,
        "autoscaling",
        ["raise max_replicas to at least 3"],
    ),
    (
        "yaml-syntax",
        _bad_yaml,
        [],
        DEV_PROFILE,
        "line 7",
        ["not valid YAML"],
    ),  # where the bracket opened
    (
        "stack-names-a-missing-profile",
        _unknown_model_in_stack,
        [],
        DEV_STACK,
        "servestack:models",
        ["stacks/models/llama-8b.yaml", "llama-3.1-8b"],
    ),
    (
        "unknown-model-flag",
        _unchanged,
        ["--model", "qwen3-32b"],
        DEV_STACK,
        "--model",
        ["no model 'qwen3-32b'", "llama-3.1-8b"],
    ),
    (
        "unknown-engine-argument",
        _profile(lambda d: d.update(engine_args={"max_num_seq": 64})),
        [],
        DEV_PROFILE,
        "engine_args.max_num_seq",
        ["vLLM 0.22.0 has no engine argument", "did you mean 'max_num_seqs'?"],
    ),
    (
        "two-profiles-one-model",
        _two_profiles_one_model,
        [],
        DEV_STACK,
        "servestack:models",
        ["both serve the model 'llama-3.1-8b'"],
    ),
    (
        "unknown-recommend-model",
        _unchanged,
        ["prod", "--recommend", "llama-3-8b"],
        "stacks/Pulumi.prod.yaml",
        "--recommend",
        ["no model 'llama-3-8b'", "did you mean 'llama-3.1-8b'?", "llama-3.3-70b-fp8"],
    ),
]


@pytest.mark.parametrize(
    ("breakage", "args", "file", "field", "words"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_INPUT],
)
def test_bad_input_exits_2_naming_file_field_and_fix_without_traceback(
    repo: Path,
    breakage: Callable[[Path], None],
    args: list[str],
    file: str,
    field: str,
    words: list[str],
) -> None:
    breakage(repo)
    result = run(repo, "plan", *args)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")
    assert f"{file}: {field}: " in result.stderr
    assert "fix: " in result.stderr
    assert all(word in result.stderr for word in words), result.stderr
    assert "Traceback" not in result.stderr


def test_a_misspelt_stack_key_exits_2_naming_the_stack_file_and_the_nearest_key(
    repo: Path,
) -> None:
    _misspelt_stack_key(repo)
    result = run(repo, "plan")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {DEV_STACK}: ")
    assert "unknown key 'servestack:modles'" in result.stderr
    assert "did you mean 'servestack:models'?" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_misspelt_stack_key_is_named_and_fixed_with_its_namespace(repo: Path) -> None:
    _misspelt_stack_key(repo)
    result = run(repo, "plan")
    assert f"{DEV_STACK}: servestack:modles: " in result.stderr
    assert "add 'servestack:models'" in result.stderr


@pytest.mark.parametrize("flag", ["--model", "--recommend"])
def test_an_unknown_model_flag_names_the_stack_file_as_typed(pristine: Path, flag: str) -> None:
    result = run(pristine, "plan", flag, "llama-3-8b")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {DEV_STACK}: {flag}: ")


def test_unknown_stack_exits_2_naming_the_missing_file_and_the_stacks_that_exist(
    pristine: Path,
) -> None:
    result = run(pristine, "plan", "staging")
    assert result.returncode == 2
    assert "error: stacks/Pulumi.staging.yaml: no stack named 'staging'" in result.stderr
    assert "fix: use one of the stacks in stacks/: dev, prod" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_empty_profile_exits_2_naming_the_file(repo: Path) -> None:
    (repo / DEV_PROFILE).write_text("")
    result = run(repo, "plan")
    assert result.returncode == 2
    assert f"error: {DEV_PROFILE}: expected a mapping" in result.stderr
    assert "fix: " in result.stderr
    assert "Traceback" not in result.stderr


def test_every_problem_in_a_profile_is_reported_in_one_run(repo: Path) -> None:
    _profile(lambda d: d.update(accelerator="h100", max_model_lenn=1, parallelism={"tensor": 0}))(
        repo
    )
    result = run(repo, "plan")
    assert result.returncode == 2
    for field in ("accelerator", "max_model_lenn", "parallelism.tensor"):
        assert f"{DEV_PROFILE}: {field}: " in result.stderr
    assert result.stderr.count("fix: ") == 3


@pytest.mark.parametrize(
    "args",
    [
        ["--max-itl-ms", "-1"],
        ["--recommend", "llama-3.1-8b", "--max-itl-ms", "-1"],
        ["--max-ttft-ms", "soon"],
    ],
    ids=["itl-negative", "itl-negative-with-recommend", "ttft-not-a-number"],
)
def test_a_bad_flag_value_exits_2_naming_the_flag_without_traceback(
    pristine: Path, args: list[str]
) -> None:
    result = run(pristine, "plan", *args)
    assert result.returncode == 2
    assert args[-2] in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_flag_value_says_what_would_work(pristine: Path) -> None:
    result = run(pristine, "plan", "--max-itl-ms", "-1")
    assert result.returncode == 2
    assert "fix: " in result.stderr


def test_an_error_names_the_file_as_typed_from_the_working_directory(repo: Path) -> None:
    _profile(lambda d: d.update(accelerator="h100"))(repo)
    result = run(repo / "stacks", "plan")
    assert result.returncode == 2
    assert "error: models/llama-3.1-8b.yaml: accelerator: " in result.stderr


def test_an_error_keeps_a_long_file_path_whole_when_stderr_is_not_a_terminal(
    tmp_path: Path,
) -> None:
    root = copy_repo(tmp_path / ("a-checkout-directory-with-a-rather-long-name-" * 2))
    _profile(lambda d: d.update(accelerator="h100"))(root)
    # From a folder beside stacks/ (where Pulumi users often stand) the path is shown absolute.
    (root / "infra").mkdir()
    profile = root / DEV_PROFILE
    assert len(str(profile)) > NARROW
    result = run(root / "infra", "plan", columns=NARROW)
    assert result.returncode == 2
    assert f"{profile}: accelerator: " in result.stderr


# --- plans ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dev_text(pristine: Path) -> subprocess.CompletedProcess[str]:
    return run(pristine, "plan")


@pytest.fixture(scope="module")
def prod_text(pristine: Path) -> subprocess.CompletedProcess[str]:
    return run(pristine, "plan", "prod")


def test_plan_states_the_planners_measured_error_for_each_kind_of_model(
    dev_text: subprocess.CompletedProcess[str], pristine: Path
) -> None:
    out = " ".join(dev_text.stdout.split())
    kinds = {spec.architecture.is_moe for spec in load_stack("dev", pristine).profiles.values()}
    for is_moe in kinds:
        kind = "MoE" if is_moe else "dense"
        assert f"measured error of the estimates for {kind} models" in out
        for phase, shown in (("decode", "ITL"), ("ttft", "TTFT"), ("saturation", "throughput")):
            assert f"{shown}: {error_band(is_moe, phase).describe()}" in out


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_plan_exits_0_and_prints_each_models_memory_kv_latency_and_cost(
    request: pytest.FixtureRequest, pristine: Path, stack: str
) -> None:
    result: subprocess.CompletedProcess[str] = request.getfixturevalue(f"{stack}_text")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    out = result.stdout
    profiles = load_stack(stack, pristine).profiles
    assert profiles
    for spec in profiles.values():
        model_plan = plan(spec)
        group = model_plan.groups[0]
        memory, estimates, cost = group.memory, group.estimates, group.cost
        assert f"{spec.name}  {spec.architecture.key}" in out
        for label, value in [
            ("weights / GPU", f"{memory.weights_bytes / 1024**3:,.1f} GiB"),
            ("KV cache / GPU", f"{memory.kv_cache_bytes / 1024**3:,.1f} GiB"),
            ("KV / token", f"{memory.kv_cache_bytes_per_token:,} B"),
            ("KV capacity", f"{memory.kv_capacity_tokens:,} tokens"),
            ("TTFT", f"{estimates.ttft_s * 1e3:,.1f} ms"),
            ("ITL (batch 1)", f"{estimates.itl_s * 1e3:,.1f} ms"),
            ("$ / hour / replica", f"${cost.price_per_hour_usd:,.2f}"),
            ("$ / M output tokens", f"${cost.usd_per_million_output_tokens:,.2f}"),
        ]:
            assert re.search(rf"{re.escape(label)}\s+{re.escape(value)}", out), (label, value)


def test_plan_marks_each_fitting_model_as_fitting(
    dev_text: subprocess.CompletedProcess[str],
) -> None:
    assert "· fits" in dev_text.stdout
    assert "cannot work" not in dev_text.stdout


@pytest.fixture(scope="module")
def dev_json(pristine: Path) -> dict[str, Any]:
    result = run(pristine, "plan", "--json")
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_plan_json_names_the_default_stack_and_plans_each_of_its_models(
    dev_json: dict[str, Any], pristine: Path
) -> None:
    assert dev_json["stack"] == "dev"
    assert [p["model"] for p in dev_json["plans"]] == [
        spec.name for spec in load_stack("dev", pristine).profiles.values()
    ]


def test_plan_json_carries_the_planners_figures(dev_json: dict[str, Any], pristine: Path) -> None:
    specs = list(load_stack("dev", pristine).profiles.values())
    for spec, printed in zip(specs, dev_json["plans"], strict=True):
        expected = plan(spec)
        memory = expected.groups[0].memory
        group = printed["groups"][0]
        assert group["memory"]["kv_cache_bytes_per_token"] == memory.kv_cache_bytes_per_token
        assert group["memory"]["weights_bytes"] == memory.weights_bytes
        assert group["memory"]["kv_capacity_tokens"] == memory.kv_capacity_tokens
        assert printed["usd_per_million_output_tokens"] == expected.usd_per_million_output_tokens
        assert printed["ttft_s"] == expected.ttft_s
        assert printed["itl_s"] == expected.itl_s
        assert printed == expected.model_dump(mode="json")


def test_plan_json_applies_the_stacks_price_overrides(repo: Path) -> None:
    list_price = MACHINE_TYPES["a3-highgpu-8g"].price_per_hour_usd
    prices = {"a3-highgpu-8g": list_price / 2}
    edit_yaml(
        repo / "stacks/Pulumi.prod.yaml",
        lambda d: d["config"].update({"servestack:prices": prices}),
    )
    result = run(repo, "plan", "prod", "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)["plans"]
    specs = list(load_stack("prod", repo).profiles.values())
    for spec, model_plan in zip(specs, printed, strict=True):
        assert model_plan == plan(spec, prices).model_dump(mode="json")
        assert model_plan["groups"][0]["placement"]["machine_type"] == "a3-highgpu-8g"
        at_list_price = plan(spec).usd_per_million_output_tokens
        assert at_list_price is not None
        assert model_plan["usd_per_million_output_tokens"] == pytest.approx(at_list_price / 2)


# --- --recommend ----------------------------------------------------------------------------

# The reasons the recommender gives candidates that meet the targets; any other reason says why
# a candidate was disqualified.
_STILL_IN_THE_RUNNING = re.compile(
    r"^(cheapest per million output tokens within the latency targets"
    r"|\d+\.\d\dx the winner's cost"
    r"(; a tie: within the planner's measured ±\d+% throughput error)?)(; DP\+EP over .*)?$"
)


@pytest.fixture(scope="module")
def recommended(pristine: Path) -> list[dict[str, Any]]:
    result = run(pristine, "plan", "prod", "--recommend", "llama-3.3-70b-fp8", "--json")
    assert result.returncode == 0, result.stderr
    candidates: list[dict[str, Any]] = json.loads(result.stdout)
    return candidates


def test_recommend_ranks_every_candidate_once_from_1(recommended: list[dict[str, Any]]) -> None:
    assert [c["rank"] for c in recommended] == list(range(1, len(recommended) + 1))


def test_recommend_rank_1_is_the_cheapest_that_meets_the_targets(
    recommended: list[dict[str, Any]],
) -> None:
    in_the_running = [c for c in recommended if _STILL_IN_THE_RUNNING.match(c["reason"])]
    assert in_the_running, "no candidate meets the targets"
    winner = recommended[0]
    assert winner["reason"].startswith("cheapest")
    assert winner["usd_per_million_output_tokens"] == min(
        c["usd_per_million_output_tokens"] for c in in_the_running
    )


def test_recommend_every_loser_says_why_it_lost(recommended: list[dict[str, Any]]) -> None:
    losers = recommended[1:]
    assert losers
    assert all(c["reason"].strip() for c in losers)
    assert not any(c["reason"].startswith("cheapest") for c in losers)


def test_recommend_ranks_candidates_meeting_the_targets_first_cheapest_first(
    recommended: list[dict[str, Any]],
) -> None:
    meeting = [_STILL_IN_THE_RUNNING.match(c["reason"]) is not None for c in recommended]
    assert meeting == sorted(meeting, reverse=True)
    in_the_running = recommended[: sum(meeting)]
    costs = [c["usd_per_million_output_tokens"] for c in in_the_running]
    assert costs == sorted(costs)
    best = costs[0]
    band = error_band(False, "saturation").band
    for candidate in in_the_running[1:]:
        ratio = candidate["usd_per_million_output_tokens"] / best
        assert candidate["reason"].startswith(f"{ratio:.2f}x the winner's cost")
        # within the planner's measured throughput error of the winner: a tie
        assert candidate["tie"] == (ratio - 1 <= band)


def test_recommend_json_is_the_recommenders_ranking(
    recommended: list[dict[str, Any]], pristine: Path
) -> None:
    spec = load_stack("prod", pristine).profiles["llama-3.3-70b-fp8"]
    expected = recommend(spec, itl_target_s=0.050, ttft_target_s=2.0)
    assert recommended == [c.model_dump(mode="json") for c in expected]


def test_recommend_with_a_tighter_latency_target_disqualifies_slower_layouts(
    pristine: Path, recommended: list[dict[str, Any]]
) -> None:
    result = run(
        pristine,
        "plan", "prod", "--recommend", "llama-3.3-70b-fp8", "--json", "--max-itl-ms", "20",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    tight: list[dict[str, Any]] = json.loads(result.stdout)
    winner = tight[0]
    assert winner["reason"].startswith("cheapest")
    assert winner["itl_at_batch_s"] <= 0.020
    assert any("above the 20 ms target" in c["reason"] for c in tight)
    loose_in_the_running = sum(1 for c in recommended if _STILL_IN_THE_RUNNING.match(c["reason"]))
    tight_in_the_running = sum(1 for c in tight if _STILL_IN_THE_RUNNING.match(c["reason"]))
    assert tight_in_the_running < loose_in_the_running


def test_recommend_takes_a_catalog_architecture_the_stack_has_no_profile_for(
    pristine: Path,
) -> None:
    result = run(pristine, "plan", "--recommend", "deepseek-v3", "--json")
    assert result.returncode == 0, result.stderr
    expected = recommend(catalog_spec("deepseek-v3"), itl_target_s=0.050, ttft_target_s=2.0)
    assert json.loads(result.stdout) == [c.model_dump(mode="json") for c in expected]


def test_recommend_with_a_misspelt_architecture_suggests_the_nearest(pristine: Path) -> None:
    result = run(pristine, "plan", "--recommend", "llama-3.3-70")
    assert result.returncode == 2
    assert "llama-3.3-70b" in result.stderr


# --- a model that cannot fit -----------------------------------------------------------------

TOO_BIG = {
    "name": "llama-3.3-70b",
    "source": "meta-llama/Llama-3.3-70B-Instruct",
    "architecture": "llama-3.3-70b",
    "accelerator": "a100-40gb",
    "parallelism": {"tensor": 1},
    "max_model_len": 8192,
}


@pytest.fixture
def too_big(repo: Path) -> Path:
    """A stack `big` serving the dev model and a bf16 70B on one A100 40GB, which cannot fit."""
    (repo / "stacks/models/llama-3.3-70b.yaml").write_text(yaml.safe_dump(TOO_BIG))
    (repo / "stacks/Pulumi.big.yaml").write_text(
        yaml.safe_dump({"config": {"servestack:models": ["llama-3.1-8b", "llama-3.3-70b"]}})
    )
    return repo


def _does_not_fit(root: Path) -> str:
    spec = load_stack("big", root).profiles["llama-3.3-70b"]
    verdicts = [v for v in plan(spec).verdicts if v.code == "does-not-fit"]
    assert len(verdicts) == 1 and verdicts[0].severity == "error"
    return verdicts[0].message


def test_a_model_that_cannot_fit_makes_plan_exit_1_and_print_the_verdict(too_big: Path) -> None:
    result = run(too_big, "plan", "big")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    # The fitting model is still planned and shown alongside the one that fails.
    assert "llama-3.1-8b  llama-3.1-8b" in result.stdout
    assert "llama-3.3-70b  llama-3.3-70b" in result.stdout
    assert "cannot work" in result.stdout
    message = _does_not_fit(too_big)
    assert "a100-40gb offers 36.0 GiB" in message and "use tensor=4" in message
    # Piped output is a fixed 110 columns wide, so a long verdict wraps onto a second line.
    assert " ".join(message.split()) in " ".join(result.stdout.split())


def test_a_model_that_cannot_fit_makes_plan_json_exit_1_with_the_verdict(too_big: Path) -> None:
    result = run(too_big, "plan", "big", "--model", "llama-3.3-70b", "--json")
    assert result.returncode == 1, result.stderr
    (printed,) = json.loads(result.stdout)["plans"]
    verdict = next(v for v in printed["verdicts"] if v["code"] == "does-not-fit")
    assert verdict["severity"] == "error"
    assert verdict["message"] == _does_not_fit(too_big)
    assert verdict["suggestion"]["tensor"] == 4
    assert printed["groups"][0]["memory"]["fits"] is False


def test_a_model_that_cannot_fit_prints_the_verdicts_code(too_big: Path) -> None:
    result = run(too_big, "plan", "big")
    assert result.returncode == 1
    assert "[does-not-fit]" in result.stdout


# --- render -----------------------------------------------------------------------------------


def _without_comments(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))


def test_render_writes_each_models_serve_config_env_and_workers(repo: Path) -> None:
    result = run(repo, "render", "prod", "--out", "out")
    assert result.returncode == 0, result.stderr
    stack = load_stack("prod", repo)
    resilience = resilience_for(
        stack.config.gpu_pools, stream_timeout_s=stack.config.stream_timeout_s
    )
    for spec in stack.profiles.values():
        folder = repo / "out" / spec.name
        manifest = rayservice(
            deployable(spec, resilience),
            stack.config.ray_image,
            with_hf_token=False,
            resilience=resilience,
        )
        # The serve config is the RayService's own (the compiled one, drains fitted to the pools).
        deployed = yaml.safe_load(manifest["spec"]["serveConfigV2"])
        assert yaml.safe_load((folder / "serve-config.yaml").read_text()) == deployed
        assert deployed["applications"][0]["import_path"] == builder(spec)
        env_lines = _without_comments((folder / "cluster.env").read_text()).splitlines()
        assert env_lines == [f"{k}={v}" for k, v in compile_spec(spec).cluster_env.items()]
        assert yaml.safe_load((folder / "workers.yaml").read_text()) == workers_document(
            deployable(spec, resilience)
        )
        assert yaml.safe_load((folder / "rayservice.yaml").read_text()) == manifest
        assert f"wrote out/{spec.name}/serve-config.yaml" in result.stdout


def test_render_says_where_each_file_came_from(repo: Path) -> None:
    assert run(repo, "render").returncode == 0
    header = (repo / "rendered/dev/llama-3.1-8b/serve-config.yaml").read_text().splitlines()[1]
    assert header == (
        "# Generated by `servestack render dev` from stacks/models/llama-3.1-8b.yaml (Ray 2.56.1)."
    )


def test_render_refuses_a_model_that_cannot_work_and_writes_the_rest(too_big: Path) -> None:
    result = run(too_big, "render", "big", "--out", "out")
    assert result.returncode == 1
    assert "llama-3.3-70b: not rendered: error [does-not-fit]" in result.stderr
    assert (too_big / "out/llama-3.1-8b/serve-config.yaml").is_file()
    assert not (too_big / "out/llama-3.3-70b").exists()


def test_render_one_model_writes_only_that_model(repo: Path) -> None:
    result = run(repo, "render", "prod", "--model", "qwen3-30b-a3b", "--out", "out")
    assert result.returncode == 0, result.stderr
    assert [p.name for p in (repo / "out").iterdir()] == ["qwen3-30b-a3b"]


def test_a_secret_written_in_plaintext_in_a_stack_file_is_refused(repo: Path) -> None:
    edit_yaml(repo / DEV_STACK, lambda d: d["config"].update({"servestack:hf_token": "hf_abc"}))
    result = run(repo, "plan")
    assert result.returncode == 2
    assert f"{DEV_STACK}: servestack:hf_token: is a secret but is written in plaintext" in (
        result.stderr
    )
    assert "pulumi config set --secret servestack:hf_token" in result.stderr
    assert "hf_abc" not in result.stderr


def test_an_encrypted_token_makes_the_rendered_pods_read_it_from_a_secret(repo: Path) -> None:
    encrypted = {"secure": "v1:c2VydmVzdGFjaw==:bm90IGEgcmVhbCBjaXBoZXJ0ZXh0"}
    edit_yaml(repo / DEV_STACK, lambda d: d["config"].update({"servestack:hf_token": encrypted}))
    assert run(repo, "render", "--out", "out").returncode == 0
    manifest = yaml.safe_load((repo / "out/llama-3.1-8b/rayservice.yaml").read_text())
    # The workers load the weights; the head runs no replica and gets no token.
    (worker,) = manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    env = worker["template"]["spec"]["containers"][0]["env"]
    (token,) = [e for e in env if e["name"] == "HF_TOKEN"]
    assert token["valueFrom"]["secretKeyRef"]["name"] == "llama-3-1-8b-hf-token"


def _table_rows(stdout: str) -> list[str]:
    """The first cells (rank) of a rich table's rows; continuation lines have an empty one."""
    cells = [line.split("│")[1].strip() for line in stdout.splitlines() if line.startswith("│")]
    return [cell for cell in cells if cell]


def test_recommend_leads_with_its_answer_and_shows_at_most_ten_rows(pristine: Path) -> None:
    result = run(pristine, "plan", "prod", "--recommend", "llama-3.3-70b-fp8")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("recommended: ")
    assert lines.index(next(line for line in lines if line.startswith("┏"))) > lines.index(
        "what would change it:"
    )
    ranks = _table_rows(result.stdout)
    assert 1 <= len(ranks) <= 10 and ranks[0] == "1"
    assert "refused [" not in result.stdout and "--all lists them" in result.stdout
    every = run(pristine, "plan", "prod", "--recommend", "llama-3.3-70b-fp8", "--all")
    listed = _table_rows(every.stdout)
    assert len(listed) == len(json.loads(run(
        pristine, "plan", "prod", "--recommend", "llama-3.3-70b-fp8", "--json"
    ).stdout))  # fmt: skip
    assert "refused [" in every.stdout


def test_an_unknown_bench_configuration_is_named_with_the_nearest_one(pristine: Path) -> None:
    result = run(pristine, "bench", "--local", "--variant", "fast-paths-on/power-of-tow")
    assert result.returncode == 2
    assert "--variant" in result.stderr
    assert "did you mean 'fast-paths-on/power-of-two'" in result.stderr
    assert "Traceback" not in result.stderr
