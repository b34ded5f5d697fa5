"""The real engine's side of the local data plane, without starting it: the application vLLM's CPU
build gets is the compiled one with only the model and the named CPU changes replaced; the bare
server's command line means the same engine arguments to vLLM's own parser; the tiny models are
made deterministically; what a run leaves behind is found and removed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from compiled_support import compile_spec
from repo import REPO

from serving.catalog.environment import RAYLLM_VLLM_ENGINE_CLS
from serving.compile.patterns import llm_configs_of
from serving.local.bench.real_engine import bare_command
from serving.local.engine.cpu_binding import ENGINE_SLOTS, bound_server
from serving.local.engine.tiny_models import model_dir, tiny_model
from serving.local.runtime import cleanup
from serving.local.runtime.app import (
    CPU_BUILD_CHANGES,
    LOCAL_VLLM_ADDITIONS,
    local_application,
    local_env,
    tiny_family,
)
from serving.spec.loading import load_profile

MODELS = REPO / "stacks" / "models"
PROFILES = sorted(MODELS.glob("*.yaml"))
LLAMA = REPO / "stacks" / "models" / "llama-3.1-8b.yaml"
LEFTOVER = Path("/dev/shm/servestack-test-leftover")
NAMED = set(CPU_BUILD_CHANGES) | set(LOCAL_VLLM_ADDITIONS)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_the_real_engine_gets_the_compiled_arguments(profile: Path, tmp_path: Path) -> None:
    spec = load_profile(profile)
    simulated = local_application(compile_spec(spec))
    real = local_application(compile_spec(spec), "vllm", tmp_path)
    pairs = zip(llm_configs_of(real["args"]), llm_configs_of(simulated["args"]), strict=True)
    for (_, ours), (_, theirs) in pairs:
        assert ours["model_loading_config"] == {
            "model_id": spec.name,
            "model_source": str(tmp_path),
        }
        changed = {
            key
            for key in ours["engine_kwargs"].keys() | theirs["engine_kwargs"].keys()
            if ours["engine_kwargs"].get(key) != theirs["engine_kwargs"].get(key)
        }
        if "lora_modules" in changed:
            # Each compiled adapter is served as the tiny one of its name and rank: only the
            # path (a bucket's mount in the cluster, a local folder here) may differ.
            pathless = [
                [
                    {k: v for k, v in module.items() if k != "path"}
                    for module in kwargs["lora_modules"]
                ]
                for kwargs in (ours["engine_kwargs"], theirs["engine_kwargs"])
            ]
            assert pathless[0] == pathless[1]
            assert all(Path(m["path"]).is_dir() for m in ours["engine_kwargs"]["lora_modules"])
            changed.discard("lora_modules")
        assert changed <= NAMED, "only the named CPU changes may differ"
        if ENGINE_SLOTS in ours.get("runtime_env", {}).get("env_vars", {}):
            # Several engines: each replica's server binds its engine's CPUs first, nothing else.
            ours = dict(ours, runtime_env=dict(ours["runtime_env"]))
            ours["runtime_env"]["env_vars"] = dict(ours["runtime_env"]["env_vars"])
            del ours["runtime_env"]["env_vars"][ENGINE_SLOTS]
            if not ours["runtime_env"]["env_vars"]:
                del ours["runtime_env"]
            assert ours["server_cls"] == bound_server(theirs.get("server_cls"))
            ours["server_cls"] = theirs.get("server_cls")
            if ours["server_cls"] is None:
                del ours["server_cls"]
        rest = ("model_loading_config", "engine_kwargs")
        assert {k: v for k, v in ours.items() if k not in rest} == {
            k: v for k, v in theirs.items() if k not in rest
        }


def test_the_real_engines_environment_has_no_simulation() -> None:
    spec = load_profile(LLAMA)
    env = local_env(compile_spec(spec), None, engine="vllm")
    assert compile_spec(spec).cluster_env.items() <= env.items()
    assert RAYLLM_VLLM_ENGINE_CLS not in env
    assert env["HF_HUB_OFFLINE"] == "1"
    assert Path(env["VLLM_CACHE_ROOT"]).is_relative_to(REPO / "build")


def test_the_bare_server_parses_to_the_same_engine_arguments(tmp_path: Path) -> None:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    spec = load_profile(LLAMA)
    command = bare_command(spec, tmp_path, 8123)
    assert command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    parsed = make_arg_parser(FlexibleArgumentParser()).parse_args(command[3:])
    served = local_application(compile_spec(spec), "vllm", tmp_path)["args"]["llm_configs"][0]
    for key, value in served["engine_kwargs"].items():
        assert getattr(parsed, key) == value, key
    assert parsed.model == str(tmp_path)
    assert parsed.served_model_name == [spec.name]


def test_tiny_models_stand_in_for_their_family() -> None:
    families = {tiny_family(load_profile(p)) for p in PROFILES}
    assert families == {"llama", "qwen3_moe"}
    assert model_dir("llama") != model_dir("qwen3_moe")


@pytest.mark.timeout(300)
def test_the_tiny_llama_is_made_the_same_way_twice(tmp_path: Path) -> None:
    first = tiny_model("llama", tmp_path / "a")
    second = tiny_model("llama", tmp_path / "b")
    assert first.name == second.name
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    config = json.loads((first / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(first)
    text = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                         add_generation_prompt=True)  # fmt: skip
    assert text.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    # The benchmark's words survive the round trip (a byte-level BPE loses nothing).
    assert tokenizer.decode(tokenizer("t123456 story")["input_ids"]) == "t123456 story"


def test_what_a_run_leaves_behind_is_found_and_removed() -> None:
    # A grandchild that outlives its parent (as vLLM's engines outlive a killed replica),
    # holding a /dev/shm segment.
    grandchild = (
        f"import time; f = open({str(LEFTOVER)!r}, 'wb'); f.write(bytes(4096)); f.flush(); "
        "print(1, flush=True); time.sleep(600)"
    )
    script = (
        "import subprocess, sys; "
        f"subprocess.Popen([sys.executable, '-c', {grandchild!r}], stdin=subprocess.DEVNULL); "
        "sys.stdin.read()"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None and parent.stdout.readline().strip() == "1"
    deadline = time.monotonic() + 10
    counted = cleanup.census(parent.pid)
    while LEFTOVER not in counted.shm and time.monotonic() < deadline:
        time.sleep(0.2)
        counted = cleanup.census(parent.pid)
    assert LEFTOVER in counted.shm
    assert parent.stdin is not None
    parent.stdin.close()  # the parent exits; its child is orphaned
    parent.wait()
    assert cleanup.alive(counted), "the grandchild outlives its parent"
    ended, removed = cleanup.clean_up(counted, grace_s=5)
    assert ended and cleanup.alive(counted) == []
    assert LEFTOVER in removed
    assert not LEFTOVER.exists()


def _sleeper(env: dict[str, str] | None = None, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, text=True,
        env=None if env is None else os.environ | env, **kwargs,
    )  # fmt: skip


def test_a_runs_census_leaves_out_what_its_host_started_before_the_run() -> None:
    # pytest hosting one run after another: an earlier test's process is still running and still
    # starting processes of its own when the next run begins.
    spawner = (
        "import subprocess, sys\n"
        "for line in sys.stdin:\n"
        "    child = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'],\n"
        "                             stdin=subprocess.PIPE)\n"
        "    print(child.pid, flush=True)\n"
    )
    earlier = subprocess.Popen(
        [sys.executable, "-c", spawner], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    run = cleanup.RunCensus()
    ours = _sleeper()
    started: list[subprocess.Popen[str]] = [earlier, ours]
    try:
        assert earlier.stdin is not None and earlier.stdout is not None
        earlier.stdin.write("\n")
        earlier.stdin.flush()
        earlier_child = int(earlier.stdout.readline())
        counted = run.take()
        assert ours.pid in counted.processes
        assert earlier.pid not in counted.processes
        assert earlier_child not in counted.processes
        ended, _ = cleanup.clean_up(counted, grace_s=5)
        assert ended == [ours.pid]
        assert earlier.poll() is None, "the earlier test's process was ended by this run"
    finally:
        for process in started:
            process.kill()
            process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(earlier_child, signal.SIGKILL)


def test_an_orphan_of_the_run_is_counted_by_its_mark_with_its_shm_segment() -> None:
    # A replica's engine process outliving the replica that started it: adopted by init, no
    # longer below the host, before the run's census is ever taken.
    run = cleanup.RunCensus()
    grandchild = (
        f"import time; f = open({str(LEFTOVER)!r}, 'wb'); f.write(bytes(4096)); f.flush(); "
        "print(1, flush=True); time.sleep(600)"
    )
    script = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {grandchild!r}])"
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
        env=os.environ | run.environment,
    )  # fmt: skip
    assert parent.stdout is not None and parent.stdout.readline().strip() == "1"
    parent.wait()
    unmarked = _sleeper()  # below the host, but not the run's mark: still counted as the run's
    try:
        counted = run.take()
        orphans = [pid for pid in counted.processes if pid not in (parent.pid, unmarked.pid)]
        assert len(orphans) == 1 and LEFTOVER in counted.shm
        ended, removed = cleanup.clean_up(counted, grace_s=5)
        assert sorted(ended) == sorted([*orphans, unmarked.pid])
        assert removed == [LEFTOVER] and not LEFTOVER.exists()
    finally:
        unmarked.kill()
        unmarked.wait()
        cleanup.clean_up(run.take(), grace_s=1)  # the orphan, should an assertion fail
        LEFTOVER.unlink(missing_ok=True)


def test_a_child_that_will_not_stop_is_ended_with_its_process_group() -> None:
    stubborn = (
        "import signal, subprocess, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)']); "
        "print(child.pid, flush=True); sys.stdin.read()"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", stubborn], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    assert process.stdout is not None
    child = int(process.stdout.readline())
    child_start = cleanup.census(process.pid).processes[child]
    cleanup.stop(process, timeout_s=1)
    assert process.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while cleanup.alive(cleanup.Census({child: child_start})) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cleanup.alive(cleanup.Census({child: child_start})) == []
