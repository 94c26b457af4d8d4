"""helpers.engine.vllm_issue_55005: the corrected CPU expand kernel, in this process."""

from __future__ import annotations

import pytest

from helpers.engine import vllm_issue_55005 as fix


def test_fixed_expand_kernel_keeps_dtype_and_replaces() -> None:
    import torch

    cu = torch.tensor([2, 2, 5], dtype=torch.int32)
    out = torch.full((5,), -9.0)
    fix._fixed_expand_kernel(out, torch.tensor([0.3, 0.5, 0.0]), cu, 0, 1)
    assert out.tolist() == pytest.approx([0.3, 0.3, 1.0, 1.0, 1.0])
    ints = torch.zeros(5, dtype=torch.int32)
    fix._fixed_expand_kernel(ints, torch.tensor([7, 8, 9], dtype=torch.int32), cu, 0, 0)
    assert ints.tolist() == [7, 7, 9, 9, 9]


def test_cpu_expand_fix_in_process() -> None:
    """After the patch, vLLM's own expand_batch_to_tokens returns the right temperatures here."""
    pytest.importorskip("vllm")
    fix.patch_cpu_expand_kernel()
    assert fix._cpu_expand_kernel_ok()
    assert not fix.patch_cpu_expand_kernel()  # idempotent
    assert fix._ExpandKernelCheck().workbook_cpu_expand_ok()


# --------------------------------------------------------------------------- in a real engine at T > 0

#: T = 0.7 answers of the tiny pair end on their own well within this many tokens when sampling is
#: right; with garbage temperatures the verifier's distribution is flattened or NaN and answers
#: run on (or the engine crashes).
MAX_TOKENS = 256
MIN_FINISHED_SHARE = 0.75
MIN_DISTINCT_4GRAMS = 0.5


@pytest.mark.vllm
def test_speculative_sampling_at_t07_in_process() -> None:
    from helpers.common.profiles import load_profile
    from helpers.common.prompts import load_prompts
    from helpers.engine.lifecycle import engine_kwargs, open_engine
    from helpers.engine.runs import run_prompts, sampling
    from kit.text_quality import _distinct_ngram_ratio

    prompts = [p for items in load_prompts(3).values() for p in items]
    kwargs = engine_kwargs(load_profile("tiny"), k=3, worker_extension_cls=fix.EXPAND_KERNEL_CHECK)
    with open_engine(**kwargs) as llm:
        seen = llm.collective_rpc("workbook_expanded_temperatures", args=([0.7, 0.3], 3))
        run = run_prompts(llm, prompts, sampling(MAX_TOKENS, temperature=0.7, seed=1))
    assert seen == [[0.7, 0.7, 0.7, 0.3, 0.3, 0.3]]  # what the worker's rejection sampler reads
    finished = sum(run.finished_naturally) / len(prompts)
    distinct = min(_distinct_ngram_ratio(text.split()) for text in run.texts)
    print(f"finished naturally {finished:.0%}, lowest distinct-4-gram ratio {distinct:.2f}")
    assert finished >= MIN_FINISHED_SHARE and distinct >= MIN_DISTINCT_4GRAMS, (finished, distinct)
    assert run.stats["spec_decode_num_drafts"] > 0
