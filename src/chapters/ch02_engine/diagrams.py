"""Schematic figures of the mechanism (no measured numbers in them): one draft-and-verify step, the
taps."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle

from helpers.common.plots import PALETTE, new_figure
from helpers.common.profiles import loadable_profiles
from helpers.eagle3.taps import default_aux_layers

__all__ = [
    "known_stacks",
    "draft_verify_round",
    "plot_aux_layers",
    "plot_eagle3_dataflow",
]


def _box(ax, x: float, y: float, text: str, color: str, width: float = 0.8) -> None:
    """A rounded box with centred text."""
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            width,
            0.6,
            boxstyle="round,pad=0.02",
            facecolor=color,
            edgecolor="black",
            lw=0.6,
        )
    )
    ax.text(x + width / 2, y + 0.3, text, ha="center", va="center", fontsize=9)


def draft_verify_round(k: int = 3, accepted: int = 2) -> Figure:
    """One speculative step: k sequential drafts, one verifier pass over k+1 positions, the outcome.

    With `accepted` < k the verifier's token at the first mismatch replaces the draft (a
    correction); with accepted == k every draft stands and the verifier adds a bonus token.
    Either way the step emits accepted + 1 tokens.
    """
    if not 0 <= accepted <= k:
        raise ValueError(f"accepted must be between 0 and k={k}, got {accepted}")
    fig, (ax,) = new_figure(1, width=1.25 * (k + 4), height=3.4)
    ax.grid(False)
    ax.axis("off")
    _box(ax, 0, 2, "context\n…", "#dee2e6", 1.2)
    for i in range(k):
        _box(ax, 1.5 + i, 2, f"d{i + 1}", "#cfe2ff")
    ax.text(1.5 + k + 0.2, 2.3, "drafter: k cheap steps,\none token each", fontsize=8, va="center")
    _box(ax, 0, 1, "verifier", "#dee2e6", 1.2)
    for i in range(k + 1):
        _box(ax, 1.5 + i, 1, f"v{i + 1}", "#e9ecef")
    ax.text(1.5 + k + 1.2, 1.3, "one forward pass\nover k+1 positions", fontsize=8, va="center")
    for i in range(k + 1):
        if i < accepted:
            label, color = f"d{i + 1}=v{i + 1}", PALETTE["accepted"]
        elif i == accepted:
            label, color = (
                f"v{i + 1}",
                PALETTE["bonus"] if accepted == k else PALETTE["correction"],
            )
        else:
            continue
        _box(ax, 1.5 + i, 0, label, color)
    outcome = "bonus token" if accepted == k else "correction"
    ax.text(
        1.5 + k + 1.2,
        0.3,
        f"emit {accepted} accepted + 1 {outcome}\n= {accepted + 1} tokens this step",
        fontsize=8,
        va="center",
    )
    ax.set_xlim(-0.2, k + 5.8)
    ax.set_ylim(-0.3, 2.9)
    ax.set_title(f"One EAGLE-3 step, k={k} (schematic)", fontsize=10)
    return fig


def _draw_stack(ax: Any, row: int, num_layers: int, taps: tuple[int, ...]) -> None:
    """One model's residual stream as a bar of layer cells, with its taps marked."""
    width = 1.0 / num_layers
    for k in range(num_layers):
        ax.add_patch(_cell(k * width, row, width, PALETTE["recorded"]))
    ax.plot(0, row, marker="s", ms=9, color=PALETTE["bonus"], zorder=3)
    ax.plot(1, row, marker="D", ms=8, color=PALETTE["correction"], zorder=3)
    repeated = {k for k in taps if taps.count(k) > 1}
    for i, k in enumerate(sorted(set(taps))):
        x, above = k / num_layers, i % 2 == 0
        color = (
            PALETTE["correction"] if k in repeated or not 0 <= k < num_layers else PALETTE["spec"]
        )
        ax.plot([x, x], [row - 0.3, row + 0.3], color=color, lw=2.5, zorder=4)
        label = f"hidden_states[{k}]" + (" ×2: collides" if k in repeated else "")
        y, va = (row + 0.32, "bottom") if above else (row - 0.32, "top")
        ax.annotate(label, (x, y), ha="center", va=va, fontsize=7, color=color)


def _cell(x: float, row: int, width: float, color: str) -> Any:
    """A rectangle for one decoder layer."""
    return Rectangle((x, row - 0.2), width, 0.4, facecolor=color, edgecolor="white", lw=0.3)


def known_stacks(named: str | None = None) -> dict[str, int]:
    """name -> num_hidden_layers, one row per distinct verifier of the profiles (architecture,
    layers, hidden size), shallowest first; a row is named after its first profile, or `named`."""
    loaded = loadable_profiles()
    loaded.sort(key=lambda p: p.name != named)  # stable: `named` first, the rest in name order
    stacks: dict[tuple[Any, ...], tuple[str, int]] = {}
    for p in loaded:
        if p.verifier_layers is not None:
            key = (p.verifier_architecture, p.verifier_layers, p.verifier_hidden_size)
            stacks.setdefault(key, (p.name, p.verifier_layers))
    return dict(sorted(stacks.values(), key=lambda item: item[1]))


def plot_aux_layers(
    stacks: dict[str, int] | None = None,
    taps: dict[str, tuple[int, ...]] | None = None,
) -> Figure:
    """Each verifier's layer stack (depth scaled to 1) with its EAGLE-3 taps (default: every
    verifier of data/profiles/, known_stacks)."""
    stacks = stacks or known_stacks()
    taps = taps or {}
    fig, (ax,) = new_figure(1, width=9.0, height=1.1 * len(stacks) + 1.4)
    for row, (model, num_layers) in enumerate(reversed(list(stacks.items()))):
        chosen = tuple(taps.get(model) or default_aux_layers(num_layers))
        _draw_stack(ax, row, num_layers, chosen)
    ax.set_yticks(range(len(stacks)))
    ax.set_yticklabels([f"{m}\nL={n}" for m, n in reversed(list(stacks.items()))], fontsize=8)
    ax.set_xlim(-0.06, 1.06)
    ax.set_ylim(-0.7, len(stacks) - 0.3)
    ax.set_xticks([0, 0.5, 1])
    ax.set_xticklabels(["embeddings\n(hidden_states[0])", "depth k / L", "final norm → lm_head"])
    ax.grid(False)
    ax.set_title("EAGLE-3 taps: residual stream after k layers (vLLM default (2, L//2, L-3))")
    return fig


#: Where each box of the dataflow lives in vLLM (the installed code is quoted in notebook 02); the
#: verifier's model class depends on its architecture (vllm_path.eagle3_path names it).
_DATAFLOW_NAMES: dict[str, str] = {
    "taps": "verifier model's forward → _maybe_add_hidden_state",
    "concat": "GPUModelRunner.propose_draft_token_ids: torch.cat",
    "fc": "Eagle3LlamaForCausalLM.combine_hidden_states",
    "layer": "llama_eagle3.LlamaDecoderLayer.forward: cat(embeds, hidden)",
    "head": "Eagle3LlamaForCausalLM.compute_logits (+ d2t)",
}


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float], text: str = "") -> None:
    """An arrow from start to end with an optional label at its middle."""
    ax.annotate("", end, start, arrowprops={"arrowstyle": "->", "lw": 1.0})
    if text:
        mid = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
        ax.text(mid[0], mid[1] + 0.08, text, fontsize=7, ha="center", va="bottom")


def plot_eagle3_dataflow(
    num_layers: int,
    taps: tuple[int, ...],
    hidden: int,
    vocab: int,
    draft_vocab: int,
    names: Mapping[str, str] | None = None,
) -> Figure:
    """One EAGLE-3 draft step: verifier taps → concat 3H → fc → H; [embed ‖ H] → layer → lm_head.

    `names` replaces entries of DATAFLOW_NAMES, e.g. the verifier's own model class for "taps".
    """
    names = {**_DATAFLOW_NAMES, **(names or {})}
    fig, (ax,) = new_figure(1, width=11.5, height=4.4)
    ax.grid(False)
    ax.axis("off")
    grey, blue, green = "#dee2e6", "#cfe2ff", PALETTE["accepted"]
    ax.add_patch(Rectangle((0, 0.2), 1.1, 3.6, facecolor=grey, edgecolor="black", lw=0.6))
    ax.text(0.55, 4.0, f"verifier\n{num_layers} layers", ha="center", fontsize=9)
    ys = {}
    for i, t in enumerate(sorted(taps)):
        y = 0.2 + 3.6 * t / num_layers
        ys[t] = y
        ax.plot([0, 1.1], [y, y], color=PALETTE["spec"], lw=2)
        ax.text(-0.08, y, f"h[{t}]", ha="right", va="center", fontsize=8)
        _arrow(ax, (1.1, y), (2.0, 1.65 + 0.2 * i))
    ax.text(0.55, 0.0, names["taps"], ha="left", fontsize=7, style="italic")
    _box(ax, 2.0, 1.55, f"concat\n{len(taps)}×H = {len(taps) * hidden}", blue, 1.3)
    ax.text(2.65, 2.55, names["concat"], ha="center", fontsize=7, style="italic")
    _arrow(ax, (3.3, 1.85), (3.8, 1.85))
    _box(ax, 3.8, 1.55, f"fc\n{len(taps) * hidden} → {hidden}", blue, 1.1)
    ax.text(4.35, 1.3, names["fc"], ha="center", fontsize=7, style="italic", va="top")
    _box(ax, 3.8, 3.0, "embed(next token)\n" + str(hidden), grey, 1.5)
    _arrow(ax, (4.9, 1.85), (5.7, 2.2), "H")
    _arrow(ax, (5.3, 3.3), (5.7, 2.5), "H")
    _box(ax, 5.7, 2.05, f"cat → {2 * hidden}\n1 decoder layer", green, 1.6)
    ax.text(6.5, 2.75, names["layer"], ha="center", fontsize=7, style="italic")
    _arrow(ax, (7.3, 2.35), (7.8, 2.35), "H")
    _box(ax, 7.8, 2.05, f"lm_head\n{hidden} → {draft_vocab}", blue, 1.3)
    ax.text(8.9, 1.8, names["head"], ha="center", fontsize=7, style="italic", va="top")
    _arrow(ax, (9.1, 2.35), (9.6, 2.35))
    vocab_note = "" if draft_vocab == vocab else f"\n+ d2t → id < {vocab}"
    _box(ax, 9.6, 2.05, "argmax" + vocab_note, PALETTE["bonus"], 1.4)
    ax.annotate(
        "",
        (5.9, 2.05),
        (7.1, 2.05),
        arrowprops={"arrowstyle": "->", "lw": 1.0, "ls": "--", "connectionstyle": "arc3,rad=-0.6"},
    )
    ax.text(
        6.5,
        0.85,
        "draft steps 2…k: the layer's own pre-norm\noutput replaces fc's",
        fontsize=7,
        ha="center",
    )
    ax.set_xlim(-0.6, 11.2)
    ax.set_ylim(-0.2, 4.5)
    ax.set_title("One EAGLE-3 draft step in vLLM (schematic, sizes of this pair)", fontsize=10)
    return fig
