"""Speculative decoding from scratch: greedy EAGLE-3 draft-and-verify in PyTorch on the tiny pair
(notebook 03).

One request at a time, no KV cache (at this size recomputing over the prefix is cheap):

1. the verifier runs over the prompt; its argmax at the last position is the first output token
   (no draft existed yet: vLLM's prefill step, labelled "prefill");
2. a round: the drafter proposes k tokens greedily from the last *root* -- the position before the
   newest token -- fed, as in vLLM's `SpecDecodeBaseProposer.set_inputs_first_pass`, the verifier's
   aux hidden states at every position p <= root (fused by `fc`) paired with the embedding of token
   p + 1; each later draft step feeds back the drafter's pre-norm output and the embedding of its
   last draft, mapped to a verifier id by `d2t` (`draft`, one `drafter.draft_step` per draft);
3. the verifier scores prefix + k drafts in one forward; drafts are accepted while each equals the
   verifier's argmax; the verifier's own token at the first mismatch is emitted as a *correction*,
   or after k accepted drafts as a *bonus* token (k + 1 tokens from one verifier step).

At T > 0 the accept rule is rejection sampling (`accept_sampled`, vLLM's
`vllm/v1/sample/rejection_sampler.py`): a draft d is accepted with probability min(1, p(d) / q(d))
(q one-hot for vLLM's greedy EAGLE-3 drafts, so p(d)), and at the first rejection a token is
sampled from max(p − q, 0), renormalised; after k accepted drafts a bonus token from p.

Counting follows vLLM's scheduler (`update_from_output` -> `SpecDecodingStats.observe_draft`): every
round counts one draft of k tokens and all its accepted drafts, even the ones past `max_tokens` or
an end-of-sequence token that the output then drops; the prefill step counts nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from helpers.common.counters import SpecCounters
from helpers.common.profiles import Profile
from helpers.common.prompts import as_messages
from helpers.common.threads import torch_threads
from helpers.eagle3 import drafter
from helpers.eagle3.checkpoint import load_drafter, load_verifier
from helpers.eagle3.taps import drafter_aux_layer_ids, verifier_taps

__all__ = [
    "Round",
    "ReferenceOutput",
    "ReferencePair",
    "load_pair",
    "chat_prompt_ids",
    "verify",
    "draft",
    "accept_greedy",
    "accept_sampled",
    "speculative_generate",
]


@dataclass(frozen=True)
class Round:
    """One draft-and-verify step: the k drafted tokens, how many were accepted, what was emitted."""

    drafted: tuple[int, ...]
    accepted: int
    emitted: tuple[int, ...]

    @property
    def labels(self) -> list[str]:
        """One label per emitted token: accepted drafts, then a correction or a bonus token."""
        last = "bonus" if self.accepted == len(self.drafted) else "correction"
        return ["accepted"] * self.accepted + [last]


@dataclass
class ReferenceOutput:
    """What the reference produced for one request."""

    prompt_ids: list[int]
    token_ids: list[int]
    labels: list[str]
    rounds: list[Round] = field(default_factory=list)
    k: int = 0

    def counters(self) -> SpecCounters:
        """This request's spec-decode counters, counted the way vLLM counts them."""
        per_pos = [0] * self.k
        for r in self.rounds:
            for i in range(r.accepted):
                per_pos[i] += 1
        return SpecCounters(
            len(self.rounds),
            self.k * len(self.rounds),
            sum(r.accepted for r in self.rounds),
            tuple(per_pos),
        )


@dataclass
class ReferencePair:
    """The verifier (transformers, float32) and drafter (plain PyTorch) with what decoding needs."""

    verifier: Any
    drafter: drafter.Eagle3Drafter
    aux_layers: list[int]
    stop_ids: set[int]
    tokenizer: Any


def load_pair(profile: Profile) -> ReferencePair:
    """Load a local profile's verifier and drafter into this process (float32, CPU).

    Refuses hub profiles in one line: a real verifier would need hundreds of GB of CPU memory here.
    """
    from transformers import AutoTokenizer

    if not (profile.is_local and profile.has_weights):
        raise ValueError(
            f"profile {profile.name!r}: decoding from scratch runs on a local trained pair only "
            f"(the tiny profile); a hub or shape verifier is not loaded into CPU memory"
        )
    verifier = load_verifier(Path(profile.verifier_path()), device="cpu")
    d, config = load_drafter(Path(profile.drafter_path()))
    tok = AutoTokenizer.from_pretrained(profile.verifier_path())
    return ReferencePair(
        verifier, d, list(drafter_aux_layer_ids(config)), _stop_ids(verifier, tok), tok
    )


def _stop_ids(verifier: Any, tokenizer: Any) -> set[int]:
    """End-of-sequence ids vLLM stops on: the generation config's eos ids and the tokenizer's."""
    eos = verifier.generation_config.eos_token_id
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids


def chat_prompt_ids(tokenizer: Any, prompt: str) -> list[int]:
    """The token ids `LLM.chat` sends for a one-message user prompt (chat template, generation
    prompt)."""
    enc = tokenizer.apply_chat_template(as_messages(prompt), add_generation_prompt=True)
    return list(enc["input_ids"] if hasattr(enc, "keys") else enc)


@torch.no_grad()
def verify(pair: ReferencePair, ids: Sequence[int]) -> tuple[list[int], torch.Tensor]:
    """One verifier forward: its argmax token at every position and the aux states [1, T, 3H]."""
    aux, logits = verifier_taps(pair.verifier, torch.tensor([list(ids)]), pair.aux_layers)
    return logits[0].argmax(-1).tolist(), aux


# Twin of draft() in notebook 03 (its chapter.json's twins): change both.
@torch.no_grad()
def draft(pair: ReferencePair, ids: Sequence[int], aux: torch.Tensor, k: int) -> list[int]:
    """k greedy drafts from the last root (position len(ids) - 2): aux[p] pairs with token p + 1."""
    d, embed, drafts = pair.drafter, pair.verifier.get_input_embeddings(), []
    cache = drafter.KVCache(d)  # what vLLM's drafter KV cache holds for this request
    embeds = embed(torch.tensor([list(ids[1:])]))  # shifted: position p reads token p + 1
    hidden = d.fc(aux[:, : len(ids) - 1])  # fc: the three taps, 3H wide, fused to H
    for _ in range(k):
        logits, prenorm = drafter.draft_step(d, embeds, hidden, cache.attend)
        token = d.target_ids(logits[:, -1:].argmax(-1))  # d2t: draft id -> verifier id
        drafts.append(int(token))
        embeds, hidden = embed(token), prenorm[:, -1:]  # feed back the pre-norm output
    return drafts


# Twin of accept_greedy() in notebook 03 (its chapter.json's twins): change both.
def accept_greedy(drafts: Sequence[int], targets: Sequence[int]) -> Round:
    """Accept drafts while each equals the verifier's argmax; then emit the verifier's own token."""
    a = 0
    while a < len(drafts) and drafts[a] == targets[a]:
        a += 1
    return Round(tuple(drafts), a, tuple(drafts[:a]) + (targets[a],))


def accept_sampled(
    drafts: Sequence[int],
    probs: torch.Tensor,
    draft_probs: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Round:
    """Rejection sampling at T > 0: accept draft i with probability min(1, p_i(d) / q_i(d)), left
    to right; at the first rejection emit a token drawn from max(p_i − q_i, 0), else a bonus token
    drawn from p_k.

    probs [k + 1, V]: the verifier's temperature-T distribution at each draft and after the last;
    draft_probs [k, V]: the drafter's q (None: greedy drafts, q one-hot, as vLLM's EAGLE-3).
    """
    for i, d in enumerate(drafts):
        q = torch.zeros_like(probs[i]) if draft_probs is None else draft_probs[i]
        if draft_probs is None:
            q[d] = 1.0
        if q[d] > 0 and torch.rand((), generator=generator) < probs[i, d] / q[d]:
            continue
        token = torch.multinomial((probs[i] - q).clamp(min=0), 1, generator=generator)
        return Round(tuple(drafts), i, tuple(drafts[:i]) + (int(token),))
    bonus = torch.multinomial(probs[len(drafts)], 1, generator=generator)
    return Round(tuple(drafts), len(drafts), tuple(drafts) + (int(bonus),))


# Twin of speculative_generate() in notebook 03 (its chapter.json's twins): change both.
def speculative_generate(
    pair: ReferencePair, prompt_ids: Sequence[int], k: int, max_tokens: int
) -> ReferenceOutput:
    """Greedy EAGLE-3 decoding of one request: draft k, verify once, accept a prefix, repeat."""
    ids = list(prompt_ids)
    targets, aux = verify(pair, ids)
    out = ReferenceOutput(ids, [targets[-1]], ["prefill"], [], k)

    def finished() -> bool:
        return len(out.token_ids) >= max_tokens or out.token_ids[-1] in pair.stop_ids

    while not finished():
        seq = ids + out.token_ids
        drafts = draft(pair, seq, aux, k)
        targets, aux = verify(pair, seq + drafts)
        rnd = accept_greedy(drafts, targets[len(seq) - 1 :])
        out.rounds.append(rnd)
        for tok, label in zip(rnd.emitted, rnd.labels):
            if finished():
                break
            out.token_ids.append(tok)
            out.labels.append(label)
    return out


def _generate_all(
    pair: ReferencePair, prompts: Sequence[str], k: int, max_tokens: int, threads: int = 1
) -> list[ReferenceOutput]:
    """speculative_generate() for each chat prompt, one request after another (on `threads` CPU
    threads)."""
    with torch_threads(threads):
        return [
            speculative_generate(pair, chat_prompt_ids(pair.tokenizer, p), k, max_tokens)
            for p in prompts
        ]
