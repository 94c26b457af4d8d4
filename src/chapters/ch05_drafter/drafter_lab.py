"""Notebook 05's drafter lab: the training plan and checkpoints, EAGLE-3's shapes traced through one
step, τ evaluated on held-out prompts with intervals, the learning curve, how well the verifier's
answers agree with the corpus, and two verifiers compared tensor by tensor.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from matplotlib.figure import Figure
from safetensors import safe_open
from transformers import PreTrainedModel, PreTrainedTokenizerBase, Qwen3MoeForCausalLM

from helpers.analytics.intervals import Interval, position_intervals, tau_difference, tau_interval
from helpers.common import vllm_names
from helpers.common.ci import ci_scaled
from helpers.common.counters import RequestAcceptance, acceptance_stats
from helpers.common.paths import DATA_DIR
from helpers.common.plots import PALETTE, new_figure
from helpers.common.profiles import Profile
from helpers.common.prompts import as_messages
from helpers.eagle3.checkpoint import save_drafter
from helpers.eagle3.drafter import Eagle3Drafter, draft_chain, teacher_forced
from helpers.eagle3.taps import verifier_taps
from helpers.eagle3.train import DrafterHistory
from helpers.engine.lifecycle import engine_kwargs, open_engine, speculative_config
from helpers.engine.runs import CategoryRun, pooled, run_categories, sampling
from helpers.tiny.corpus import build_corpus
from helpers.tiny.verifier import encode_examples

__all__ = [
    "training_plan",
    "answer_agreement",
    "corpus_rows",
    "CheckpointSaver",
    "eagle3_shape_table",
    "evaluate_tau",
    "tau_gain",
    "tau_table",
    "plot_learning_curve",
    "compare_verifiers",
    "param_count",
    "speculators_ttt",
]


def training_plan(steps: int, eval_at: Sequence[int]) -> tuple[int, tuple[int, ...]]:
    """Training steps and checkpoint steps; under CI a third of each (helpers.common.ci)."""
    scaled = ci_scaled(steps, steps // 3)
    factor = scaled / steps if steps else 1.0
    return scaled, tuple(sorted({round(s * factor) for s in eval_at}))


@torch.no_grad()
def answer_agreement(
    verifier: Qwen3MoeForCausalLM,
    tok: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    sequences: Sequence[Sequence[int]],
) -> float:
    """Share of answer tokens (up to <|im_end|>) that are the verifier's own greedy choice there.

    Each sequence is a chat prompt followed by an answer; the verifier reads it teacher-forced.
    """
    hits = total = 0
    for prompt, seq in zip(prompts, sequences, strict=True):
        text = tok.apply_chat_template(
            as_messages(prompt), tokenize=False, add_generation_prompt=True
        )
        start = len(tok(text, add_special_tokens=False)["input_ids"])
        answer = list(seq[start:])
        end = answer.index(tok.eos_token_id) + 1 if tok.eos_token_id in answer else len(answer)
        x = torch.tensor([list(seq[: start + end])], device=verifier.device)
        greedy = verifier(input_ids=x).logits[0, start - 1 : -1].argmax(-1)
        hits += int((greedy == x[0, start:]).sum())
        total += end
    return hits / max(1, total)


def corpus_rows(tok: PreTrainedTokenizerBase, per_category: int, seed: int) -> list[list[int]]:
    """A small slice of the chat corpus, tokenized: the share of training rows not
    self-distilled."""
    return encode_examples(tok, build_corpus(per_category, seed))


class CheckpointSaver:
    """A `train_drafter` callback that saves the drafter at chosen steps, in the speculators
    format."""

    def __init__(self, steps: Sequence[int], out_root: Path, config: dict[str, Any]) -> None:
        out_root = Path(out_root).resolve()
        if out_root.is_relative_to(DATA_DIR.resolve()):
            raise ValueError(
                f"checkpoints go under build/, not into the shipped data/ ({out_root})"
            )
        self.steps, self.out_root, self.config = set(steps), out_root, config
        self.saved: dict[int, Path] = {}
        for old in out_root.glob("step-*"):
            shutil.rmtree(old)

    def save(self, step: int, d: Eagle3Drafter) -> Path:
        """Write config.json + model.safetensors into out_root/step-NNNN."""
        path = self.out_root / f"step-{step:04d}"
        save_drafter(d, path, self.config)
        self.saved[step] = path
        return path

    def __call__(self, step: int, d: Eagle3Drafter) -> None:
        """Save when `step` is one of the chosen steps."""
        if step in self.steps:
            self.save(step, d)


def _symbolic(shape: Sequence[int], last: dict[int, str]) -> str:
    """[B, T, <last dim named>] for a [batch, positions, features] shape."""
    names = ["B", "T"][: len(shape)] + [last.get(n, str(n)) for n in shape[2:]]
    return "[" + ", ".join(names) + "]"


def _shape_hooks(modules: dict[str, torch.nn.Module], seen: dict[str, tuple]) -> list:
    """Forward hooks recording the first input and output shape each module sees."""

    def record(name: str):
        def hook(_m: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> None:
            seen.setdefault(name, (tuple(inputs[0].shape), tuple(output.shape)))

        return hook

    return [m.register_forward_hook(record(n)) for n, m in modules.items()]


def eagle3_shape_table(
    d: Eagle3Drafter, verifier: Qwen3MoeForCausalLM, x: torch.Tensor, aux_layers: Sequence[int]
) -> pd.DataFrame:
    """Shapes of the real tensors in draft step 0, read by forward hooks during one draft_chain
    call."""
    ml, seen = d.layers[0], {}
    hooks = _shape_hooks(
        {
            "fc": d.fc,
            "hidden_norm": ml.hidden_norm,
            "input_layernorm": ml.input_layernorm,
            "q_proj": ml.self_attn.q_proj,
            "k_proj": ml.self_attn.k_proj,
            "o_proj": ml.self_attn.o_proj,
            "mlp": ml.mlp,
            "lm_head": d.lm_head,
        },
        seen,
    )
    x = x.to(verifier.device)
    try:
        with torch.no_grad():
            out = verifier(input_ids=x, output_hidden_states=True)
            aux = torch.cat([out.hidden_states[k] for k in aux_layers], -1)
            embed = verifier.get_input_embeddings()
            first = embed(torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], 1))
            draft_chain(d, first, aux, 1, teacher_forced(embed, x))
    finally:
        for h in hooks:
            h.remove()
    s, h = d.shape, d.shape.hidden_size
    last = {
        s.num_key_value_heads * s.head_dim: "kv_heads·head_dim",
        s.num_attention_heads * s.head_dim: "heads·head_dim",
        s.vocab_size: "V",
        3 * h: "3H",
        2 * h: "2H",
        h: "H",
    }  # later keys win: H over heads·head_dim
    rows = [("tokens", tuple(x.shape), "token ids of the sequence so far")]
    rows += [
        (
            f"verifier hidden_states[{k}]",
            tuple(out.hidden_states[k].shape),
            f"residual stream after {k} of the verifier's layers",
        )
        for k in aux_layers
    ]
    rows += [
        ("aux = cat(those three)", tuple(aux.shape), "the drafter's view of the verifier"),
        ("fc(aux)", seen["fc"][1], "fused down to the drafter's width"),
        ("hidden_norm", seen["hidden_norm"][1], "RMSNorm of the fused state"),
        (
            "embed_tokens(next token)",
            tuple(first.shape),
            "the verifier's embedding of the token after t",
        ),
        ("input_layernorm", seen["input_layernorm"][1], "RMSNorm of the embedding"),
        ("[embedding ‖ hidden]", seen["q_proj"][0], "what attention reads: 2H wide"),
        ("q_proj", seen["q_proj"][1], "queries"),
        ("k_proj (and v_proj)", seen["k_proj"][1], "keys/values: fewer heads (grouped-query)"),
        ("o_proj + hidden", seen["o_proj"][1], "back to H, residual added"),
        ("mlp + residual", seen["mlp"][1], "pre-norm output: the next step's `hidden`"),
        ("norm → lm_head", seen["lm_head"][1], "draft logits; argmax = drafted token"),
    ]
    return pd.DataFrame(
        [
            {
                "tensor": name,
                "shape": str(list(shape)),
                "symbolic": _symbolic(shape, last),
                "what": what,
            }
            for name, shape, what in rows
        ]
    )


@dataclass(frozen=True)
class _TauResult:
    """Acceptance measured by vLLM for one verifier + drafter pair (k draft tokens, T=0)."""

    label: str
    tau: float
    per_position: list[float]
    drafts: int
    accepted: int
    output_tokens: int
    seconds: float
    by_category: dict[str, float] = field(default_factory=dict)
    #: The category runs, with vLLM's per-request acceptance (what the intervals rest on).
    runs: dict[str, CategoryRun] = field(default_factory=dict, repr=False)

    @cached_property
    def requests(self) -> list[RequestAcceptance]:
        """vLLM's per-request acceptance, category by category in prompt order."""
        return [q for r in self.runs.values() for q in r.requests]

    @cached_property
    def interval(self) -> Interval | None:
        """τ with its 95 % interval over requests (None without per-request metrics)."""
        return tau_interval(self.requests) if self.requests else None


def tau_gain(before: _TauResult, after: _TauResult) -> Interval | None:
    """τ(after) − τ(before) with its 95 % interval, paired over the prompts both answered (None
    without per-request metrics)."""
    if not before.requests or not after.requests:
        return None
    paired = len(before.requests) == len(after.requests)
    return tau_difference(after.requests, before.requests, after.tau - before.tau, paired)


def evaluate_tau(
    profile: Profile,
    verifier_dir: str | Path,
    drafter_dir: str | Path,
    prompts: dict[str, list[str]],
    k: int = 3,
    max_tokens: int = 64,
    label: str = "",
    **overrides: Any,
) -> _TauResult:
    """Start an engine for the pair (validator first), generate greedily, shut it down; pooled τ."""
    kwargs = engine_kwargs(
        profile,
        k=k,
        model=str(verifier_dir),
        speculative_config=speculative_config(str(drafter_dir), k),
        **overrides,
    )
    t0 = time.perf_counter()
    with open_engine(**kwargs) as llm:
        runs = run_categories(llm, prompts, sampling(max_tokens))
    stats = acceptance_stats(pooled(runs))
    return _TauResult(
        label=label or Path(drafter_dir).name,
        tau=stats[vllm_names.STATS.tau],
        per_position=list(stats[vllm_names.STATS.per_position_rates]),
        drafts=stats[vllm_names.STATS.num_drafts],
        accepted=stats[vllm_names.STATS.accepted_tokens],
        output_tokens=sum(r.output_tokens for r in runs.values()),
        seconds=time.perf_counter() - t0,
        by_category={c: r.stats[vllm_names.STATS.tau] for c, r in runs.items()},
        runs=runs,
    )


def tau_table(results: dict[Any, _TauResult], by_category: bool = False) -> pd.DataFrame:
    """One row per measured pair: τ, acceptance rate at each draft position, drafts, seconds.

    With by_category, τ of each task category instead of the per-position rates. Where vLLM kept
    per-request acceptance, `tau 95% CI` (and each category) shows the interval over requests.
    """
    rows = []
    for key, r in results.items():
        row = {"run": key, "drafter": r.label, "tau": round(r.tau, 3)}
        if (iv := r.interval) is not None:
            row["tau 95% CI"] = f"[{iv.low:.2f}, {iv.high:.2f}]"
        if by_category:
            for c, t in r.by_category.items():
                run = r.runs.get(c)
                row[f"tau {c}"] = (
                    str(tau_interval(run.requests)) if run and run.requests else round(t, 3)
                )
        else:
            row |= {f"accept@{j + 1}": round(p, 3) for j, p in enumerate(r.per_position)}
            requests = [q for run in r.runs.values() for q in run.requests]
            if requests:
                table = position_intervals(requests)
                row |= {
                    f"accept@{j + 1} 95% CI": f"[{lo:.2f}, {hi:.2f}]"
                    for j, (lo, hi) in enumerate(zip(table.rate_ci_low, table.rate_ci_high))
                }
        row |= {"drafts": r.drafts, "seconds": round(r.seconds, 1)}
        rows.append(row)
    return pd.DataFrame(rows).set_index("run")


def _smooth(values: Sequence[float], window: int = 10) -> list[float]:
    """Trailing moving average (shorter at the start)."""
    return pd.Series(list(values), dtype=float).rolling(window, min_periods=1).mean().tolist()


def plot_learning_curve(
    taus: dict[int, _TauResult],
    history: DrafterHistory,
    shipped: _TauResult,
    window: int = 10,
) -> Figure:
    """τ at each checkpoint vs the shipped drafter; training loss; top-1 agreement per draft
    step."""
    fig, (ax_tau, ax_loss, ax_agree) = new_figure(3, width=4.4, height=3.4)
    steps, k = sorted(taus), len(shipped.per_position)
    ivs = [taus[s].interval for s in steps]
    yerr = None
    if all(iv is not None for iv in ivs):
        yerr = [[iv.estimate - iv.low for iv in ivs], [iv.high - iv.estimate for iv in ivs]]
    ax_tau.errorbar(
        steps,
        [taus[s].tau for s in steps],
        yerr=yerr,
        fmt="o-",
        capsize=3,
        color=PALETTE["spec"],
        label="your drafter (95 % interval)",
    )
    for s in steps:
        ax_tau.annotate(
            f"{taus[s].tau:.2f}",
            (s, taus[s].tau),
            textcoords="offset points",
            xytext=(4, -12),
            fontsize=8,
        )
    ax_tau.axhline(
        shipped.tau,
        ls="--",
        color=PALETTE["accepted"],
        label=f"shipped drafter ({shipped.tau:.2f})",
    )
    ax_tau.axhline(1.0, ls=":", color=PALETTE["plain"], label="no speculation (1.0)")
    if k:
        ax_tau.axhline(k + 1, ls=":", color=PALETTE["bonus"], label=f"ceiling k+1 = {k + 1}")
    ax_tau.set(
        xlabel="training step",
        ylabel="τ (tokens per verifier step)",
        title="acceptance length in vLLM",
    )
    ax_tau.legend(fontsize=8)
    x = range(1, len(history.loss) + 1)
    ax_loss.plot(x, _smooth(history.loss, window), color=PALETTE["correction"])
    ax_loss.set(
        xlabel="training step", ylabel="TTT loss", title=f"training loss ({window}-step mean)"
    )
    for j in range(len(history.agreement[0]) if history.agreement else 0):
        ax_agree.plot(
            x,
            _smooth([a[j] for a in history.agreement], window),
            label=f"draft step {j + 1}",
            alpha=1.0 - 0.18 * j,
            color=PALETTE["spec"] if j == 0 else None,
        )
    ax_agree.set(
        xlabel="training step",
        ylabel="top-1 agreement",
        title="agreement with the verifier",
        ylim=(0, 1),
    )
    ax_agree.legend(fontsize=8)
    return fig


def _tensors(folder: Path) -> dict[str, torch.Tensor]:
    """All tensors of a single-file safetensors model folder."""
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def compare_verifiers(a: str | Path, b: str | Path) -> dict[str, Any]:
    """What a config/shape check sees (identical) and what it cannot see (the weights)."""
    a, b = Path(a), Path(b)
    ta, tb = _tensors(a), _tensors(b)
    same_shapes = {k: tuple(v.shape) for k, v in ta.items()} == {
        k: tuple(v.shape) for k, v in tb.items()
    }
    diff = sum((ta[k] - tb[k]).pow(2).sum().item() for k in ta) if same_shapes else float("nan")
    norm = sum(v.pow(2).sum().item() for v in ta.values())
    return {
        "config.json identical": (a / "config.json").read_text(encoding="utf-8")
        == (b / "config.json").read_text(encoding="utf-8"),
        "tensor names and shapes identical": same_shapes,
        "tensors": len(ta),
        "relative weight difference": (diff / norm) ** 0.5 if norm else float("nan"),
    }


def param_count(module: torch.nn.Module) -> int:
    """Number of parameters of a module."""
    return sum(p.numel() for p in module.parameters())


@dataclass(frozen=True)
class _SpeculatorsTTT:
    """speculators' own training-time test on one row: each step's logits, its loss (KL from the
    verifier's distribution, decayed per step), and the verifier distributions' entropy, by which
    `ttt_loss`'s soft cross-entropy exceeds that KL (a constant of the data: same gradients)."""

    logits: list[torch.Tensor]
    loss: float
    target_entropy: float


def speculators_ttt(
    model: torch.nn.Module,
    verifier: PreTrainedModel,
    x: torch.Tensor,
    aux_layers: Sequence[int],
    steps: int,
    decay: float = 0.8,
) -> _SpeculatorsTTT:
    """speculators' `Eagle3DraftModel` forward on a batch of one row, aligned as `ttt_loss`: the
    true next tokens fed at later steps, step j at root t scored against the verifier at t+1+j
    (its last layer's output before the final norm, which speculators applies itself), roots
    whose targets run past the row masked out, its eager KL loss."""
    from speculators.losses.eager import kl_div_loss

    aux, vlogits = verifier_taps(verifier, x, aux_layers)
    last: list[torch.Tensor] = []
    hook = verifier.model.layers[-1].register_forward_hook(
        lambda _m, _i, out: last.append(out[0] if isinstance(out, tuple) else out)
    )
    seen: list[torch.Tensor] = []
    head = model.lm_head.register_forward_hook(lambda _m, _i, out: seen.append(out))
    try:
        with torch.no_grad():
            verifier(input_ids=x)
        t = x.shape[1]
        mask = torch.zeros(1, t, dtype=torch.bool, device=x.device)
        mask[:, : t - 2] = True
        _, loss, _ = model(
            hidden_states=aux,
            input_ids=torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], 1),
            document_ids=torch.zeros_like(x),
            loss_mask=mask,
            verifier_last_hidden_states=torch.cat(
                [last[0][:, 1:], torch.zeros_like(last[0][:, :1])], 1
            ),
            ttt_steps=steps,
            ttt_step_loss_decay=decay,
            loss_config={"kl_div": (kl_div_loss, 1.0)},
        )
    finally:
        hook.remove()
        head.remove()
    entropy = 0.0
    for j in range(steps):
        p = vlogits[:, 1 + j : t - 1].softmax(-1)
        entropy += decay**j * float(-(p * p.clamp_min(1e-30).log()).sum(-1).mean())
    return _SpeculatorsTTT(seen, float(loss), entropy)
