"""Train an EAGLE-3 drafter: the training-time-test (TTT) loss, row samplers, the learning-rate
schedule, the loop."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from helpers.eagle3 import drafter, taps
from helpers.eagle3.vocab import vocab_maps

__all__ = [
    "drafter_shape_for",
    "new_drafter",
    "ttt_loss",
    "RowSampler",
    "cosine_lr",
    "DrafterHistory",
    "MixedSampler",
    "train_drafter",
]


def drafter_shape_for(
    verifier: PreTrainedModel, num_aux_layers: int = 3, draft_vocab_size: int | None = None
) -> drafter.DrafterShape:
    """A drafter shaped like its verifier's layers (hidden, heads, vocabulary)."""
    c = verifier.config
    return drafter.DrafterShape(
        hidden_size=c.hidden_size,
        vocab_size=c.vocab_size,
        num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads,
        head_dim=c.head_dim,
        intermediate_size=2 * c.hidden_size,
        num_aux_layers=num_aux_layers,
        target_hidden_size=c.hidden_size,
        rms_norm_eps=c.rms_norm_eps,
        max_position_embeddings=c.max_position_embeddings,
        draft_vocab_size=draft_vocab_size,
    )


def new_drafter(
    verifier: PreTrainedModel,
    aux_layers: Sequence[int],
    seed: int = 0,
    keep: Sequence[int] | None = None,
) -> drafter.Eagle3Drafter:
    """A fresh drafter (scoring only the sorted ids `keep`, if given); lm_head and norm copied from
    the verifier."""
    torch.manual_seed(seed)
    d = drafter.Eagle3Drafter(
        drafter_shape_for(verifier, len(aux_layers), None if keep is None else len(keep))
    )
    rows = torch.arange(verifier.config.vocab_size)
    with torch.no_grad():
        if keep is not None:
            d.d2t, d.t2d = vocab_maps(keep, verifier.config.vocab_size)
            rows = torch.tensor(list(keep))
        d.lm_head.weight.copy_(verifier.lm_head.weight[rows.to(verifier.device)])
        d.norm.weight.copy_(verifier.model.norm.weight)
    return d.to(verifier.device)


# Twin of ttt_loss() in notebook 05 (its chapter.json's twins): change both.
def ttt_loss(
    d: drafter.Eagle3Drafter,
    verifier: PreTrainedModel,
    x: torch.Tensor,
    aux_layers: Sequence[int],
    steps: int,
    decay: float = 0.8,
) -> tuple[torch.Tensor, list[float]]:
    """Training-time-test loss: soft cross-entropy of each draft step against the verifier.

    Step j at root t predicts token t+2+j: it is scored against the verifier's distribution at
    position t+1+j over the draft vocabulary, weighted decay**j. Also returns each step's top-1
    agreement with the verifier's argmax there.
    """
    aux, vlogits = taps.verifier_taps(verifier, x, aux_layers)
    answers = vlogits.argmax(-1)
    vlogits = d.draft_scores(vlogits)
    embed = verifier.get_input_embeddings()
    with torch.no_grad():
        first = embed(torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], 1))
    logits = drafter.draft_chain(d, first, aux, steps, drafter.teacher_forced(embed, x))
    t = x.shape[1]
    loss, agree = torch.zeros(()), []
    for j, lg in enumerate(logits):
        n = t - 2 - j
        target = vlogits[:, 1 + j : 1 + j + n]
        logp = lg[:, :n].log_softmax(-1)
        loss = loss + decay**j * -(target.softmax(-1) * logp).sum(-1).mean()
        drafted = d.target_ids(lg[:, :n].argmax(-1))
        agree.append((drafted == answers[:, 1 + j : 1 + j + n]).float().mean().item())
    return loss, agree


class RowSampler:
    """Training rows of `seq_len` tokens that always start at an exchange boundary.

    Starting at a boundary keeps the user's request in view of the answer, which the
    structured and code categories copy from.
    """

    def __init__(self, encoded: list[list[int]], seq_len: int, seed: int) -> None:
        self.encoded, self.seq_len = encoded, seq_len
        self.rng = random.Random(seed)

    def row(self) -> list[int]:
        """One row: consecutive exchanges from a random start, cut to seq_len."""
        i, out = self.rng.randrange(len(self.encoded)), []
        while len(out) < self.seq_len:
            out += self.encoded[i % len(self.encoded)]
            i += 1
        return out[: self.seq_len]

    def batch(self, size: int) -> torch.Tensor:
        """A [size, seq_len] batch of token ids."""
        return torch.tensor([self.row() for _ in range(size)], dtype=torch.long)


def cosine_lr(step: int, total: int, peak: float, warmup: int = 30, floor: float = 0.1) -> float:
    """Linear warm-up, then cosine decay from `peak` to `floor * peak`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * frac)))


@dataclass
class DrafterHistory:
    """Loss and per-draft-step top-1 agreement, one entry per training step."""

    loss: list[float] = field(default_factory=list)
    agreement: list[list[float]] = field(default_factory=list)


class MixedSampler:
    """Rows from the verifier's own answers, with a share of corpus rows mixed in."""

    def __init__(
        self,
        distilled: list[list[int]],
        corpus: list[list[int]],
        seq_len: int,
        corpus_share: float,
        seed: int,
    ) -> None:
        self.a, self.b = RowSampler(distilled, seq_len, seed), RowSampler(corpus, seq_len, seed + 1)
        self.share, self.rng = corpus_share, random.Random(seed + 2)

    def batch(self, size: int) -> torch.Tensor:
        """A [size, seq_len] batch."""
        rows = [(self.b if self.rng.random() < self.share else self.a).row() for _ in range(size)]
        return torch.tensor(rows, dtype=torch.long)


def train_drafter(
    d: drafter.Eagle3Drafter,
    verifier: PreTrainedModel,
    sampler: MixedSampler,
    steps: int,
    aux_layers: Sequence[int],
    ttt_steps: int = 4,
    batch_size: int = 16,
    lr: float = 2e-3,
    callback: Callable[[int, drafter.Eagle3Drafter], None] | None = None,
    loss_fn: Callable[..., tuple[torch.Tensor, list[float]]] | None = None,
) -> DrafterHistory:
    """Train `d` in place with AdamW on `loss_fn` (default ttt_loss), on the verifier's device;
    `callback(step, d)` after each step."""
    loss_fn = loss_fn or ttt_loss
    for p in verifier.parameters():
        p.requires_grad_(False)
    d.to(verifier.device)
    opt = torch.optim.AdamW(d.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    hist = DrafterHistory()
    d.train()
    bar = tqdm(range(steps), desc="drafter", unit="step")
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = cosine_lr(step, steps, lr, warmup=20)
        x = sampler.batch(batch_size).to(verifier.device)
        loss, agree = loss_fn(d, verifier, x, aux_layers, ttt_steps)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(d.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        hist.loss.append(loss.item())
        hist.agreement.append(agree)
        if step % 10 == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}", top1=f"{agree[0]:.2f}")
        if callback is not None:
            callback(step + 1, d)
    d.eval()
    return hist
