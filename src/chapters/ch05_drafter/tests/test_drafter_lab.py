"""chapters.ch05_drafter.drafter_lab: checkpoints, the shape table, τ in vLLM, the learning curve
(notebook 05)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from chapters.ch05_drafter import drafter_lab
from chapters.ch05_drafter.drafter_lab import (
    CheckpointSaver,
    _TauResult,
    compare_verifiers,
    eagle3_shape_table,
    plot_learning_curve,
    tau_table,
)
from helpers.common.paths import DATA_DIR
from helpers.eagle3.checkpoint import drafter_config, load_drafter, load_verifier
from helpers.eagle3.drafter import DrafterShape, Eagle3Drafter
from helpers.eagle3.train import DrafterHistory, new_drafter
from helpers.tiny.lab import random_verifier

SMALL = DrafterShape(
    hidden_size=16,
    vocab_size=64,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=8,
    intermediate_size=32,
)


def test_checkpoints_round_trip_through_load_drafter(tmp_path: Path) -> None:
    torch.manual_seed(0)
    d = Eagle3Drafter(SMALL)
    saver = CheckpointSaver(
        [0, 2], tmp_path / "ckpt", drafter_config(SMALL, [2, 4, 5], "data/tiny-qwen3-moe")
    )
    saver.save(0, d)
    saver(1, d)
    with torch.no_grad():
        d.fc.weight.add_(1.0)
    saver(2, d)
    assert sorted(saver.saved) == [0, 2] and saver.saved[2].name == "step-0002"
    loaded, config = load_drafter(saver.saved[2])
    assert config["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    for name, tensor in d.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    first, _ = load_drafter(saver.saved[0])
    assert not torch.equal(first.fc.weight, loaded.fc.weight)


def test_checkpoints_never_go_into_data() -> None:
    with pytest.raises(ValueError, match="not into the shipped data"):
        CheckpointSaver([1], DATA_DIR / "my-drafter", {})


def test_training_plan_takes_a_third_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert drafter_lab.training_plan(120, (0, 30, 120)) == (120, (0, 30, 120))
    monkeypatch.setenv("CI", "true")
    assert drafter_lab.training_plan(120, (0, 30, 120)) == (40, (0, 10, 40))


def test_shape_table_reads_real_tensors(tiny_pair) -> None:
    verifier = load_verifier(tiny_pair.verifier)
    d = new_drafter(verifier, (2, 4, 5))
    table = eagle3_shape_table(d, verifier, torch.randint(0, 100, (2, 12)), (2, 4, 5)).set_index(
        "tensor"
    )
    h, v = verifier.config.hidden_size, verifier.config.vocab_size
    assert table.loc["aux = cat(those three)", "shape"] == f"[2, 12, {3 * h}]"
    assert table.loc["aux = cat(those three)", "symbolic"] == "[B, T, 3H]"
    assert table.loc["fc(aux)", "symbolic"] == "[B, T, H]"
    assert table.loc["[embedding ‖ hidden]", "symbolic"] == "[B, T, 2H]"
    assert table.loc["norm → lm_head", "shape"] == f"[2, 12, {v}]"


def test_random_verifier_same_shape_fresh_weights(tiny_pair, tmp_path: Path) -> None:
    (tiny_pair.verifier / "tokenizer_config.json").write_text('{"marker": 1}\n')
    (tiny_pair.verifier / "README.md").write_text("model card of the trained verifier\n")
    out = random_verifier(tiny_pair.verifier, tmp_path / "random", seed=1)
    assert (out / "tokenizer_config.json").read_text() == '{"marker": 1}\n'
    assert not (out / "README.md").exists()
    report = compare_verifiers(tiny_pair.verifier, out)
    assert report["config.json identical"] and report["tensor names and shapes identical"]
    assert report["relative weight difference"] > 0.1
    original, fresh = load_verifier(tiny_pair.verifier), load_verifier(out)
    strip = lambda c: {k: v for k, v in c.to_dict().items() if k != "_name_or_path"}  # noqa: E731
    assert strip(fresh.config) == strip(original.config)
    x = torch.arange(10)[None]
    assert not torch.allclose(fresh(input_ids=x).logits, original(input_ids=x).logits)


def _result(label: str, tau: float) -> _TauResult:
    return _TauResult(
        label,
        tau,
        [tau - 1, (tau - 1) / 2, 0.1],
        drafts=10,
        accepted=5,
        output_tokens=20,
        seconds=1.0,
    )


def test_tau_table_and_learning_curve_plot() -> None:
    taus = {0: _result("step 0", 1.1), 40: _result("step 40", 1.9)}
    table = tau_table(taus)
    assert list(table.columns[:4]) == ["drafter", "tau", "accept@1", "accept@2"]
    assert "tau code" in tau_table(
        {"x": _TauResult("x", 2.0, [], 1, 1, 1, 1.0, {"code": 2.0})}, by_category=True
    )
    hist = DrafterHistory(loss=[5.0, 4.0, 3.0], agreement=[[0.1, 0.0], [0.3, 0.1], [0.5, 0.2]])
    fig = plot_learning_curve(taus, hist, _result("shipped", 2.2))
    assert len(fig.axes) == 3
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("shipped" in t for t in labels) and any("k+1 = 4" in t for t in labels)


@pytest.mark.vllm
def test_evaluate_tau_on_the_shipped_pair() -> None:
    from helpers.common.profiles import load_profile
    from helpers.common.prompts import load_prompts

    profile = load_profile("tiny")
    if not Path(profile.drafter_path(), "model.safetensors").is_file():
        pytest.skip("the shipped pair is not built (make tiny-models)")
    result = drafter_lab.evaluate_tau(
        profile,
        profile.verifier_path(),
        profile.drafter_path(),
        load_prompts(1),
        k=3,
        max_tokens=24,
    )
    assert result.drafts > 0 and len(result.per_position) == 3
    assert 1.0 <= result.tau <= 4.0 and set(result.by_category) == set(load_prompts(1))


def test_tau_table_shows_intervals_when_vllm_kept_requests() -> None:
    from helpers.common.counters import RequestAcceptance, counters_of
    from helpers.engine.runs import CategoryRun

    reqs = [RequestAcceptance((1, 1, 2, 4), 24), RequestAcceptance((0, 2, 2, 2), 18)]
    run = CategoryRun([[1], [2]], ["a", "b"], 1.0, counters_of(reqs), requests=reqs)
    result = _TauResult("x", 3.0, [], 14, 0, 2, 1.0, {"code": 3.0}, runs={"code": run})
    assert result.interval is not None and result.interval.n == 2
    assert tau_table({"x": result}).iloc[0]["accept@3 95% CI"].startswith("[")
    row = tau_table({"x": result}, by_category=True).iloc[0]
    assert row["tau 95% CI"].startswith("[") and row["tau code"].startswith(
        f"{result.interval.estimate:.2f} ["
    )


def test_tau_gain_is_paired_over_the_prompts_both_answered() -> None:
    from helpers.common.counters import RequestAcceptance, acceptance_stats, counters_of
    from helpers.common.vllm_names import STATS
    from helpers.engine.runs import CategoryRun

    def result(hists: list[tuple[int, ...]]) -> _TauResult:
        reqs = [RequestAcceptance(h, 3 * sum(h)) for h in hists]
        run = CategoryRun(
            [[1]] * len(reqs), ["a"] * len(reqs), 1.0, counters_of(reqs), requests=reqs
        )
        tau = acceptance_stats(counters_of(reqs))[STATS.tau]
        return _TauResult("x", tau, [], 1, 1, 1, 1.0, runs={"code": run})

    before = result([(9, 1, 0, 0), (8, 2, 0, 0), (10, 0, 0, 0), (7, 3, 0, 0)])
    after = result([(2, 3, 3, 2), (1, 3, 3, 3), (3, 3, 2, 2), (2, 2, 3, 3)])
    gain = drafter_lab.tau_gain(before, after)
    assert gain is not None and gain.n == 4
    assert gain.estimate == pytest.approx(after.tau - before.tau)
    assert 0 < gain.low < gain.estimate < gain.high
    worse = drafter_lab.tau_gain(after, before)
    assert worse is not None and worse.high < 0  # the same gain, the other way round
    assert drafter_lab.tau_gain(_result("a", 2.0), after) is None  # no per-request record


def test_speculators_scores_the_shipped_drafter_as_the_workbook_does() -> None:
    """speculators' own forward (its training-time test, teacher forcing) gives the workbook's
    draft_chain logits at every step, with the verifier's embeddings in place, and its KL loss
    is the workbook's soft cross-entropy less the targets' entropy."""
    from chapters.ch05_drafter.drafter_lab import speculators_ttt
    from helpers.common.paths import DATA_DIR
    from helpers.eagle3 import drafter, taps, train
    from helpers.eagle3.checkpoint import load_drafter, load_in_speculators, load_verifier
    from kit.tiny_recipe import DRAFTER_NAME

    shipped = DATA_DIR / DRAFTER_NAME
    ours_d, config = load_drafter(shipped)
    verifier = load_verifier(DATA_DIR / "tiny-qwen3-moe", device="cpu")
    model, unmatched = load_in_speculators(shipped)
    assert unmatched == []
    embed = verifier.get_input_embeddings()
    assert torch.equal(model.embed_tokens.weight, embed.weight), "the verifier's embeddings"
    aux_layers = config["eagle_aux_hidden_state_layer_ids"]
    x = torch.randint(0, 2048, (1, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        theirs = speculators_ttt(model.eval(), verifier, x, aux_layers, 3)
        loss, _ = train.ttt_loss(ours_d, verifier, x, aux_layers, 3)
        aux, _ = taps.verifier_taps(verifier, x, aux_layers)
        first = embed(torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], 1))
        ours = drafter.draft_chain(ours_d, first, aux, 3, drafter.teacher_forced(embed, x))
    assert len(theirs.logits) == 3
    for j, (o, t) in enumerate(zip(ours, theirs.logits)):
        assert (o[:, : 38 - j] - t[:, : 38 - j]).abs().max() < 1e-4, j
    assert float(loss) == pytest.approx(theirs.loss + theirs.target_entropy, rel=1e-5)
    assert theirs.target_entropy > 0


def test_param_count_counts_every_parameter() -> None:
    import torch

    from chapters.ch05_drafter.drafter_lab import param_count

    assert param_count(torch.nn.Linear(3, 2)) == 3 * 2 + 2
