"""The exercises of notebooks 01-08, each variant run at CI size by calling the same helpers.

Every exercise in notebooks 01-08 is runnable by changing the parameters cell or by the code its
text shows; re-executing whole notebooks per variant would take many minutes, so these tests call
the functions those cells call, with the exercise's arguments, at tiny sizes. One test starts a
vLLM engine (marked `vllm`, about 20 s on 2 CPU cores); the rest run in seconds. Variants not run
here say why in the exercise text:

- 02 ex. 1 K = 5 and 03's k sweep: notebook 03's own nbval run starts an engine per k = 1..5;
- 03 ex. 5 (N_PROMPTS = 8 doubles a 3-minute sweep): the interval's 1/sqrt(2) shrink is checked on
  synthetic requests;
- 04 ex. 1/2/4 (each K needs two server starts and the benchmark; qwen3-30b-a3b needs a GPU and the
  hub): the commands are checked, and the in-process engine runs at K = 1;
- 05 ex. 3 (300 training steps) and τ of every trained variant (one engine start each): the
  variants train for two steps;
- 07 ex. 1, 2, 6 and 7 (an n-gram engine per LOOKUP, 3,000 samples per side, a GPU with Model
  Runner V2, an engine per K) and ex. 5's 200 steps: ex. 3's check on a run without drafts, ex. 4
  and ex. 5's zero steps run here;
- 08 ex. 2 and 3 (TEMPERATURE and N_PER_CATEGORY change what the notebook's engines run) and the
  engines of ex. 1 and 4: the validator of ex. 1 and the schema and sampling of ex. 4 run here.

The graded exercises (03 ex. 6-8, 05 ex. 5: the learner writes the algorithm in exercises/) are
tests/kit/test_grader.py's: it grades the reference solutions with the same checks.
"""

from __future__ import annotations

import json
import math
import random

import pandas as pd
import pytest

from helpers.common.paths import DATA_DIR
from helpers.common.profiles import load_profile

SHIPPED = (DATA_DIR / "tiny-qwen3-moe-eagle3" / "model.safetensors").is_file()
needs_shipped = pytest.mark.skipif(not SHIPPED, reason="needs the shipped tiny pair")


@pytest.fixture(scope="module")
def tiny():
    return load_profile("tiny")


@pytest.fixture(scope="module")
def tok(tiny):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny.verifier_path())


# ------------------------------------------------------------------------------------ notebook 01

MULTI = [
    {"role": "system", "content": "You are a concise assistant."},
    {"role": "user", "content": "Make JSON records for: name Ada Moreno, age 41."},
    {"role": "assistant", "content": '[{"name": "Ada Moreno", "age": 41}]'},
    {"role": "user", "content": "Now add her city, Porto."},
]


def test_01_ex1_no_generation_prompt_ends_after_the_closed_turn(tok) -> None:
    from helpers.common.chat import render, token_table

    last = token_table(tok, render(tok, MULTI, add_generation_prompt=False)).tail(3)
    assert list(last.text)[-2:] == [repr("<|im_end|>"), repr("\n")], last


def test_01_ex2_json_takes_more_tokens_per_character(tok) -> None:
    from helpers.common.chat import token_table

    json_text = '[{"name": "Ada Moreno", "age": 41, "city": "Porto"}]'
    english = "Ada Moreno is forty-one and lives in the city of Porto."
    per_char = [len(token_table(tok, t)) / len(t) for t in (json_text, english)]
    assert per_char[0] > per_char[1], per_char


def test_01_ex3_hub_profile_offline_falls_back_to_tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers.common import chat

    monkeypatch.setattr(chat, "hub_reachable", lambda *a, **k: False)
    loaded = chat.load_tokenizer(load_profile("qwen3-30b-a3b"))
    assert "unreachable" in loaded.note and len(loaded.tokenizer) > 0


@pytest.mark.usefixtures("qwen3_built")
def test_01_ex4_qwens_template_writes_an_empty_think_block_before_a_final_answer(tok) -> None:
    from helpers.common.chat import load_qwen3, render

    closed = [*MULTI, {"role": "assistant", "content": "Done."}]
    qwen = render(load_qwen3().tokenizer, closed, add_generation_prompt=False)
    assert qwen.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\nDone.<|im_end|>\n"), qwen
    assert render(tok, closed, add_generation_prompt=False).endswith(
        "<|im_start|>assistant\nDone.<|im_end|>\n"
    )


# ------------------------------------------------------------------------------------ notebook 02


@needs_shipped
def test_02_ex3_wrong_taps(tiny, tmp_path) -> None:
    """Out of range and repeated ids are refused; valid ids the drafter was not trained on pass."""
    from helpers.common.configs import read_config
    from helpers.eagle3.taps import aux_layers_for
    from helpers.engine.pairing import edited_copy, validate_pair

    verifier_cfg = read_config(tiny.verifier_path())
    taps = aux_layers_for(verifier_cfg, read_config(tiny.drafter_path()))
    L = verifier_cfg["num_hidden_layers"]
    codes = {}
    for ids in ([taps[0], taps[1], L], [taps[0], taps[1], taps[1]], [taps[0], taps[1], L - 1]):
        wrong = edited_copy(
            tiny.drafter_path(), tmp_path / "wrong-taps", eagle_aux_hidden_state_layer_ids=ids
        )
        report = validate_pair(tiny.verifier_path(), wrong)
        codes[ids[-1] if ids[-1] != taps[1] else "repeated"] = (report.ok, report.codes())
    assert codes[L][0] is False and "aux_layers_invalid" in codes[L][1], codes
    assert codes["repeated"][0] is False and "aux_layers_invalid" in codes["repeated"][1], codes
    assert codes[L - 1][0] is True, codes  # loads, would accept little: only τ shows it


# ----------------------------------------------------------------------- notebooks 02 and 03, vLLM


@pytest.mark.vllm
@needs_shipped
def test_02_ex1_and_03_ex1_ex2_ex3_on_one_engine(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    """One engine at k=1: 02 ex. 1 (K=1), 03 ex. 1 (low temperatures), 03 ex. 2 (max_tokens=16)
    against the reference decoder, and 03 ex. 3 (the late accept rule) caught by the same check."""
    from chapters.ch03_acceptance.experiments import _temperature_runs
    from helpers.common.counters import acceptance_stats
    from helpers.common.prompts import load_prompts
    from helpers.eagle3 import decode
    from helpers.engine.lifecycle import engine_kwargs, open_engine
    from helpers.engine.runs import pooled, run_categories, sampling

    k, max_tokens = 1, 16
    prompts = load_prompts(1)
    with open_engine(**engine_kwargs(tiny, k=k)) as llm:
        runs = run_categories(llm, prompts, sampling(max_tokens))
        flat = [p for c in runs for p in prompts[c]]
        temps = _temperature_runs(llm, flat, [0.0, 0.1, 0.2, 0.3], max_tokens, seed=0)

    tau = acceptance_stats(pooled(runs))["spec_decode_acceptance_length"]
    assert 1.0 < tau <= k + 1, tau  # 02 ex. 1: never above K + 1
    for t, run in temps.items():  # 03 ex. 1
        stats = run.stats
        assert stats["spec_decode_num_drafts"] > 0, t
        assert 1.0 <= stats["spec_decode_acceptance_length"] <= k + 1, (t, stats)

    vllm_ids = [ids for run in runs.values() for ids in run.token_ids]
    pair = decode.load_pair(tiny)
    on_time = decode._generate_all(pair, flat, k, max_tokens)
    agree = decode.agreement_table(on_time, vllm_ids, pooled(runs))
    assert (agree.difference == 0).all(), agree.to_string()  # 03 ex. 2: still exact

    accept = decode.accept_greedy

    def late(drafts, targets):  # 03 ex. 3, as the exercise writes it
        return accept(drafts, list(targets[1:]) + [targets[-1]])

    monkeypatch.setattr(decode, "accept_greedy", late)
    shifted = decode._generate_all(pair, flat, k, max_tokens)
    agree_late = decode.agreement_table(shifted, vllm_ids, pooled(runs))
    assert (agree_late.difference != 0).any(), agree_late.to_string()


# ------------------------------------------------------------------------------------ notebook 03


def test_03_ex4_implied_step_cost_column() -> None:
    from chapters.ch03_acceptance.experiments import _throughput_vs_k
    from helpers.common.tables import K_COLUMN

    rows = {
        0: {"output_tokens_per_s": 10.0, "natural_output_tokens_per_s": 10.0,
            "spec_decode_acceptance_length": 1.0},
        3: {"output_tokens_per_s": 15.0, "natural_output_tokens_per_s": 14.0,
            "spec_decode_acceptance_length": 3.0},
    }  # fmt: skip
    cols = [K_COLUMN, "spec_decode_acceptance_length", "speedup_vs_plain",
            "implied_relative_step_cost"]  # fmt: skip
    table = _throughput_vs_k(rows)[cols].set_index(K_COLUMN)
    assert table.implied_relative_step_cost[3] == pytest.approx(3.0 / 1.5)


def test_03_ex5_intervals_shrink_about_one_over_sqrt2() -> None:
    """Doubling the requests narrows the interval of τ over requests by about 1/sqrt(2)."""
    from helpers.analytics.intervals import tau_interval
    from helpers.common.counters import RequestAcceptance

    rng = random.Random(0)

    def request() -> RequestAcceptance:
        p = rng.uniform(0.3, 0.9)  # requests differ in how well the drafter fits them
        hist = [0] * 4
        for _ in range(20):  # 20 steps of k = 3
            a = 0
            while a < 3 and rng.random() < p:
                a += 1
            hist[a] += 1
        return RequestAcceptance(tuple(hist), 60)

    def width(n: int) -> float:
        iv = tau_interval([request() for _ in range(n)])
        return iv.high - iv.low

    ratios = [width(200) / width(100) for _ in range(3)]
    ratio = sum(ratios) / len(ratios)
    assert abs(ratio - 1 / math.sqrt(2)) < 0.12, ratios


@pytest.mark.vllm
@needs_shipped
def test_03_ex9_the_first_rates_do_not_depend_on_k(tiny) -> None:
    """03 ex. 9 at CI size (2 prompts per task, 64 tokens): the k = 5 run's first three
    per-position rates pass vLLM CI's check against the k = 3 run's."""
    from chapters.ch03_acceptance import harness
    from helpers.engine import lifecycle, runs

    rates = {}
    for k in (3, 5):
        with lifecycle.open_engine(**lifecycle.engine_kwargs(tiny, k=k)) as llm:
            done = runs.run_categories(
                llm, harness.dataset_prompts("workbook", 2), runs.sampling(64)
            )
        row = harness.measure(done, k).set_index("subset").loc["all"]
        rates[k] = [float(row[f"pos_{i}"]) for i in range(k)]
    three, five = rates[3], rates[5][:3]
    assert harness.check_row(1 + sum(five), five, 1 + sum(three), three, 0.05, 0.05) == []


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
    from chapters.ch04_serving.server import _model_name, _serve_command, launch_command

    own = _serve_command(tiny, k=tiny.num_speculative_tokens, short_form=True)
    assert "--speculative-config" not in own  # the drafter's own k needs no override
    argv = _serve_command(tiny, k=5, short_form=True)
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {"num_speculative_tokens": 5}
    launched = launch_command(tiny, k=5, short_form=True)
    assert launched[launched.index("--served-model-name") + 1] == _model_name(tiny)


def test_04_ex3_ttft_and_tpot_columns() -> None:
    from chapters.ch04_serving.bench import speedup_table

    results = pd.DataFrame(
        [{"mode": m, "concurrency": c, "repeat": 0, "output_tok_s": 10.0 * (1 + (m == "spec")),
          "mean_ttft_ms": 50.0, "mean_tpot_ms": 20.0 / (1 + (m == "spec"))}
         for m in ("spec", "plain") for c in (1, 4)]
    )  # fmt: skip
    table = speedup_table(results).reset_index()
    cols = ["spec_ttft_ms", "plain_ttft_ms", "spec_tpot_ms", "plain_tpot_ms"]
    assert table.set_index("concurrency")[cols].notna().all().all()


def test_04_ex4_gpu_profile_command() -> None:
    from chapters.ch04_serving.server import serve_command_text

    profile = load_profile("qwen3-30b-a3b")
    text = serve_command_text(profile)
    assert profile.verifier in text and profile.drafter in text and "eagle3" in text


# ------------------------------------------------------------------------------------ notebook 05


@needs_shipped
def test_05_ex1_ex2_ex4_train_two_steps(tiny, tok, tmp_path) -> None:
    """CORPUS_SHARE = 1.0 with TTT_STEPS = 1 on the verifier, then a drafter for a random verifier,
    saved in the speculators format and accepted by the pairing validator."""
    import torch

    from chapters.ch05_drafter.drafter_lab import CheckpointSaver, corpus_rows
    from helpers.common.configs import read_config
    from helpers.eagle3.checkpoint import drafter_config, load_verifier
    from helpers.eagle3.taps import drafter_aux_layer_ids
    from helpers.eagle3.train import MixedSampler, new_drafter, train_drafter
    from helpers.engine.pairing import validate_pair
    from helpers.tiny.lab import random_verifier

    torch.manual_seed(0)
    aux = list(drafter_aux_layer_ids(read_config(tiny.drafter_path())))
    corpus = corpus_rows(tok, 2, 0)
    sampler = MixedSampler([[0, 1, 2]], corpus, 32, 1.0, 0)  # share 1.0: corpus rows only
    assert not any(row[:6] == [0, 1, 2, 0, 1, 2] for row in sampler.batch(4).tolist())
    verifier = load_verifier(tiny.verifier_path())
    drafter = new_drafter(verifier, aux, 0)
    history = train_drafter(drafter, verifier, sampler, 2, aux, ttt_steps=1, batch_size=2)
    assert len(history.loss) == 2 and all(len(a) == 1 for a in history.agreement)  # TTT_STEPS = 1

    random_dir = random_verifier(tiny.verifier_path(), tmp_path / "random-verifier", 0)
    stranger = load_verifier(random_dir)
    for_stranger = new_drafter(stranger, aux, 0)
    saver = CheckpointSaver(
        [2], tmp_path / "for-random", drafter_config(for_stranger.shape, aux, str(random_dir))
    )
    train_drafter(for_stranger, stranger, sampler, 2, aux, 2, 2, callback=saver)
    assert saver.saved[2].is_dir()
    assert validate_pair(random_dir, saver.saved[2]).ok


def test_05_ex3_training_plan_for_300_steps() -> None:
    from chapters.ch05_drafter.drafter_lab import training_plan

    steps, eval_at = training_plan(300, (0, 100, 200, 300))
    assert eval_at[0] == 0 and eval_at[-1] == steps and len(eval_at) == 4


# ------------------------------------------------------------------------------------ notebook 06


@needs_shipped
def test_06_ex1_wider_windows(tiny, tok) -> None:
    from chapters.ch06_moe.moe import _router_choices, union_table
    from helpers.common.prompts import as_messages, load_prompts
    from helpers.eagle3.checkpoint import load_verifier

    verifier = load_verifier(tiny.verifier_path())
    E, A = verifier.config.num_experts, verifier.config.num_experts_per_tok
    choices = []
    for p in [ps[0] for ps in load_prompts(1).values()][:2]:
        ids = tok.apply_chat_template(
            as_messages(p), add_generation_prompt=True, return_tensors="pt", return_dict=True
        )["input_ids"]
        out = verifier.generate(ids, max_new_tokens=24, do_sample=False)[0].tolist()
        choices.append((_router_choices(verifier, out), ids.shape[1]))
    windows = union_table(choices, [1, 2, 4, 8, 12, 16], E, A)
    assert len(windows) == 6
    assert (windows.measured_union <= windows.independent_union + 1e-9).all(), windows
    assert (windows.measured_union >= windows.shared_bound - 1e-9).all(), windows


def _lab_costs() -> dict[int, dict[int, float]]:
    """Notebook 06 section 6's costs[C][k]: the recorded lab's c(k, C), median over the trusted cells."""
    from chapters.ch06_moe import lab
    from helpers.analytics import speedup
    from helpers.common.tables import K_COLUMN

    table = speedup.lab_step_costs(lab.load_lab())
    by = table.pivot_table(
        index=K_COLUMN, columns="concurrency", values="measured_c", aggfunc="median"
    )
    return {int(b): {int(k): float(v) for k, v in by[b].dropna().items()} for b in by.columns}


def _schedule(alpha: float) -> list[tuple[int, int, int]]:
    """Section 6's schedule for the i.i.d. drafter of acceptance `alpha`."""
    from chapters.ch06_moe import schedule

    costs = _lab_costs()
    flat = [j for t in schedule.iid_traces(alpha, 8, 64, 5, seed=0) for j in t]
    taus = {k: schedule.trace_tau(flat, k) for k in costs[min(costs)]}
    return schedule.schedule_ranges({b: schedule.best_k(taus, c)[0] for b, c in costs.items()})


def test_06_ex2_alpha_moves_the_schedule_and_k_zero_ranges_matter() -> None:
    from chapters.ch06_moe import schedule

    high, low = _schedule(0.6), _schedule(0.15)
    assert high != low, (high, low)
    assert sum(r[2] == 0 for r in low) >= sum(r[2] == 0 for r in high), (low, high)
    if any(r[2] == 0 for r in low):  # delete the k = 0 ranges: vLLM speculates there
        last = max(r[1] for r in low)
        kept = schedule.dense_lookup(low, last, 5)
        dropped = [r for r in low if r[2] > 0]
        if dropped and dropped[0][0] == 1:
            gone = schedule.dense_lookup(dropped, last, 5)
            assert any(a == 0 and b > 0 for a, b in zip(kept[1:], gone[1:]))


def test_06_ex3_a_smaller_draft_vocabulary_lowers_c() -> None:
    import dataclasses

    from chapters.ch06_moe import lab

    record = lab.load_lab()
    shape, context = lab.lab_shape(record), lab.lab_context(record)
    fit = lab.fit_step_model(lab.cells(record)[lambda d: d.routing == lab.AS_LOADED])
    cs = [
        lab.model_c(fit, dataclasses.replace(shape, draft_vocab=v), 3, conc, 0.0, context)
        for v in (8000, 32000, 151936)
        for conc in (1,)
    ]
    assert cs[0] <= cs[1] <= cs[2], cs  # equal only if the fit gave bytes no weight


def test_06_ex4_probing_less_often() -> None:
    from chapters.ch06_moe import schedule

    costs = _lab_costs()
    traces = {"weak": schedule.iid_traces(0.15, 4, 64, 5, seed=1)}
    ranges = {"weak": [(1, max(costs), 0)]}
    often = schedule.replay_table(traces, costs, ranges, probe_every=16)
    rarely = schedule.replay_table(traces, costs, ranges, probe_every=64)
    assert (rarely.speculated_share <= often.speculated_share + 1e-9).all()


# ------------------------------------------------------------------------------------ notebook 07


def test_07_ex3_position_zero_alone_cannot_pass_without_drafts() -> None:
    """POSITIONS = [0]: the prefill's token, identical in law on both sides; the check still
    refuses samples drawn while no draft was scheduled."""
    from chapters.ch07_field.distribution import lossless_test
    from helpers.common.counters import SpecCounters

    rng = random.Random(0)
    draws = [[[rng.randrange(3) for _ in range(4)] for _ in range(200)] for _ in range(2)]
    other = [[[rng.randrange(3) for _ in range(4)] for _ in range(200)] for _ in range(2)]
    with_drafts = lossless_test(draws, other, SpecCounters(10, 30, 12), [0], 0.01, 200)
    without = lossless_test(draws, other, SpecCounters(), [0], 0.01, 200)
    assert with_drafts.passes and not without.passes


def test_07_ex4_a_smaller_draft_vocabulary_leaves_more_tokens_outside() -> None:
    """DRAFT_VOCAB = 128 instead of 512: the ceiling (share outside) can only grow."""
    from helpers.eagle3.vocab import draft_vocab, outside_share

    rng = random.Random(0)
    answers = [[int(rng.paretovariate(1.2)) % 2048 for _ in range(200)] for _ in range(16)]
    small, large = draft_vocab(answers, 128), draft_vocab(answers, 512)
    assert len(small) <= 128 and set(small) <= set(large)
    assert outside_share(answers, small) >= outside_share(answers, large)


@needs_shipped
def test_07_ex5_zero_training_steps_saves_the_pruned_drafter_unchanged(tiny, tmp_path) -> None:
    """VOCAB_TRAIN_STEPS = 0: the loop runs no step and the saved drafter is the pruned one."""
    import torch

    from helpers.eagle3.checkpoint import load_drafter, load_verifier, save_drafter
    from helpers.eagle3.taps import drafter_aux_layer_ids
    from helpers.eagle3.train import MixedSampler, train_drafter
    from helpers.eagle3.vocab import prune_draft_vocab
    from helpers.engine.pairing import validate_pair

    pruned = prune_draft_vocab(tiny.drafter_path(), tmp_path / "pruned", list(range(0, 2048, 8)))
    drafter, config = load_drafter(pruned)
    before = {k: v.clone() for k, v in drafter.state_dict().items()}
    rows = [list(range(i, i + 40)) for i in range(8)]
    history = train_drafter(
        drafter,
        load_verifier(tiny.verifier_path()),
        MixedSampler(rows, rows, 32, 0.0, 0),
        0,
        list(drafter_aux_layer_ids(config)),
    )
    assert history.loss == []
    save_drafter(drafter, tmp_path / "trained", config)
    after, _ = load_drafter(tmp_path / "trained")
    assert all(torch.equal(before[k], v) for k, v in after.state_dict().items())
    assert validate_pair(tiny.verifier_path(), tmp_path / "trained").ok


# ------------------------------------------------------------------------------------ notebook 08


@needs_shipped
def test_08_ex1_taps_one_layer_earlier_pass_the_validator(tiny, tmp_path) -> None:
    """AUX_SHIFT = -1: still inside the verifier, so the validator has nothing to say."""
    from helpers.engine.pairing import edited_copy, validate_pair

    taps = validate_pair(tiny.verifier_path(), tiny.drafter_path()).aux_layers
    earlier = edited_copy(
        tiny.drafter_path(),
        tmp_path / "earlier",
        eagle_aux_hidden_state_layer_ids=[t - 1 for t in taps],
    )
    report = validate_pair(tiny.verifier_path(), earlier)
    assert report.problems == [] and report.aux_layers == tuple(t - 1 for t in taps)


def test_08_ex4_a_schema_in_your_own_field_order() -> None:
    """The exercise's order builds a schema that requires every field, in that order."""
    pytest.importorskip("vllm")
    from chapters.ch08_low_acceptance import mismatch

    order = ("active", "name", "age", "city", "job", "pet", "id")
    schema = mismatch.with_field_order(mismatch.RECORDS_SCHEMA, order)
    params = mismatch.schema_sampling(32, schema)
    assert params.structured_outputs.json["items"]["required"] == list(order)
