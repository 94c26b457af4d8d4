"""Is sampling with a drafter distributed like sampling without one? Total variation distance and a
permutation test (notebook 07).

At T > 0 speculative decoding is lossless in distribution, not token for token: the random stream
differs. The check compares two samples of tokens drawn at the same position with and without the
drafter. TVD = ½ Σ |p − q| of the two empirical distributions; the permutation test pools both
samples, reshuffles which draw belongs to which side many times, and reports how often a
reshuffled TVD is at least the observed one (`helpers.analytics.permutation`, which the grader's
check of notebook 03's rejection-sampling exercise reads too). A small p-value says the samples
differ by more than sampling noise would explain; a test that cannot reject a known difference has
no power, so the notebook also runs it on a deliberately different sampler.

A speculative step decides the tokens at positions 1..k + 1 of a request (position 0 comes from the
prefill, before any draft exists), so `position_tests` compares each of them, and a verdict
rejects when any position does at the Bonferroni level alpha / positions. A test of losslessness
says nothing when no draft was scheduled or accepted while the samples were drawn: `lossless_test`
takes the engine's counter delta over the sampling and `exercised` requires both to be positive.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from helpers.analytics.permutation import permutation_test
from helpers.common.counters import SpecCounters
from helpers.common.prompts import as_messages

__all__ = [
    "position_tests",
    "rejects_any",
    "lossless_test",
    "draw_samples",
]


@dataclass(frozen=True)
class _TestResult:
    """The observed TVD, the permutation p-value, and the sample sizes."""

    tvd: float
    p_value: float
    n_a: int
    n_b: int

    def rejects(self, alpha: float = 0.05) -> bool:
        """True when the samples differ beyond noise at level alpha."""
        return self.p_value < alpha

    def __str__(self) -> str:
        p = f"= {self.p_value:.3f}" if self.p_value >= 0.001 else "< 0.001"
        return f"TVD {self.tvd:.3f}, p {p} (n = {self.n_a} vs {self.n_b})"


def _permutation_test(
    a: Sequence[Hashable], b: Sequence[Hashable], permutations: int = 2000, seed: int = 0
) -> _TestResult:
    """The trunk's permutation test of a vs b, as a verdict with its sample sizes."""
    tvd, p_value = permutation_test(a, b, permutations, seed)
    return _TestResult(tvd, p_value, len(a), len(b))


#: Draws of one side: [prompt][sample] -> the generated token ids of that sample.
_Draws = Sequence[Sequence[Sequence[int]]]


def _tokens_at(draws: _Draws, position: int) -> list[tuple[int, int]]:
    """(prompt, token at `position`) of every draw that reached it."""
    return [
        (i, ids[position])
        for i, per_prompt in enumerate(draws)
        for ids in per_prompt
        if len(ids) > position
    ]


def position_tests(
    a: _Draws, b: _Draws, positions: Sequence[int], permutations: int = 2000
) -> dict[int, _TestResult]:
    """A permutation test of a vs b at each position (the token's distribution per prompt)."""
    return {
        p: _permutation_test(_tokens_at(a, p), _tokens_at(b, p), permutations, seed=p)
        for p in positions
    }


def rejects_any(tests: Mapping[int, _TestResult], alpha: float) -> bool:
    """True when some position rejects at the Bonferroni level alpha / number of positions."""
    return any(t.rejects(alpha / len(tests)) for t in tests.values())


@dataclass(frozen=True)
class _LosslessTest:
    """Speculative vs plain sampling, position by position, and whether drafting was exercised."""

    tests: dict[int, _TestResult]
    alpha: float
    drafts: int
    accepted: int

    @property
    def exercised(self) -> bool:
        """True when drafts were scheduled and some were accepted while the samples were drawn."""
        return self.drafts > 0 and self.accepted > 0

    @property
    def rejects(self) -> bool:
        """True when some position differs beyond noise (Bonferroni over the positions)."""
        return rejects_any(self.tests, self.alpha)

    @property
    def passes(self) -> bool:
        """Drafting was exercised and no position tells the two samplers apart."""
        return self.exercised and not self.rejects

    def __str__(self) -> str:
        by_pos = "; ".join(f"position {p}: {t}" for p, t in self.tests.items())
        return (
            f"{self.drafts} drafts, {self.accepted} drafted tokens accepted while sampling; "
            f"level {self.alpha} / {len(self.tests)} per position; {by_pos}"
        )


def lossless_test(
    spec: _Draws,
    plain: _Draws,
    counters: SpecCounters,
    positions: Sequence[int],
    alpha: float,
    permutations: int = 2000,
) -> _LosslessTest:
    """Test speculative draws against plain ones at `positions`, with the engine's counter delta
    over the speculative sampling (a run without drafts cannot pass)."""
    return _LosslessTest(
        position_tests(spec, plain, positions, permutations),
        alpha,
        counters.num_drafts,
        counters.num_accepted_tokens,
    )


def draw_samples(
    llm: Any, prompts: Sequence[str], n: int, temperature: float, max_tokens: int
) -> list[list[list[int]]]:
    """n samples of each prompt from the engine's own seeded generator: [prompt][sample] ids.

    No per-request seeds: on a CPU a seeded request whose sampled token is discarded (a batch split
    by chunked prefill) crashed the worker (`helpers.engine.compat.QUIRKS["seeded_cpu_requests"]`).
    Two engines give independent samples when they are started with different `seed`s.
    """
    from vllm import SamplingParams

    messages = [as_messages(p) for p in prompts for _ in range(n)]
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens)
    outs = llm.chat(messages, params, use_tqdm=False)
    ids = [list(o.outputs[0].token_ids) for o in outs]
    return [ids[i * n : (i + 1) * n] for i in range(len(prompts))]
