"""`servestack` on bad input, run as users run it (the console script in a subprocess, from a
copy of the stacks): exit code 2 and one message on stderr naming the file as typed, the field
and a fix, never a traceback."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_support import DEV_STACK, NARROW, copy_repo, edit_yaml, run

DEV_PROFILE = "stacks/models/llama-3.1-8b.yaml"


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
    assert "fix: use one of the stacks in stacks/: dev, h200, lora, prod" in result.stderr
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


def test_a_secret_written_in_plaintext_in_a_stack_file_is_refused(repo: Path) -> None:
    edit_yaml(repo / DEV_STACK, lambda d: d["config"].update({"servestack:hf_token": "hf_abc"}))
    result = run(repo, "plan")
    assert result.returncode == 2
    assert f"{DEV_STACK}: servestack:hf_token: is a secret but is written in plaintext" in (
        result.stderr
    )
    assert "pulumi config set --secret servestack:hf_token" in result.stderr
    assert "hf_abc" not in result.stderr


def test_an_unknown_bench_configuration_is_named_with_the_nearest_one(pristine: Path) -> None:
    result = run(pristine, "bench", "--local", "--variant", "fast-paths-on/power-of-tow")
    assert result.returncode == 2
    assert "--variant" in result.stderr
    assert "did you mean 'fast-paths-on/power-of-two'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "form",
    [["local", "bench"], ["bench", "--local"]],
    ids=["local-group", "alias"],
)
def test_the_local_group_and_its_alias_check_the_same_flags(
    pristine: Path, form: list[str]
) -> None:
    """`servestack local bench` is `servestack bench --local`: the same options, checked by the
    same code, before any Ray starts."""
    result = run(pristine, *form, "--variant", "fast-paths-on/power-of-tow")
    assert result.returncode == 2
    assert "did you mean 'fast-paths-on/power-of-two'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("flags", "named", "fix"),
    [
        (["--level", "8", "--level", "2"], "--level", "--level 2 --level 8"),
        (["--repeats", "0"], "--repeats", "--repeats"),
    ],
    ids=["falling-levels", "no-repeats"],
)
def test_the_capacity_sweep_checks_its_flags_before_any_ray_starts(
    pristine: Path, flags: list[str], named: str, fix: str
) -> None:
    result = run(pristine, "local", "capacity", *flags)
    assert result.returncode == 2, result.stderr
    assert named in result.stderr and fix in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["serve", "bench", "capacity", "faults"])
def test_a_local_command_without_local_names_the_local_group(pristine: Path, command: str) -> None:
    result = run(pristine, command)
    assert result.returncode == 2
    assert f"servestack local {command}" in result.stderr


def test_the_local_group_has_no_local_flag_to_forget(pristine: Path) -> None:
    result = run(pristine, "local", "serve", "--local")
    assert result.returncode == 2
    assert "No such option: --local" in result.stderr


def test_local_top_watches_local_runs_only(pristine: Path) -> None:
    """A deployed service's exporter is `servestack top --url`; the local group has no --url."""
    result = run(pristine, "local", "top", "--url", "http://127.0.0.1:8080/metrics")
    assert result.returncode == 2
    assert "No such option: --url" in result.stderr
