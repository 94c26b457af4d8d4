"""04's serve command on every profile: it renders as the text it prints, it is the command the
documents this workbook follows, and it reads k as the engine does."""

from __future__ import annotations

import dataclasses
import json
import shlex

import pytest

from chapters.ch04_serving.server import _serve_command, serve_command_text
from helpers.common import profiles
from helpers.common.profiles import load_profile
from helpers.engine.lifecycle import engine_kwargs

#: The command in the documents this workbook follows (vLLM / Red Hat AI), verbatim.
DOCUMENTED_COMMAND = (
    "vllm serve Qwen/Qwen3-30B-A3B-Instruct-2507 -tp 1 --speculative-config "
    """'{"model": "RedHatAI/Qwen3-30B-A3B-Instruct-2507-speculator.eagle3", """
    """"num_speculative_tokens": 3, "method": "eagle3"}'"""
)


@pytest.mark.parametrize("name", profiles._available_profiles())
def test_serve_command_renders(name: str) -> None:
    p = profiles.load_profile(name)
    argv = _serve_command(p)
    assert shlex.split(serve_command_text(p)) == argv
    assert argv[:3] == ["vllm", "serve", p.verifier]
    assert argv[argv.index("-tp") + 1] == str(p.tensor_parallel_size)
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {
        "model": p.drafter,
        "num_speculative_tokens": p.num_speculative_tokens,
        "method": "eagle3",
    }


@pytest.mark.parametrize("k, drafts", [(None, 4), (0, None), (2, 2)])
def test_the_engine_and_the_server_read_k_alike(k: int | None, drafts: int | None) -> None:
    p = dataclasses.replace(profiles.load_profile("tiny"), num_speculative_tokens=4)
    engine = engine_kwargs(p, k=k, gpu=False).get("speculative_config") or {}
    argv = _serve_command(p, k=k)
    flag = "--speculative-config"
    served = json.loads(argv[argv.index(flag) + 1]) if flag in argv else {}
    assert engine.get("num_speculative_tokens") == drafts
    assert served.get("num_speculative_tokens") == drafts


def test_serve_command_is_the_documented_one() -> None:
    ours = _serve_command(load_profile("qwen3-30b-a3b"))
    documented = shlex.split(" ".join(DOCUMENTED_COMMAND.split()))
    spec_at = documented.index("--speculative-config") + 1
    assert ours[:spec_at] == documented[:spec_at]
    assert json.loads(ours[spec_at]) == json.loads(documented[spec_at])
    assert len(ours) == len(documented)
    assert " ".join(serve_command_text(load_profile("qwen3-30b-a3b")).split()) == " ".join(
        DOCUMENTED_COMMAND.split()
    )
