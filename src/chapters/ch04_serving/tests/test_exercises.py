"""Notebook 04's exercises, each variant run at CI size by calling the same code its cells call
(what is not run here, and why, is listed in tests/test_exercises.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers.common.profiles import load_profile
from tests.support import needs_shipped, notebook_defs

# ------------------------------------------------------------------------------------ notebook 04


@needs_shipped
@pytest.mark.parametrize("k", [1, 5])
def test_04_ex1_commands_for_k(tiny, k: int) -> None:
    from chapters.ch04_serving.server import launch_command

    spec = launch_command(tiny, k=k, port=8000)
    config = json.loads(spec[spec.index("--speculative-config") + 1])
    assert config["num_speculative_tokens"] == k and config["method"] == "eagle3"
    assert "--speculative-config" not in launch_command(tiny, k=0, port=8001)


@needs_shipped
def test_04_ex2_short_form_override(tiny) -> None:
    from chapters.ch04_serving.server import _serve_command

    own = _serve_command(tiny, k=tiny.num_speculative_tokens, short_form=True)
    assert "--speculative-config" not in own  # the drafter's own k needs no override
    argv = _serve_command(tiny, k=5, short_form=True)
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {"num_speculative_tokens": 5}


def test_04_ex3_ttft_and_tpot_columns() -> None:
    results = pd.DataFrame(
        [{"mode": m, "concurrency": c, "repeat": 0, "output_tok_s": 10.0 * (1 + (m == "spec")),
          "mean_ttft_ms": 50.0, "mean_tpot_ms": 20.0 / (1 + (m == "spec"))}
         for m in ("spec", "plain") for c in (1, 4)]
    )  # fmt: skip
    speedup_table = notebook_defs("04_serving_and_benchmarks.ipynb")["speedup_table"]
    table = speedup_table(results).reset_index()
    cols = ["spec_ttft_ms", "plain_ttft_ms", "spec_tpot_ms", "plain_tpot_ms"]
    assert table.set_index("concurrency")[cols].notna().all().all()


def test_04_ex4_gpu_profile_command() -> None:
    from chapters.ch04_serving.server import serve_command_text

    profile = load_profile("qwen3-30b-a3b")
    text = serve_command_text(profile)
    assert profile.verifier in text and profile.drafter in text and "eagle3" in text
