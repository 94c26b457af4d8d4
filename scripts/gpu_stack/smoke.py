#!/usr/bin/env python3
"""After install.sh, on the GPU machine: does the installed stack run the workbook's engine?

Starts the tiny pair with EAGLE-3 through helpers.engine.lifecycle (the notebooks' own path and
GPU defaults), answers four held-out prompts greedily, and prints one line: start seconds, the
model runner vLLM chose, τ, how many requests carried their own acceptance record, tokens/s.
Exits 1 when any of that is missing. Run from the project root with the stack's env.sh sourced.
"""

from __future__ import annotations

import sys
import time


def main() -> int:
    """Start, answer, check, print; 0 when the engine ran with per-request acceptance."""
    from helpers.common import notebook, profiles, prompts, vllm_names
    from helpers.engine import lifecycle, runs

    notebook.setup_notebook(verbose=False)
    profile = profiles.load_profile("tiny")
    chats = [p for ps in prompts.load_prompts(1).values() for p in ps]
    t0 = time.perf_counter()
    with lifecycle.open_engine(**lifecycle.engine_kwargs(profile, k=3)) as llm:
        started = time.perf_counter() - t0
        runner = llm.llm_engine.vllm_config.use_v2_model_runner
        run = runs.run_prompts(llm, chats, runs.sampling(64))
    tau = run.stats[vllm_names.STATS.tau]
    print(
        f"smoke: started in {started:.1f} s, model runner {'V2' if runner else 'V1'}, "
        f"τ {tau:.2f}, {len(run.requests)}/{len(chats)} requests with their own acceptance, "
        f"{run.output_tokens / run.seconds:.0f} tok/s"
    )
    return 0 if tau > 1 and len(run.requests) == len(chats) else 1


if __name__ == "__main__":
    sys.exit(main())
