"""The GPU MoE lab's tools (`gpu_moe_lab` beside it; notebook 06 reads its record): the routing
designs its worker extension installs, the routing read back, and the tables of a record for
docs/gpu.md (`python -m chapters.ch06_moe.tools.moe_lab`).

Routers by design for the MoE lab: gate weights that make a dummy-weight Qwen3-MoE route
independently, correlated within a sequence, or with a skewed expert popularity, set in a
running vLLM engine, and the routing read back from the tokens the engine produced.

Why it can be done without trained weights. vLLM's dummy weights are U(±1e-3), so every layer adds
about 1e-4 of the residual stream to it: each layer's router sees, to that precision, the token's
own embedding, and routes on the current token alone (`route` below computes it). The designs
rewrite a few tensors of the loaded model (`apply_design`), none that changes what a step reads:

* the embedding: coordinate 0 is 1 for every token (it turns a gate column into a bias), a *token
  block* of coordinates is N(0, 1) per token, the rest is 0;
* layer 0's attention: q = 0, so attention is uniform over the context, and v/o copy the running
  mean of the token block into a *context block*: a vector shared by the whole sequence that
  drifts slowly as it grows (other layers add ≈ 1e-6 of the stream; their weights stay as loaded);
* every router: logits = bias + token block · W_tok + γ · context block · W_ctx, W ~ N(0, 1), so
  each expert's logit is N(0, 1) from the token plus γ × a per-sequence term.

γ = 0 routes each token independently of its neighbours; a large γ makes a sequence's positions
share their experts (sequences still differ: their contexts do), which is the within-sequence
correlation ρ of `chapters.ch06_moe.moe.union_with_correlation`; `calibrate_context_weight` finds
the γ of a target ρ on random sequences. A bias drawn for a Zipf-like popularity
(`zipf_bias`) skews which experts are picked. Step costs are the same whatever the values (bf16
kernels do not skip zeros): only which experts a batch reads changes.

`RoutingLab` is the worker extension (`worker_extension_cls=ROUTING_LAB`) through which
`gpu_moe_lab` applies a design, reads back the routing of the sequences it generated
(`routing_stats`), and moves the synthetic acceptance length of a running engine
(`set_acceptance_length`: the rejection sampler's rates tensor, updated in place). It also keeps
the tensors a design rewrites as they were loaded (`moelab_snapshot`), puts them back
(`moelab_restore`), and says which routing is installed with a fingerprint of the tensors
themselves (`moelab_readback`), so the lab can refuse a cell whose routing is not its label's.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from chapters.ch06_moe import lab, moe
from helpers.analytics import speedup
from helpers.common.tables import COLUMNS

__all__ = [
    "Design",
    "AS_LOADED",
    "zipf_bias",
    "route",
    "routing_stats",
    "set_acceptance_length",
    "RoutingLab",
    "ROUTING_LAB",
    "measured_rho",
    "main",
]


@dataclass(frozen=True)
class Design:
    """A routing design: context weight γ, a popularity bias, the seed of its random matrices.
    `designed=False` is the model as vLLM loaded it (random weights)."""

    name: str
    context_weight: float = 0.0
    bias: tuple[float, ...] = field(default_factory=tuple)
    seed: int = 0
    designed: bool = True
    #: The ρ a context weight was calibrated for (None: not calibrated).
    target_rho: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (what the lab records and sends to its workers)."""
        return {**asdict(self), "bias": list(self.bias)}


AS_LOADED = Design(speedup.AS_LOADED, designed=False)


def _expert_mask(choices: torch.Tensor, experts: int) -> torch.Tensor:
    """Router choices [..., active] as a boolean mask [..., experts] of the experts picked."""
    mask = torch.zeros(*choices.shape[:-1], experts, dtype=torch.bool, device=choices.device)
    return mask.scatter_(-1, choices.long(), True)


def _window_distinct(mask: torch.Tensor, n: int) -> torch.Tensor:
    """Distinct experts of every window of n consecutive positions: mask [..., T, E] → [...,
    T-n+1]."""
    windows = mask.unfold(-2, n, 1)  # [..., T-n+1, E, n]
    return windows.any(-1).sum(-1).float()


def _aligned_union(masks: Sequence[torch.Tensor], n: int) -> float:
    """Mean distinct experts per layer when sequences verify n positions each at the same offsets:
    masks are [layers, T_i, E] per sequence, offsets run over the shortest; what one batched step
    of len(masks) sequences reads."""
    t = min(m.shape[-2] for m in masks)
    if t < n:
        return float("nan")
    joint = torch.stack([m[..., :t, :] for m in masks]).any(0)
    return _window_distinct(joint, n).mean().item()


def _effective_experts(mask: torch.Tensor) -> float:
    """exp(entropy) of how often each expert is picked, per layer, averaged: E when popularity is
    uniform, fewer when a few experts take most tokens. mask [layers, T, E]."""
    counts = mask.float().sum(-2)
    p = counts / counts.sum(-1, keepdim=True).clamp_min(1)
    entropy = -(p * p.clamp_min(1e-30).log()).sum(-1)
    return entropy.exp().mean().item()


def measured_rho(
    choices: Sequence[tuple[torch.Tensor, int]], n: int, experts: int, active: int
) -> float:
    """ρ of a router at n positions, from the mean union of n consecutive answer positions."""
    measured = moe.union_table(choices, [n], experts, active).measured_union.iloc[0]
    return moe.correlation(float(measured), experts, active, n)


@dataclass(frozen=True)
class _Layout:
    """Where a design puts its coordinates in the residual stream of a model of this width."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int

    @property
    def token(self) -> slice:
        """The token block: [1, hidden/2)."""
        return slice(1, self.hidden // 2)

    @property
    def context_size(self) -> int:
        """Coordinates of the context block: what layer 0's values can carry, at most the token
        block."""
        return min(self.kv_heads * self.head_dim, self.hidden // 2 - 1)

    @property
    def context(self) -> slice:
        """The context block: right after the token block."""
        return slice(self.hidden // 2, self.hidden // 2 + self.context_size)

    @classmethod
    def of(cls, model: Any) -> _Layout:
        """The layout of a vLLM Qwen3-MoE model (from its first attention layer; one GPU)."""
        attn = _verifier_layers(model)[0].self_attn
        return cls(model.config.hidden_size, attn.num_heads, attn.num_kv_heads, attn.head_dim)


def _verifier_layers(model: Any) -> Sequence[Any]:
    """The decoder layers of a vLLM Qwen3-MoE model (`model.model.layers`)."""
    return model.model.layers


def _experts(model: Any) -> int:
    """Routed experts per layer of a vLLM Qwen3-MoE model (its config names them two ways)."""
    config = model.config
    return getattr(config, "num_experts", None) or config.num_local_experts


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm as vLLM's: x / sqrt(mean(x²) + eps) · weight (in float32)."""
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def zipf_bias(
    experts: int, active: int, exponent: float, seed: int = 0, rounds: int = 60
) -> list[float]:
    """A router bias whose top-`active` picks follow a Zipf-like popularity p_e ∝ 1/rank^exponent
    over a random ranking of the experts, when each expert's logit adds N(0, 1) noise per token
    (fitted on 4,096 noise draws: bias += log(target) − log(measured), `rounds` times)."""
    g = torch.Generator().manual_seed(seed)
    rank = torch.randperm(experts, generator=g).float() + 1
    target = rank.pow(-exponent)
    target = target / target.sum() * active
    noise = torch.randn(4096, experts, generator=g)
    bias = torch.zeros(experts)
    for _ in range(rounds):
        picked = _expert_mask((noise + bias).topk(active, dim=-1).indices, experts)
        measured = picked.float().mean(0).clamp_min(1e-4)
        bias += 0.5 * (target.log() - measured.log())
    return [round(b, 6) for b in bias.tolist()]


def _read(linear: Any) -> torch.Tensor:
    """A linear layer's weight as the lab last wrote it, else as loaded."""
    written = getattr(linear, "_lab_weight", None)
    if written is not None:
        return written
    if linear.weight.numel() == 0:
        raise ValueError(
            "this backend repacked the layer's weights at load (vLLM's CPU backend does): "
            "only designed weights can be read back"
        )
    return linear.weight


@torch.no_grad()
def _write(linear: Any, weight: torch.Tensor) -> None:
    """Give a linear layer new weights: in place where the kernels read `.weight` (a GPU); where
    the backend packed them at load (vLLM's CPU backend, `dispatch_cpu_unquantized_gemm`), packed
    again, and kept beside for `_read`."""
    if hasattr(linear, "cpu_linear"):
        from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

        dtype = linear.weight.dtype
        linear.weight = torch.nn.Parameter(weight.to(dtype).clone(), requires_grad=False)
        dispatch_cpu_unquantized_gemm(linear, remove_weight=True)
        linear._lab_weight = weight.to(dtype).clone()
    else:
        linear.weight.copy_(weight)


@torch.no_grad()
def _apply_design(model: Any, design: Design, context_scale: float) -> None:
    """Rewrite the embedding, layer 0's attention, every post-attention norm and every router of a
    vLLM Qwen3-MoE model for `design` (see the module doc); `context_scale` sizes the context block
    (≈ sqrt(tokens / 2) makes it N(0, 1) at that context length)."""
    if not design.designed:
        raise ValueError("the as-loaded design has nothing to apply: measure it before any other")
    layers = _verifier_layers(model)
    lay = _Layout.of(model)
    embed = model.model.embed_tokens.weight
    device = embed.device
    g = torch.Generator(device=device).manual_seed(design.seed)
    tokens = lay.token.stop - 1
    for start in range(0, embed.shape[0], 16384):  # in slices: the 30B shape has 152k rows
        rows = embed[start : start + 16384]
        new = torch.zeros(rows.shape, device=device)
        new[:, 0] = 1.0
        new[:, lay.token] = torch.randn(rows.shape[0], tokens, generator=g, device=device)
        rows.copy_(new)
    first = layers[0]
    first.input_layernorm.weight.fill_(1.0)
    q_size, kv_size = lay.heads * lay.head_dim, lay.kv_heads * lay.head_dim
    qkv = torch.zeros(q_size + 2 * kv_size, lay.hidden, device=device)  # q = 0: uniform attention
    o = torch.zeros(lay.hidden, q_size, device=device)
    group = lay.heads // lay.kv_heads
    for f in range(lay.context_size):
        qkv[q_size + kv_size + f, 1 + f] = 1.0  # value f (kv head f // head_dim): token coord 1 + f
        head = (f // lay.head_dim) * group  # the first query head that reads that kv head
        o[lay.context.start + f, head * lay.head_dim + f % lay.head_dim] = context_scale
    _write(first.self_attn.qkv_proj, qkv)
    _write(first.self_attn.o_proj, o)
    for layer in layers:
        layer.post_attention_layernorm.weight.fill_(1.0)
        experts = _experts(model)
        w = torch.zeros(experts, lay.hidden, device=device)
        w[:, lay.token] = torch.randn(experts, tokens, generator=g, device=device) / math.sqrt(
            tokens
        )
        w[:, lay.context] = (
            design.context_weight
            * torch.randn(experts, lay.context_size, generator=g, device=device)
            / math.sqrt(lay.context_size)
        )
        if design.bias:
            w[:, 0] = torch.tensor(design.bias, device=device)
        _write(layer.mlp.gate, w)


@torch.no_grad()
def _designed_parts(model: Any) -> dict[str, tuple[Any, bool]]:
    """Every module whose weight a design rewrites, by a name, and whether it is a linear layer
    (written through `_write`): the embedding, layer 0's input norm and attention projections, each
    layer's post-attention norm and router."""
    layers = _verifier_layers(model)
    parts = {
        "embed": (model.model.embed_tokens, False),
        "input_norm_0": (layers[0].input_layernorm, False),
        "qkv_0": (layers[0].self_attn.qkv_proj, True),
        "o_0": (layers[0].self_attn.o_proj, True),
    }
    for i, layer in enumerate(layers):
        parts[f"post_norm_{i}"] = (layer.post_attention_layernorm, False)
        parts[f"gate_{i}"] = (layer.mlp.gate, True)
    return parts


@torch.no_grad()
def _snapshot(model: Any) -> dict[str, torch.Tensor | None]:
    """A copy of every tensor a design rewrites, as it is now (None for a linear layer whose weight
    the backend repacked at load and cannot give back: vLLM's CPU backend)."""
    out: dict[str, torch.Tensor | None] = {}
    for name, (module, linear) in _designed_parts(model).items():
        try:
            out[name] = (_read(module) if linear else module.weight).detach().clone()
        except ValueError:
            out[name] = None
    return out


@torch.no_grad()
def _restore(model: Any, saved: dict[str, torch.Tensor | None]) -> None:
    """Put every snapshot tensor back; raise in one line where one could not be kept."""
    lost = sorted(name for name, tensor in saved.items() if tensor is None)
    if lost:
        raise ValueError(
            f"the weights as loaded cannot be restored on this backend: it repacked {lost[0]} "
            f"(and {len(lost) - 1} more) at load (vLLM's CPU backend does)"
        )
    for name, (module, linear) in _designed_parts(model).items():
        if linear:
            _write(module, saved[name])
        else:
            module.weight.copy_(saved[name])


@torch.no_grad()
def _fingerprint(model: Any) -> float:
    """A number that changes whenever a design (or the weights as loaded) is installed: the float64
    sums of the embedding's first rows and of every post-attention norm weight, which every design
    rewrites from its own seed."""
    embed = model.model.embed_tokens.weight
    total = float(embed[:256].double().sum())
    for layer in _verifier_layers(model):
        total += float(layer.post_attention_layernorm.weight.double().sum()) * 1e-3
        total += float(_read_or_none(layer.mlp.gate))
    return total


def _read_or_none(linear: Any) -> float:
    """The float64 sum of a router's weight as `_read` gives it, 0 where the backend hides it."""
    try:
        return _read(linear).double().sum().item()
    except ValueError:
        return 0.0


@torch.no_grad()
def route(model: Any, sequences: Sequence[Sequence[int]]) -> list[torch.Tensor]:
    """The experts each position of each token sequence routes to, per layer: [layers, T, active].

    Computed from the model's weights as the forward pass does, with layer 0's attention uniform
    over the context (q = 0 in a design; U(±1e-3) weights make scores ≈ 1e-10 as loaded) and
    without the other layers' contributions (≈ 1e-4 of the stream as loaded, ≈ 1e-6 designed).
    """
    layers = _verifier_layers(model)
    lay = _Layout.of(model)
    first = layers[0]
    embed = model.model.embed_tokens.weight
    q_size, kv_size = lay.heads * lay.head_dim, lay.kv_heads * lay.head_dim
    v_w = _read(first.self_attn.qkv_proj)[q_size + kv_size : q_size + 2 * kv_size].float()
    o_w = _read(first.self_attn.o_proj).float()
    # every router at once: logits_l = RMSNorm(h) · w_l @ G_lᵀ = (h / rms(h)) @ (G_l · w_l)ᵀ
    scaled = torch.stack(
        [_read(y.mlp.gate).float() * y.post_attention_layernorm.weight.float() for y in layers]
    )
    eps = first.post_attention_layernorm.variance_epsilon
    active = model.config.num_experts_per_tok
    out = []
    for ids in sequences:
        x = embed[torch.tensor(list(ids), device=embed.device)].float()
        values = _rms_norm(x, first.input_layernorm.weight, first.input_layernorm.variance_epsilon)
        values = values @ v_w.T
        steps = torch.arange(1, len(ids) + 1, device=x.device).unsqueeze(1)
        mean = values.cumsum(0) / steps  # causal uniform attention
        heads = mean.view(len(ids), lay.kv_heads, lay.head_dim)
        heads = heads.repeat_interleave(lay.heads // lay.kv_heads, dim=1).reshape(len(ids), -1)
        h = x + heads @ o_w.T
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        logits = torch.einsum("th,leh->lte", h, scaled)
        out.append(logits.topk(active, dim=-1).indices)
    return out


def routing_stats(
    choices: Sequence[torch.Tensor], starts: Sequence[int], experts: int, ns: Sequence[int]
) -> dict[str, float]:
    """What the generated positions of a batch read: per n, the union of one sequence's n
    consecutive positions (`seq_union_<n>`) and of all sequences' at the same offsets
    (`batch_union_<n>`); ρ at each n; the effective number of experts (popularity)."""
    masks = [_expert_mask(c[:, s:], experts) for c, s in zip(choices, starts)]
    active = choices[0].shape[-1]
    stats: dict[str, float] = {
        "sequences": float(len(masks)),
        "positions": float(min(m.shape[1] for m in masks)),
        "effective_experts": _effective_experts(torch.cat(masks, dim=1)),
    }
    for n in ns:
        per_seq = [_window_distinct(m, n).mean().item() for m in masks if m.shape[1] >= n]
        one = sum(per_seq) / len(per_seq) if per_seq else float("nan")
        stats[f"seq_union_{n}"] = one
        stats[f"rho_{n}"] = moe.correlation(one, experts, active, n) if n > 1 else 0.0
        stats[f"batch_union_{n}"] = _aligned_union(masks, n)
    return stats


@torch.no_grad()
def _calibrate_context_weight(
    model: Any,
    design: Design,
    target_rho: float,
    context_scale: float,
    lengths: tuple[int, int],
    n: int = 4,
    sequences: int = 16,
    steps: int = 10,
) -> float:
    """The context weight γ whose within-sequence ρ at n positions is `target_rho`, on random
    token sequences of `lengths` (prompt, answer) tokens (bisection on γ; applies the design)."""
    vocab = model.model.embed_tokens.weight.shape[0]
    g = torch.Generator().manual_seed(design.seed + 1)
    seqs = [torch.randint(vocab, (sum(lengths),), generator=g).tolist() for _ in range(sequences)]
    experts = _experts(model)

    def rho(gamma: float) -> float:
        _apply_design(model, dataclasses.replace(design, context_weight=gamma), context_scale)
        stats = routing_stats(route(model, seqs), [lengths[0]] * len(seqs), experts, [n])
        return stats[f"rho_{n}"]

    lo, hi = 0.0, 1.0
    while rho(hi) < target_rho and hi < 1e3:
        lo, hi = hi, hi * 4
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rho(mid) < target_rho else (lo, mid)
    return (lo + hi) / 2


def _acceptance_rates(tau: float, k: int) -> list[float]:
    """The conditional per-position acceptance rates vLLM's synthetic sampler uses for a target τ
    (vLLM's own conversions: minimum-variance schedule, then conditional rates)."""
    from vllm.config.speculative import SpeculativeConfig
    from vllm.v1.spec_decode.utils import unconditional_to_conditional_rates

    if not 1.0 <= tau <= k + 1:
        raise ValueError(f"τ must be in [1, {k + 1}] for k={k}, got {tau}")
    return unconditional_to_conditional_rates(SpeculativeConfig._acceptance_length_to_rates(tau, k))


@torch.no_grad()
def set_acceptance_length(runner: Any, tau: float) -> list[float] | None:
    """Set a running engine's synthetic acceptance length: copy new rates into its rejection
    sampler's tensor, in place (kernels read it at every step). None when the engine does not
    sample synthetically (a CPU, or standard rejection sampling)."""
    rates = getattr(getattr(runner, "rejection_sampler", None), "synthetic_conditional_rates", None)
    if rates is None:
        return None
    new = _acceptance_rates(tau, rates.numel())
    rates.copy_(torch.tensor(new, dtype=rates.dtype, device=rates.device))
    return new


class RoutingLab:
    """vLLM worker extension: routing designs, routing read back, synthetic τ (see the module
    doc)."""

    def _lab_model(self) -> Any:
        return self.model_runner.get_model()

    def moelab_snapshot(self) -> float:
        """Keep the tensors a design rewrites as loaded (the first call; later ones keep the
        first copy) and mark the weights as loaded installed; their fingerprint."""
        if getattr(self, "_lab_saved", None) is None:
            self._lab_saved = _snapshot(self._lab_model())
        self._lab_installed = AS_LOADED.name
        return _fingerprint(self._lab_model())

    def moelab_restore(self) -> float:
        """Put the weights as loaded back (from moelab_snapshot); their fingerprint."""
        _restore(self._lab_model(), self._lab_saved)
        self._lab_installed = AS_LOADED.name
        return _fingerprint(self._lab_model())

    def moelab_readback(self) -> dict[str, Any]:
        """Which routing this worker has installed, and the fingerprint of the tensors now."""
        installed = getattr(self, "_lab_installed", AS_LOADED.name)
        return {"installed": installed, "fingerprint": _fingerprint(self._lab_model())}

    def moelab_design(self, design: dict[str, Any], context_scale: float) -> str:
        """Apply a design (as `Design.as_dict`); returns its name."""
        d = Design(**{**design, "bias": tuple(design.get("bias", ()))})
        _apply_design(self._lab_model(), d, context_scale)
        self._lab_installed = d.name
        return d.name

    def moelab_calibrate(
        self, design: dict[str, Any], target_rho: float, context_scale: float, lengths: list[int]
    ) -> float:
        """calibrate_context_weight in this worker (leaves the found γ applied)."""
        d = Design(**{**design, "bias": tuple(design.get("bias", ()))})
        gamma = _calibrate_context_weight(
            self._lab_model(), d, target_rho, context_scale, (lengths[0], lengths[1])
        )
        _apply_design(
            self._lab_model(), dataclasses.replace(d, context_weight=gamma), context_scale
        )
        self._lab_installed = d.name
        return gamma

    def moelab_routing(
        self, sequences: list[list[int]], starts: list[int], ns: list[int]
    ) -> dict[str, float]:
        """routing_stats of token sequences (prompt + output) as this model routes them."""
        model = self._lab_model()
        return routing_stats(route(model, sequences), starts, _experts(model), ns)

    def moelab_route(self, sequences: list[list[int]]) -> list[list[list[list[int]]]]:
        """`route` of token sequences in this worker: [sequence][layer][position][active]."""
        return [c.tolist() for c in route(self._lab_model(), sequences)]

    def moelab_set_tau(self, tau: float) -> list[float] | None:
        """set_acceptance_length on this worker's model runner."""
        return set_acceptance_length(self.model_runner, tau)

    def moelab_capture(self, on: bool) -> list[list[list[int]]]:
        """Record (on=True) or stop recording and return (False) the top experts each router
        computed in the forward passes in between, per layer: a check of `route` on an engine
        that runs eagerly (hooks do not fire inside CUDA graphs)."""
        model = self._lab_model()
        if on:
            self._lab_seen: list[list[list[int]]] = [[] for _ in _verifier_layers(model)]
            self._lab_hooks = [
                layer.mlp.gate.register_forward_hook(self._lab_hook(i))
                for i, layer in enumerate(_verifier_layers(model))
            ]
            return []
        for hook in getattr(self, "_lab_hooks", []):
            hook.remove()
        self._lab_hooks = []
        return getattr(self, "_lab_seen", [])

    def _lab_hook(self, index: int) -> Any:
        active = self._lab_model().config.num_experts_per_tok

        def hook(module: Any, args: Any, output: Any) -> None:
            logits = output[0] if isinstance(output, tuple) else output
            self._lab_seen[index].extend(logits.float().topk(active, dim=-1).indices.tolist())

        return hook


#: The dotted name vLLM loads RoutingLab by (`worker_extension_cls`).
ROUTING_LAB = f"{__name__}.{RoutingLab.__qualname__}"


def _readme_rows(record: Mapping[str, Any], ks: Sequence[int] = (1, 3, 5)) -> str:
    """Markdown rows for the README: per k, the measured c at each concurrency, and the record's
    date, GPU and vLLM (`python -m chapters.ch06_moe.tools.moe_lab` prints them)."""
    costs = speedup.lab_step_costs(record)
    levels = sorted(costs.concurrency.unique())
    head = "| k | " + " | ".join(f"c(k, {c})" for c in levels) + " |"
    lines = [head, "|---|" + "---|" * len(levels)]
    for k in ks:
        by = costs[costs[COLUMNS.k] == k].groupby("concurrency").measured_c.median()
        if len(by):
            lines.append(
                f"| {k} | " + " | ".join(f"{by.get(c, float('nan')):.2f}" for c in levels) + " |"
            )
    when = lab.recorded_on(record)
    lines.append(f"\n{when}, {record['gpu']}, vLLM {record.get('vllm', '?')}: {record['what']}")
    return "\n".join(lines)


def _routing_rows(record: Mapping[str, Any], k: int = 3) -> str:
    """Markdown rows for the README: per routing design, ρ read back at 4 positions, effective
    experts, and c(k, C) at each concurrency (a line saying so for a record without designs)."""
    table = lab.routing_table(record, k)
    if table.empty or table.routing.nunique() == 1:
        return "(this record has no routing designs: random weights only)"
    levels = sorted(table.concurrency.unique())
    lines = [
        "| routing | ρ (4 positions) | effective experts | "
        + " | ".join(f"c({k}, {c})" for c in levels)
        + " |",
        "|---|---|---|" + "---|" * len(levels),
    ]
    for design, grp in table.groupby("routing", sort=False):
        at = grp.set_index("concurrency")
        first = at.iloc[0]
        cs = " | ".join(f"{at.measured_c.get(c, float('nan')):.2f}" for c in levels)
        lines.append(f"| {design} | {first.rho_4:.2f} | {first.effective_experts:.1f} | {cs} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the two tables of docs/gpu.md from the shipped record."""
    argparse.ArgumentParser(
        prog="python -m chapters.ch06_moe.tools.moe_lab",
        description="Print docs/gpu.md's two MoE-lab tables from the shipped H200 record.",
    ).parse_args(argv)  # no options: anything given is one usage line and exit 2
    record = lab.load_lab()
    print(_readme_rows(record), "\n", _routing_rows(record), sep="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
