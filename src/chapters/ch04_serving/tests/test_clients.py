"""chapters.ch04_serving.clients: SSE parsing, TTFT/TPOT arithmetic, /metrics parsing (pure), and
what an error from a broken server says (server stand-ins, no vLLM)."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from chapters.ch04_serving.clients import (
    _DONE,
    RESPONSE_KEYS,
    _chat_payload,
    _parse_sse_line,
    _result_from_events,
    chat,
    complete_tokens,
    spec_counters_from_text,
    stream_chat,
)
from chapters.ch04_serving.server import VllmServer, _free_port
from helpers.common.counters import SpecCounters, acceptance_stats
from helpers.common.paths import REPO_ROOT


def chunk(content: str | None = None, role: str | None = None, finish: str | None = None) -> dict:
    """A chat.completion.chunk event as vLLM streams it."""
    delta = {k: v for k, v in (("role", role), ("content", content)) if v is not None}
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def usage(prompt: int, completion: int) -> dict:
    """The final usage-only chunk sent with stream_options.include_usage."""
    return {
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def sse(event: dict | str) -> bytes:
    """An event as its SSE `data:` line."""
    return f"data: {event if isinstance(event, str) else json.dumps(event)}".encode()


def test_parse_sse_line_kinds() -> None:
    assert _parse_sse_line(sse(chunk("hi"))) == chunk("hi")
    assert _parse_sse_line("data: [DONE]") == _DONE
    assert _parse_sse_line(b"") is None
    assert _parse_sse_line(": keep-alive") is None
    assert _parse_sse_line("event: message") is None
    assert _parse_sse_line('data:{"a": 1}') == {"a": 1}  # the space after the colon is optional


def test_stream_result_timings_from_canned_events() -> None:
    # Sent at t=10.0; role-only chunk at 10.05 (no token); tokens at 10.2, 10.3, 10.6 (a chunk of 3 tokens).
    lines = [
        sse(chunk(role="assistant", content="")),
        sse(chunk("Hel")),
        sse(chunk("lo")),
        sse(chunk(" big world", finish="length")),
        sse(usage(12, 5)),
        b"",
        sse(_DONE),
    ]
    times = [10.05, 10.2, 10.3, 10.6, 10.61, 10.61, 10.62]
    events = [(t, ev) for t, ev in zip(times, map(_parse_sse_line, lines)) if ev is not None]
    r = _result_from_events(events, start=10.0)
    assert r.text == "Hello big world"
    assert r.ttft == pytest.approx(0.2)
    assert (r.output_tokens, r.prompt_tokens, r.chunks, r.finish_reason) == (5, 12, 3, "length")
    assert r.tpot == pytest.approx((10.6 - 10.2) / (5 - 1))
    assert r.latency == pytest.approx(0.62)
    assert r.output_tps == pytest.approx(5 / 0.62)
    assert r.tokens_per_chunk == pytest.approx(5 / 3)


def test_stream_without_usage_counts_chunks() -> None:
    events = [(1.1, chunk("a")), (1.3, chunk("b")), (1.4, _DONE)]
    r = _result_from_events(events, start=1.0)
    assert r.output_tokens == 2 and r.tpot == pytest.approx(0.2)


def test_single_token_has_no_tpot() -> None:
    r = _result_from_events([(0.5, chunk("x")), (0.6, usage(3, 1))], start=0.0)
    assert r.tpot == 0.0 and r.ttft == pytest.approx(0.5)


def test_stream_error_event_raises() -> None:
    with pytest.raises(RuntimeError, match="server error"):
        _result_from_events([(0.1, {"error": {"message": "boom"}})], start=0.0)


METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny-qwen3-moe"} 0.0
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny-qwen3-moe"} 94.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="tiny-qwen3-moe"} 6.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="tiny-qwen3-moe"} 1.7960575305227275e+09
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny-qwen3-moe"} 282.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="tiny-qwen3-moe"} 18.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny-qwen3-moe"} 150.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny-qwen3-moe",position="0"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny-qwen3-moe",position="2"} 25.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny-qwen3-moe",position="1"} 45.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_created Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_created gauge
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="0",model_name="tiny-qwen3-moe",position="0"} 1.79e+09
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="0",model_name="tiny-qwen3-moe",position="1"} 1.79e+09
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="0",model_name="tiny-qwen3-moe",position="2"} 1.79e+09
"""


def test_metrics_text_sums_label_sets_and_orders_positions() -> None:
    c = spec_counters_from_text(METRICS)
    assert c == SpecCounters(
        num_drafts=100, num_draft_tokens=300, num_accepted_tokens=150, accepted_per_pos=(80, 45, 25)
    )


def test_metrics_delta_gives_bench_serve_keys() -> None:
    stats = acceptance_stats(spec_counters_from_text(METRICS) - SpecCounters())
    assert stats["spec_decode_acceptance_length"] == pytest.approx(2.5)
    assert stats["spec_decode_acceptance_rate"] == pytest.approx(50.0)
    assert stats["spec_decode_per_position_acceptance_rates"] == pytest.approx([0.8, 0.45, 0.25])


def test_plain_server_metrics_give_zero_counters() -> None:
    plain = METRICS.split("# HELP vllm:spec_decode")[0]
    assert spec_counters_from_text(plain) == SpecCounters()


def test_chat_payload_passes_extra_keys() -> None:
    p = _chat_payload("m", [], max_tokens=8, temperature=0.5, stream=False, ignore_eos=True)
    assert p == {
        "model": "m",
        "messages": [],
        "max_tokens": 8,
        "temperature": 0.5,
        "stream": False,
        "ignore_eos": True,
    }


# ---------------------------------------------------------------- per-request acceptance, engine stats


SPEC_BLOCK = {
    "mean_acceptance_length": 3.0,
    "draft_acceptance_rate": 2 / 3,
    "acceptance_histogram": [1, 0, 1, 2],
    "num_spec_steps": 4,
    "num_accepted_draft_tokens": 8,
    "num_draft_tokens": 12,
    "num_spec_tokens": 3,
    "per_step_accepted": None,
    "per_step_drafted": None,
}


#: Each response key, the vLLM file that defines it, and how that file spells it.
RESPONSE_KEYS_IN = (
    (RESPONSE_KEYS.metrics, "entrypoints/openai/chat_completion/protocol.py", r"\b{}\s*:"),
    (RESPONSE_KEYS.speculative_decoding, "entrypoints/generate/base/protocol.py", r"\b{}\s*:"),
    (RESPONSE_KEYS.histogram, "v1/metrics/stats.py", r'"{}"'),
    (RESPONSE_KEYS.num_draft_tokens, "v1/metrics/stats.py", r'"{}"'),
)


@pytest.mark.parametrize(("name", "file", "pattern"), RESPONSE_KEYS_IN, ids=lambda x: str(x)[:40])
def test_response_keys_are_the_installed_vllms(name: str, file: str, pattern: str) -> None:
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        pytest.skip("vLLM is not installed")
    text = (Path(spec.origin).parent / file).read_text()
    assert re.search(pattern.format(re.escape(name)), text), f"{name} not found in {file}"


def test_response_acceptance_reads_the_servers_record() -> None:
    from chapters.ch04_serving.clients import response_acceptance

    acc = response_acceptance({"choices": [], "metrics": {"speculative_decoding": SPEC_BLOCK}})
    assert acc is not None and acc.histogram == (1, 0, 1, 2) and acc.num_draft_tokens == 12
    # the record's own summary agrees with the counters built from its histogram
    stats = acceptance_stats(acc.counters)
    assert stats["spec_decode_acceptance_length"] == SPEC_BLOCK["mean_acceptance_length"]
    assert acc.counters.accepted_per_pos == (3, 3, 2)
    assert response_acceptance({"choices": []}) is None  # a vLLM without the flag
    assert response_acceptance({"metrics": {"speculative_decoding": None}}) is None


def test_the_final_usage_chunk_brings_the_requests_acceptance() -> None:
    final = {**usage(12, 3), "metrics": {"speculative_decoding": SPEC_BLOCK}}
    r = _result_from_events(
        [(10.2, chunk("a")), (10.3, chunk("bc", finish="length")), (10.35, final)], start=10.0
    )
    assert r.acceptance is not None and r.acceptance.histogram == (1, 0, 1, 2)
    assert r.latency == pytest.approx(0.35) and r.tpot == pytest.approx(0.1 / 2)  # 3 tokens
    plain = _result_from_events([(10.2, chunk("a")), (10.3, usage(12, 1))], start=10.0)
    assert plain.acceptance is None


ENGINE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 7.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 400.0
# TYPE vllm:prefix_cache_queries_created gauge
vllm:prefix_cache_queries_created{engine="0",model_name="m"} 1.79e+09
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 256.0
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 1.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",engine="0",num_gpu_blocks="56",enable_prefix_caching="True"} 1.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="m"} 4.0
"""


def test_engine_stats_from_metrics_text() -> None:
    from chapters.ch04_serving.clients import EngineStats, engine_stats_from_text

    page = ENGINE + METRICS.split("\n", 3)[3]  # METRICS without its own running gauge
    s = engine_stats_from_text(page)
    assert (s.running, s.waiting, s.kv_cache_usage, s.preemptions) == (3, 2, 0.5, 1)
    assert (s.num_gpu_blocks, s.block_size, s.kv_tokens) == (56, 128, 56 * 128)
    assert s.prefix_hit_rate == pytest.approx(256 / 400)
    delta = s - EngineStats(prefix_cache_queries=100, prefix_cache_hits=56, preemptions=1)
    assert (delta.prefix_cache_queries, delta.prefix_cache_hits, delta.preemptions) == (300, 200, 0)
    assert delta.running == 3 and delta.num_gpu_blocks == 56  # gauges as at the later scrape
    assert EngineStats().prefix_hit_rate != EngineStats().prefix_hit_rate  # NaN: nothing looked up
    # the spec-decode parser still reads its counters from the same page
    assert spec_counters_from_text(page).num_drafts == 100


def test_latency_histograms_are_read_as_sums_and_counts_and_differenced() -> None:
    from chapters.ch04_serving.clients import engine_stats_from_text

    def page(total: float, count: int) -> str:
        name = "vllm:request_time_per_output_token_seconds"
        return (
            f"# HELP {name} x\n# TYPE {name} histogram\n"
            f'{name}_bucket{{engine="0",le="0.01"}} 1.0\n'
            f'{name}_bucket{{engine="0",le="+Inf"}} {count}\n'
            f'{name}_count{{engine="0"}} {count}\n{name}_sum{{engine="0"}} {total}\n'
        )

    before, after = engine_stats_from_text(page(0.5, 10)), engine_stats_from_text(page(0.8, 16))
    assert before.latency["tpot"] == (0.5, 10.0)
    assert (after - before).mean_seconds("tpot") == pytest.approx(0.3 / 6)
    assert math.isnan(before.mean_seconds("ttft")), "a histogram the page lacks"


# ---------------------------------------------------------------- a server that broke (stand-ins)


#: vLLM's answer once its engine is dead (EngineDeadError), as a learner sees it.
ENGINE_DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."
#: What the engine core logs when the out-of-memory killer takes its worker.
WORKER_KILLED = (
    "(EngineCore_DP0 pid=7) ERROR [multiproc_executor.py:315] Worker proc VllmWorker-0 died "
    "unexpectedly (exit code: -9), shutting down executor."
)


def broken_server(port: int, log_line: str) -> str:
    """Python code for a server stand-in: logs `log_line`, answers GET /health with 200, a POST
    (chat, completion) with vLLM's engine-dead 500, a streamed one with its error event."""
    error = {"error": {"message": ENGINE_DEAD, "type": "Internal Server Error"}}
    body, event = json.dumps(error), f"data: {json.dumps(error)}\n\ndata: [DONE]\n\n"
    return (
        f"print({log_line!r}, flush=True)\n"
        "import http.server\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def answer(self, code, body):\n"
        "        self.send_response(code)\n"
        "        self.send_header('Content-Length', str(len(body)))\n"
        "        self.end_headers()\n"
        "        self.wfile.write(body)\n"
        "    def do_GET(self):\n"
        "        self.answer(200, b'')\n"
        "    def do_POST(self):\n"
        "        sent = self.rfile.read(int(self.headers['Content-Length']))\n"
        "        if b'\"stream\": true' in sent:\n"
        f"            self.answer(200, {event.encode()!r})\n"
        "        else:\n"
        f"            self.answer(500, {body.encode()!r})\n"
        f"http.server.ThreadingHTTPServer(('127.0.0.1', {port}), H).serve_forever()\n"
    )


@pytest.fixture
def oom_server() -> Iterator[VllmServer]:
    """A started stand-in whose worker the out-of-memory killer took (its log says so)."""
    port = _free_port()
    argv = [sys.executable, "-c", broken_server(port, WORKER_KILLED)]
    server = VllmServer(argv, port, "oom-client-test", "m").start(timeout=30, progress=False)
    yield server
    server.stop()


MEMORY_AND_LOG = ("killed by SIGKILL", "out-of-memory killer", "log build/logs/oom-client-test.log")


@pytest.mark.parametrize("call", ["chat", "stream_chat", "complete_tokens"])
def test_an_error_from_a_server_whose_worker_was_killed_says_memory_and_names_the_log(
    oom_server: VllmServer, call: str
) -> None:
    send = {
        "chat": lambda url: chat(url, "m", [{"role": "user", "content": "hi"}]),
        "stream_chat": lambda url: stream_chat(url, "m", [{"role": "user", "content": "hi"}]),
        "complete_tokens": lambda url: complete_tokens(url, "m", [1, 2], 4),
    }[call]
    raised = RuntimeError if call == "stream_chat" else requests.HTTPError  # an error event
    with pytest.raises(raised) as err:
        send(oom_server.base_url)
    message = str(err.value)
    assert ENGINE_DEAD in message and all(part in message for part in MEMORY_AND_LOG), message
    assert "\n" not in message


def test_a_refused_connection_after_the_server_died_says_why(oom_server: VllmServer) -> None:
    [main] = oom_server.group_processes()
    main.kill()  # vLLM's API server exits once its engine is dead
    assert oom_server.process is not None and oom_server.process.wait(timeout=30) == -9
    with pytest.raises(requests.ConnectionError) as err:
        chat(oom_server.base_url, "m", [{"role": "user", "content": "hi"}])
    assert all(part in str(err.value) for part in MEMORY_AND_LOG), err.value
    assert "ended: " in repr(oom_server) and "out-of-memory" in repr(oom_server)


def test_a_500_from_a_server_with_nothing_killed_names_its_log() -> None:
    port = _free_port()
    argv = [sys.executable, "-c", broken_server(port, "INFO all well")]
    server = VllmServer(argv, port, "broken-client-test", "m").start(timeout=30, progress=False)
    try:
        with pytest.raises(requests.HTTPError) as err:
            chat(server.base_url, "m", [])
        assert str(err.value).endswith(
            "; server 'broken-client-test''s log: " + str(server.log_path.relative_to(REPO_ROOT))
        )
        assert server.failure() is None
    finally:
        server.stop()


def test_a_server_not_started_here_gets_no_note() -> None:
    with pytest.raises(requests.ConnectionError) as err:
        chat(f"http://127.0.0.1:{_free_port()}", "m", [], timeout=5)
    assert "; server " not in str(err.value) and "log build/" not in str(err.value)
