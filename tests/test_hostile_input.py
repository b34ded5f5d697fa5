"""Profiles and stacks written to break the tool, run through the `servestack` command as users
run it. Each is refused with exit code 2 and one message naming the file, the field and a fix,
never a traceback; a refused input leaves nothing rendered behind."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_support import copy_repo, edit_yaml, run

DEV_PROFILE = "stacks/models/llama-3.1-8b.yaml"
DEV_STACK = "stacks/Pulumi.dev.yaml"
# Built at run time so that no credential-shaped string sits in the repository.
FAKE_OPENAI_KEY = "sk-" + "live-" + "Zq7Rk2Wm" * 3
FAKE_HF_TOKEN = "hf_" + "xVb3Nq8TzLp2Rk5Wm9Yc4Hd7Js1Fg6Qa0"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return copy_repo(tmp_path / "repo")


def _profile(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda root: edit_yaml(root / DEV_PROFILE, change)


def _stack(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda root: edit_yaml(root / DEV_STACK, lambda d: change(d["config"]))


def _append(path: str, data: bytes) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        with (root / path).open("ab") as handle:
            handle.write(data)

    return apply


def _alias_bomb(root: Path) -> None:
    # 490 bytes that expand to millions of list items (the "billion laughs" shape).
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for depth in range(1, 7):
        previous = chr(ord("a") + depth - 1)
        name = chr(ord("a") + depth)
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 10) + "]")
    text = (root / DEV_PROFILE).read_text()
    (root / DEV_PROFILE).write_text(
        text + "engine_args:\n  hf_overrides:\n" + "".join(f"    {line}\n" for line in levels)
    )


def _deep_nesting(root: Path) -> None:
    # 40 KB of brackets: PyYAML composes recursively and would die in a RecursionError.
    path = root / DEV_PROFILE
    path.write_text(
        path.read_text() + "engine_args:\n  hf_overrides: " + "[" * 20_000 + "]" * 20_000
    )


def _duplicate_key(root: Path) -> None:
    path = root / DEV_PROFILE
    path.write_text(path.read_text() + "max_model_len: 1024\n")


def _huge_file(root: Path) -> None:
    path = root / DEV_PROFILE
    path.write_text(path.read_text() + "# padding\n" * 8000)


def _two_models(first: str, second: str) -> Callable[[Path], None]:
    """Two copies of the dev profile, serving the models `first` and `second`."""

    def apply(root: Path) -> None:
        for served in (first, second):
            shutil.copy(root / DEV_PROFILE, root / f"stacks/models/{served}.yaml")
            edit_yaml(root / f"stacks/models/{served}.yaml", lambda d, s=served: d.update(name=s))
        edit_yaml(
            root / DEV_STACK, lambda d: d["config"].update({"servestack:models": [first, second]})
        )

    return apply


# (id, how to break the copy, file, field, words the message must carry)
HOSTILE: list[tuple[str, Callable[[Path], None], str, str, list[str]]] = [
    (
        "profile-not-utf8",
        _append(DEV_PROFILE, "# café\n".encode("latin-1")),
        DEV_PROFILE,
        "line ",
        ["is not UTF-8: byte 0xe9 at byte offset", "save the file as UTF-8"],
    ),
    (
        "stack-not-utf8",
        _append(DEV_STACK, b"# \xff\xfe\n"),
        DEV_STACK,
        "line ",
        ["is not UTF-8: byte 0xff at byte offset"],
    ),
    (
        "yaml-alias-bomb",
        _alias_bomb,
        DEV_PROFILE,
        "line ",
        ["alias *a is not allowed", "anchors and aliases are refused"],
    ),
    (
        "yaml-nested-too-deep",
        _deep_nesting,
        DEV_PROFILE,
        "line ",
        ["nested more than 32 levels deep", "flatten the value"],
    ),
    (
        "duplicate-yaml-key",
        _duplicate_key,
        DEV_PROFILE,
        "line ",
        ["key 'max_model_len' is written twice", "keep one of the two"],
    ),
    ("file-too-large", _huge_file, DEV_PROFILE, "", ["is larger than 64 KiB"]),
    (
        "path-traversal-model-name",
        _stack(lambda c: c.update({"servestack:models": ["../../elsewhere/x"]})),
        DEV_STACK,
        "servestack:models.0",
        ["'../../elsewhere/x' is not a profile name", "no '/' or '..'"],
    ),
    (
        "model-listed-twice",
        _stack(lambda c: c.update({"servestack:models": ["llama-3.1-8b", "llama-3.1-8b"]})),
        DEV_STACK,
        "servestack:models.1",
        ["'llama-3.1-8b' is listed twice", "list each model once"],
    ),
    (
        "names-collide-in-kubernetes",
        _two_models("dup.1", "dup-1"),
        DEV_STACK,
        "servestack:models",
        ["'dup.1'", "'dup-1'", "both become the RayService and Ingress 'dup-1'", "rename one"],
    ),
    (
        "served-name-not-a-kubernetes-name",
        _profile(lambda d: d.update(name="8b-llama")),
        DEV_PROFILE,
        "name",
        ["becomes the RayService '8b-llama'", "start name with a letter"],
    ),
    (
        "served-name-too-long-for-kuberay",
        _profile(lambda d: d.update(name="l" * 50)),
        DEV_PROFILE,
        "name",
        ["50 characters; KubeRay takes at most 47"],
    ),
    (
        "line-break-in-the-served-name",
        _profile(lambda d: d.update(name="llama-3.1-8b\n")),
        DEV_PROFILE,
        "name",
        ["is not a served model id"],
    ),
    (
        "line-break-in-the-source",
        _profile(lambda d: d.update(source="meta-llama/Llama-3.1-8B-Instruct\n")),
        DEV_PROFILE,
        "source",
        ["neither a Hugging Face repo nor a gs:// path"],
    ),
    (
        "line-break-in-the-edge-host",
        _stack(lambda c: c.update({"servestack:edge_host": "llm.example.com\nacl evil"})),
        DEV_STACK,
        "servestack:edge_host",
        ["is not a DNS host name"],
    ),
    (
        "line-break-in-the-image",
        _stack(lambda c: c.update({"servestack:ray_image": "rayproject/ray-llm:2.56.1\nx"})),
        DEV_STACK,
        "servestack:ray_image",
        ["is not a container image reference"],
    ),
    (
        "bool-for-an-int",
        _profile(lambda d: d.update(parallelism={"tensor": True})),
        DEV_PROFILE,
        "parallelism.tensor",
        ["valid integer", "got True"],
    ),
    (
        "string-for-an-int",
        _profile(lambda d: d.update(max_num_seqs="64")),
        DEV_PROFILE,
        "max_num_seqs",
        ["valid integer", "got '64'"],
    ),
    (
        "bool-for-a-stack-count",
        _stack(lambda c: c.update({"servestack:system_min_nodes": True})),
        DEV_STACK,
        "servestack:system_min_nodes",
        ["valid integer"],
    ),
    (
        "infinite-parameter-count",
        _profile(
            lambda d: d.update(
                architecture={
                    "total_params": float("inf"),
                    "active_params": 8.0e9,
                    "num_layers": 32,
                    "hidden_size": 4096,
                    "num_attention_heads": 32,
                    "num_kv_heads": 8,
                    "head_dim": 128,
                    "intermediate_size": 14336,
                    "vocab_size": 128256,
                    "max_position_embeddings": 131072,
                }
            )
        ),
        DEV_PROFILE,
        "architecture.total_params",
        ["finite number"],
    ),
    (
        "infinite-price",
        _stack(lambda c: c.update({"servestack:prices": {"a3-highgpu-1g": float("inf")}})),
        DEV_STACK,
        "servestack:prices.a3-highgpu-1g",
        ["finite number"],
    ),
    (
        "secret-by-value-under-an-ordinary-name",
        _profile(lambda d: d.update(env={"MY_SETTING": FAKE_OPENAI_KEY})),
        DEV_PROFILE,
        "env.MY_SETTING",
        ["looks like an OpenAI-style secret key", "servestack:hf_token"],
    ),
    (
        "hf-token-under-another-name",
        _profile(lambda d: d.update(env={"MODEL_DOWNLOAD": FAKE_HF_TOKEN})),
        DEV_PROFILE,
        "env.MODEL_DOWNLOAD",
        ["looks like a Hugging Face token"],
    ),
    (
        "token-nested-in-engine-args",
        _profile(lambda d: d.update(engine_args={"hf_overrides": {"auth": FAKE_HF_TOKEN}})),
        DEV_PROFILE,
        "engine_args.hf_overrides.auth",
        ["looks like a Hugging Face token", "plaintext in the Serve config"],
    ),
    (
        "pythonpath-in-env",
        _profile(lambda d: d.update(env={"PYTHONPATH": "/tmp/mine"})),
        DEV_PROFILE,
        "env.PYTHONPATH",
        ["PYTHONPATH is set by servestack", "request router", "remove PYTHONPATH"],
    ),
    (
        "engine-class-in-env",
        _profile(lambda d: d.update(env={"RAYLLM_VLLM_ENGINE_CLS": "evil:Engine"})),
        DEV_PROFILE,
        "env.RAYLLM_VLLM_ENGINE_CLS",
        ["is set by servestack", "vLLM"],
    ),
]


def _check_refused(result: Any, file: str, field: str, words: list[str]) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert f"{file}: {field}" in result.stderr, result.stderr
    assert "fix: " in result.stderr
    assert all(word in result.stderr for word in words), result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("breakage", "file", "field", "words"),
    [pytest.param(*case[1:], id=case[0]) for case in HOSTILE],
)
def test_plan_refuses_hostile_input_naming_file_field_and_fix(
    repo: Path, breakage: Callable[[Path], None], file: str, field: str, words: list[str]
) -> None:
    breakage(repo)
    result = run(repo, "plan")
    _check_refused(result, file, field, words)
    assert result.stdout == ""


RENDER_CASES = ["profile-not-utf8", "yaml-alias-bomb", "names-collide-in-kubernetes"]


@pytest.mark.parametrize("case", RENDER_CASES)
def test_render_writes_nothing_for_hostile_input(repo: Path, case: str) -> None:
    (_, breakage, file, field, words) = next(c for c in HOSTILE if c[0] == case)
    breakage(repo)
    result = run(repo, "render", "--out", "out")
    _check_refused(result, file, field, words)
    assert not (repo / "out").exists()


@pytest.mark.parametrize("case", ["stack-not-utf8", "names-collide-in-kubernetes"])
def test_preview_registers_nothing_for_hostile_input(repo: Path, case: str) -> None:
    (_, breakage, file, field, words) = next(c for c in HOSTILE if c[0] == case)
    breakage(repo)
    result = run(repo, "preview")
    _check_refused(result, file, field, words)
    assert result.stdout == ""


def test_render_out_onto_an_existing_file_is_refused(repo: Path) -> None:
    (repo / "taken").write_text("keep me\n")
    result = run(repo, "render", "--out", "taken")
    _check_refused(result, "command line", "--out", ["taken is a file, not a directory"])
    assert (repo / "taken").read_text() == "keep me\n"


def test_render_out_below_an_existing_file_is_refused(repo: Path) -> None:
    (repo / "taken").write_text("keep me\n")
    result = run(repo, "render", "--out", "taken/deeper")
    _check_refused(result, "command line", "--out", ["taken is a file, not a directory"])


def test_render_shows_the_warnings_of_the_models_it_writes(repo: Path) -> None:
    # TP=2 for a model that fits one GPU: it works, wastefully; the planner warns.
    edit_yaml(repo / DEV_PROFILE, lambda d: d.update(parallelism={"tensor": 2}))
    result = run(repo, "render", "--out", "out")
    assert result.returncode == 0, result.stderr
    assert "wrote out/llama-3.1-8b/rayservice.yaml" in result.stdout
    assert "llama-3.1-8b: warning [over-sharded]" in result.stderr


def test_an_exponent_without_sign_is_a_number_as_in_yaml_1_2(repo: Path) -> None:
    """Strict types must not refuse what YAML 1.2 reads as a float (1.1 reads `9e-1` as text)."""
    _append(DEV_PROFILE, b"gpu_memory_utilization: 9e-1\n")(repo)
    assert run(repo, "plan").returncode == 0


def test_a_policy_config_that_is_not_utf8_is_named_with_its_byte_offset(repo: Path) -> None:
    (repo / "pc.json").write_bytes(b'{"topology-rayservice-fits": "advisory\xff"}')
    result = run(repo, "preview", "--policy-config", "pc.json")
    _check_refused(result, "pc.json", "line 1", ["is not UTF-8: byte 0xff at byte offset 38"])
