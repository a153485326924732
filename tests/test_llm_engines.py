"""The text-generation engines (vlmrobust.clients.llm.engines) on the text twins.

Without vLLM: the chat rendering and the request body on the qwen3 twin's tokenizer, the
decoding fields the server makes, the gpt-oss twin's tokens at their Harmony ids, the
``hf`` engine on the qwen3 twin (greedy determinism, seeded sampling, an error result for
a bad request among good ones, token counts), the engine settings and server command of
a ``kind: llm`` entry, and a ``demo_twin: qwen3`` build through ``vlmrobust demo-model``.

With vLLM (marked ``vllm``; skipped without the environment, a failure in CI): for each
text twin (qwen3, gpt-oss) the offline ``vllm`` engine answers six requests (three with a
JSON schema, three free text, one of them sampled with a seed) in the vLLM environment,
then the same registry entry is served (``serve_command``: vLLM's OpenAI server) and
asked the same requests twice: through the ``openai`` client with :func:`chat_body`, and
through the project's ``OpenAILLM`` (``make_llm``, ``complete_many``). Compared per
request: the text (the served message content), the finish reason and the prompt and
completion token counts; the prompt token ids the offline engine rendered equal
:func:`render_prompt` on the twin's tokenizer (qwen3) and the served usage; the sampling
parameters equal :func:`decoding_fields`.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.vllm_env import (
    CPU_ENGINE,
    VLLM_PYTHON,
    free_port,
    require_vllm,
    served,
    vllm_env_vars,
)
from vlmrobust.clients.chat import Decoding
from vlmrobust.clients.llm.backends import LLMCall, make_llm
from vlmrobust.clients.llm.engines import (
    SERVER_DEFAULTS,
    TextRequest,
    chat_body,
    decoding_fields,
    load_text_engine,
    render_prompt,
)
from vlmrobust.clients.vlm.checkpoint import read_build_record
from vlmrobust.clients.vlm.vllm import engine_kwargs, serve_command
from vlmrobust_demo.twins import (
    GPT_OSS_SPECIALS,
    TEXT_FAMILIES,
    build_text_tokenizer,
    build_text_twin,
)

SCHEMA = {
    "type": "object",
    "properties": {"extracted": {"type": ["string", "null"], "maxLength": 12}},
    "required": ["extracted"],
    "additionalProperties": False,
}
#: Six requests: three JSON extractions, three free-text answers (one sampled).
REQUESTS = [
    TextRequest(
        [
            {"role": "system", "content": "Extract the final answer as JSON."},
            {"role": "user", "content": "Response: the area is 24. Extract it."},
        ],
        SCHEMA,
        48,
    ),
    TextRequest([{"role": "user", "content": "Is the sky blue? Answer yes or no."}], SCHEMA, 48),
    TextRequest([{"role": "user", "content": "Options: A, B, C. The answer is C."}], SCHEMA, 48),
    TextRequest([{"role": "user", "content": "What is 2 + 3?"}], None, 24),
    TextRequest(
        [
            {"role": "user", "content": "Name a shape."},
            {"role": "assistant", "content": "<think>\nsome shape\n</think>\n\nA circle."},
            {"role": "user", "content": "Another one?"},
        ],
        None,
        24,
    ),
    TextRequest([{"role": "user", "content": "Say something."}], None, 24, 0.8, None, 5),
]
#: The vLLM engines answer a JSON schema without whitespace between tokens: a random
#: twin would otherwise write whitespace until its budget ends (an engine setting, the
#: same offline and served).
TEXT_OPTIONS = {
    **CPU_ENGINE,
    "batch_size": 4,
    "engine": {
        **CPU_ENGINE["engine"],
        "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
    },
}
#: Harmony writes the date into every gpt-oss prompt; pinned for both processes.
START_DATE = "2026-01-02"


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("text-twins") / "qwen3"
    build_text_twin("qwen3", out, seed=21)
    return out


@pytest.fixture(scope="module")
def hf_engine(qwen3):
    spec = {"backend": "hf", "kind": "llm", "local_path": str(qwen3), "options": {}}
    with load_text_engine("qwen3-twin", spec) as engine:
        yield engine


# --- without vLLM ------------------------------------------------------------------------


def test_render_prompt_is_the_chat_template_without_added_tokens(hf_engine):
    tok = hf_engine.tokenizer
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    text, ids = render_prompt(tok, messages)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert ids == tok(text, add_special_tokens=False)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>")
    off, _ = render_prompt(tok, messages, {"enable_thinking": False})
    assert off == text + "<think>\n\n</think>\n\n"
    # an earlier answer keeps only what follows its reasoning, as Qwen3's template
    turns = [*messages, {"role": "assistant", "content": "<think>\nx\n</think>\n\nHello"}]
    text, _ = render_prompt(tok, [*turns, {"role": "user", "content": "Again"}])
    assert "<|im_start|>assistant\nHello<|im_end|>" in text and "<think>" not in text
    # reasoning tags are single tokens that survive skip_special_tokens
    assert len(tok("<think>", add_special_tokens=False)["input_ids"]) == 1
    assert tok.decode(tok("<think>a", add_special_tokens=False)["input_ids"],
                      skip_special_tokens=True) == "<think>a"  # fmt: skip


def test_gpt_oss_tokens_sit_at_their_harmony_ids():
    tok = build_text_tokenizer(TEXT_FAMILIES["gpt-oss"])
    for token, i in GPT_OSS_SPECIALS.items():
        assert tok.convert_tokens_to_ids(token) == i
    text, ids = render_prompt(tok, [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Hi"}])  # fmt: skip
    assert text.startswith("<|start|>system<|message|>You are ChatGPT")
    assert text.endswith(
        "<|start|>developer<|message|># Instructions\n\nBe brief.<|end|>"
        "<|start|>user<|message|>Hi<|end|><|start|>assistant"
    )
    assert ids[0] == GPT_OSS_SPECIALS["<|start|>"]
    assert ids.count(GPT_OSS_SPECIALS["<|message|>"]) == 3  # system, developer, user


def test_chat_body_is_what_the_openai_backend_sends():
    llm = make_llm(
        {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1",
         "api_key_env": None, "options": {}}
    )  # fmt: skip
    for req in REQUESTS:
        call = LLMCall(req.messages, [], req.json_schema,
                       Decoding(req.max_tokens, req.temperature, None, req.seed))  # fmt: skip
        assert chat_body(req, "m") == {"model": "m", **llm._request(call)}
    llm.close()
    body = chat_body(TextRequest([{"role": "user", "content": "x"}], None, 5, 0.7, 0.9, 3), "m")
    assert (body["top_p"], body["seed"], "response_format" in body) == (0.9, 3, False)


def test_decoding_fields_are_the_servers():
    greedy = decoding_fields(REQUESTS[0])
    assert greedy == {**SERVER_DEFAULTS, "temperature": 0.0}
    checkpoint = {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "repetition_penalty": 1.05}
    sampled = decoding_fields(REQUESTS[5], checkpoint)
    assert sampled["temperature"] == 0.8  # the request's, always sent
    assert (sampled["top_p"], sampled["top_k"], sampled["repetition_penalty"]) == (0.95, 20, 1.05)
    own = TextRequest([{"role": "user", "content": "x"}], None, 5, 0.8, 0.5)
    assert decoding_fields(own, checkpoint)["top_p"] == 0.5


def test_hf_engine_greedy_is_deterministic_and_counts_tokens(hf_engine):
    first = hf_engine.generate(REQUESTS)
    again = hf_engine.generate(list(reversed(REQUESTS)))[::-1]
    assert [r.text for r in first] == [r.text for r in again]
    for req, res in zip(REQUESTS, first, strict=True):
        assert res.error is None and res.finish_reason in ("stop", "length")
        _, ids = render_prompt(hf_engine.tokenizer, req.messages)
        assert res.prompt_tokens == len(ids)
        assert 1 <= res.completion_tokens <= req.max_tokens
        if res.finish_reason == "length":
            assert res.completion_tokens == req.max_tokens
    assert (
        hf_engine.revision == f"sha256:{read_build_record(hf_engine.source)['weights_sha256'][:16]}"
    )


def test_hf_engine_sampling_follows_the_seed(hf_engine):
    base = REQUESTS[5]
    same = hf_engine.generate([base, base])
    other = hf_engine.generate([TextRequest(base.messages, None, 24, 0.8, None, 6)])
    assert same[0].text == same[1].text
    assert other[0].text != same[0].text


def test_hf_engine_bad_request_is_an_error_result_only(hf_engine):
    bad = [
        TextRequest([{"role": "tool", "content": "x"}], None, 8),
        TextRequest([{"role": "user", "content": "x"}], None, 0),
        TextRequest([{"role": "user", "content": "word " * 40000}], None, 8),
    ]
    good = REQUESTS[3]
    results = hf_engine.generate([bad[0], good, bad[1], bad[2]])
    assert [results[k].finish_reason for k in (0, 2, 3)] == ["error"] * 3
    assert results[1].error is None
    assert "role must be one of" in results[0].error
    assert "max_tokens" in results[2].error and "context" in results[3].error
    assert results[1].text == hf_engine.generate([good])[0].text
    assert all(r.text == "" for r in (results[0], results[2], results[3]))


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="backend 'openai' has no local text engine"):
        load_text_engine("m", {"backend": "openai", "model": "m"})


def test_text_llm_engine_settings_and_server_command(qwen3):
    spec = {"backend": "vllm", "kind": "llm", "local_path": str(qwen3),
            "options": {**TEXT_OPTIONS, "max_pixels": 50176,
                        "chat_template_kwargs": {"enable_thinking": False}}}  # fmt: skip
    kwargs = engine_kwargs(str(qwen3), spec, spec["options"])
    assert "limit_mm_per_prompt" not in kwargs and "mm_processor_kwargs" not in kwargs
    assert kwargs["language_model_only"] is True and kwargs["generation_config"] == "vllm"
    vlm = engine_kwargs(str(qwen3), {**spec, "kind": "vlm"}, spec["options"])
    assert vlm["limit_mm_per_prompt"] == {"image": 8} and "language_model_only" not in vlm
    cmd = serve_command("qwen3-twin", spec, python="py", port=8123)
    flags = " ".join(cmd)
    assert "--limit-mm-per-prompt" not in flags and "--language-model-only" in flags
    assert cmd[cmd.index("--default-chat-template-kwargs") + 1] == '{"enable_thinking": false}'
    assert cmd[cmd.index("--served-model-name") + 1] == "qwen3-twin"


def test_demo_twin_qwen3_builds_through_demo_model(tmp_path, qwen3):
    """A ``kind: llm`` registry entry with ``demo_seed`` and ``demo_twin: qwen3`` is
    built by ``vlmrobust demo-model`` from the spec the run plan gives its rule."""
    from types import SimpleNamespace

    from vlmrobust.core.config import validate_registry
    from vlmrobust.plan.inference import demo_model_spec
    from vlmrobust_demo.commands import demo_model

    out = tmp_path / "m"
    entry = {"kind": "llm", "backend": "vllm", "local_path": str(out), "demo_seed": 21,
             "demo_twin": "qwen3", "resources": {"gpu": 1}, "options": TEXT_OPTIONS}  # fmt: skip
    registry = validate_registry({"models": {"qwen3-judge": entry}})["models"]
    spec = demo_model_spec(SimpleNamespace(registry=registry), "qwen3-judge")
    assert spec["twin"] == "qwen3"
    demo_model(str(out), json.dumps(spec), None)
    record = read_build_record(out)
    assert (record["family"], record["architecture"]) == ("qwen3", "Qwen3ForCausalLM")
    assert record["weights_sha256"] == read_build_record(qwen3)["weights_sha256"]
    config = json.loads((out / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"], config["head_dim"]) == (128, 2, 32)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (4, 2)
    build_text_twin("qwen3", tmp_path / "other", seed=22)
    assert read_build_record(tmp_path / "other")["weights_sha256"] != record["weights_sha256"]


# --- with vLLM: offline engine vs the same entry served ----------------------------------

#: Run in the vLLM environment: each twin's offline engine answers the requests; out: the
#: results, the prompt ids and sampling fields the server's rules made, and timings.
VLLM_SCRIPT = """
import asyncio, json, sys, time
from dataclasses import asdict


def main(plan_path, out_path):
    from vlmrobust.clients.llm.engines import (
        SERVER_DEFAULTS, TextRequest, chat_body, decoding_fields, load_text_engine,
    )

    plan = json.loads(open(plan_path).read())
    requests = [TextRequest(**r) for r in plan["requests"]]
    out = {}
    for model_id, spec in plan["models"].items():
        t0 = time.perf_counter()
        engine = load_text_engine(model_id, spec)
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        results = engine.generate(requests)
        generate_s = time.perf_counter() - t0
        rules = []
        for req in requests[: plan["compared"]]:
            p = asyncio.run(engine.rules.prepare(chat_body(req, model_id)))
            rules.append({
                "prompt_ids": p.prompt_ids,
                "fields": {k: getattr(p.params, k) for k in SERVER_DEFAULTS},
                "expected": decoding_fields(req, engine.rules.defaults),
                "skip_special_tokens": p.params.skip_special_tokens,
                "max_tokens": p.params.max_tokens,
                "seed": p.params.seed,
            })
        out[model_id] = {"load_s": load_s, "generate_s": generate_s, "revision": engine.revision,
                         "results": [asdict(r) for r in results], "rules": rules}
        engine.close()
    open(out_path, "w").write(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
"""

#: Requests only the offline engine gets: each must give an error result, the others
#: their answers (a role the API has not; a prompt over the context).
OFFLINE_ONLY = [
    TextRequest([{"role": "tool", "content": "x"}], None, 8),
    TextRequest([{"role": "user", "content": "word " * 3000}], None, 8),
]


def _spec(path: Path) -> dict:
    return {"backend": "vllm", "kind": "llm", "local_path": str(path), "options": TEXT_OPTIONS}


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """Each twin's offline answers and its served answers (raw and through OpenAILLM)."""
    require_vllm()
    root = tmp_path_factory.mktemp("llm-engines")
    models = {}
    for family in ("qwen3", "gpt-oss"):
        build_text_twin(family, root / family, seed=21)
        models[f"{family}-twin"] = _spec(root / family)
    plan = {
        "models": models,
        "requests": [r.__dict__ for r in [*REQUESTS, *OFFLINE_ONLY]],
        "compared": len(REQUESTS),
    }
    (root / "plan.json").write_text(json.dumps(plan))
    (root / "run_engines.py").write_text(VLLM_SCRIPT)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VLLM_SYSTEM_START_DATE", START_DATE)
        mp.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
        t0 = time.perf_counter()
        proc = subprocess.run(
            [str(VLLM_PYTHON), str(root / "run_engines.py"), str(root / "plan.json"),
             str(root / "offline.json")],
            env=vllm_env_vars(), capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-6000:]
        offline = json.loads((root / "offline.json").read_text())
        offline["_wall_s"] = time.perf_counter() - t0
        served_answers = {m: _ask_served(m, spec, root) for m, spec in models.items()}
    return {"offline": offline, "served": served_answers, "root": root}


def _ask_served(model_id: str, spec: dict, root: Path) -> dict:
    """Serve the entry and ask :data:`REQUESTS`: raw (the openai client with
    :func:`chat_body`) and through ``OpenAILLM``; with the server's start-up time."""
    import openai

    port = free_port()
    cmd = serve_command(model_id, spec, python=str(VLLM_PYTHON), port=port)
    t0 = time.perf_counter()
    with served(cmd, port, root / f"{model_id}.log"):
        ready_s = time.perf_counter() - t0
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="EMPTY")
        raw = []
        for req in REQUESTS:
            choice = client.chat.completions.create(**chat_body(req, model_id))
            raw.append({
                "text": choice.choices[0].message.content or "",
                "finish_reason": choice.choices[0].finish_reason,
                "prompt_tokens": choice.usage.prompt_tokens,
                "completion_tokens": choice.usage.completion_tokens,
            })  # fmt: skip
        llm = make_llm({
            "backend": "openai", "model": model_id, "base_url": f"http://127.0.0.1:{port}/v1",
            "api_key_env": None, "options": {"concurrency": 3, "max_retries": 0},
        })  # fmt: skip
        calls = [{"messages": r.messages, "json_schema": r.json_schema, "max_tokens": r.max_tokens,
                  "temperature": r.temperature, "seed": r.seed} for r in REQUESTS]  # fmt: skip
        project = [r.to_dict() for r in llm.complete_many(calls)]
        llm.close()
    return {"ready_s": ready_s, "raw": raw, "project": project}


def _valid_json(text: str, strict: bool = True) -> bool:
    import jsonschema

    try:
        jsonschema.validate(json.loads(text, strict=strict), SCHEMA)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.parametrize("model", ["qwen3-twin", "gpt-oss-twin"])
def test_offline_engine_answers_as_the_server(compared, model):
    """The offline ``vllm`` engine's result for each request equals the served one:
    text, finish reason, prompt and completion tokens (raw client); the text the
    project's ``OpenAILLM`` returns (where it is an answer: an invalid JSON one is its
    error, named as such)."""
    offline = compared["offline"][model]
    served_answers = compared["served"][model]
    mine = offline["results"][: len(REQUESTS)]
    for i, (res, raw) in enumerate(zip(mine, served_answers["raw"], strict=True)):
        assert res["error"] is None, (i, res)
        got = {k: res[k] for k in ("text", "finish_reason", "prompt_tokens", "completion_tokens")}
        assert got == raw, f"request {i}"
    for i, (req, res, resp) in enumerate(zip(REQUESTS, mine, served_answers["project"],
                                             strict=True)):  # fmt: skip
        if req.json_schema is not None and not _valid_json(res["text"]):
            assert resp["error"] and "invalid JSON" in resp["error"], (i, resp)
            continue
        assert resp["error"] is None and resp["text"] == res["text"], (i, resp, res)
        assert resp["usage"] == {k: res[k] for k in ("prompt_tokens", "completion_tokens")}
    errors = offline["results"][len(REQUESTS) :]
    assert [r["finish_reason"] for r in errors] == ["error", "error"]
    assert "role must be one of" in errors[0]["error"]
    assert "maximum context length" in errors[1]["error"]


@pytest.mark.vllm
@pytest.mark.slow
def test_qwen3_twin_answers_json_and_renders_as_transformers(compared, hf_engine):
    """The qwen3 twin's JSON answers are complete and follow the schema (structured
    outputs; vLLM's xgrammar lets a raw control character into a string, which Python's
    strict ``json.loads``, and so the ``openai`` backend, refuses as invalid JSON); the
    prompt ids the server's rules rendered are :func:`render_prompt`'s on the twin's
    tokenizer; the sampling fields are :func:`decoding_fields`, with the server's
    ``skip_special_tokens``; the seed reaches the engine."""
    offline = compared["offline"]["qwen3-twin"]
    for req, res in zip(REQUESTS, offline["results"], strict=False):
        if req.json_schema is not None:
            assert res["finish_reason"] == "stop" and _valid_json(res["text"], False), res
    for req, rule in zip(REQUESTS, offline["rules"], strict=True):
        assert rule["prompt_ids"] == render_prompt(hf_engine.tokenizer, req.messages)[1]
        assert rule["fields"] == pytest.approx(rule["expected"])
        assert rule["skip_special_tokens"] is True
        assert rule["max_tokens"] == req.max_tokens and rule["seed"] == req.seed
    # transformers (float32, this environment) writes the same greedy free text
    greedy = [i for i, r in enumerate(REQUESTS) if r.json_schema is None and not r.temperature]
    hf = hf_engine.generate([REQUESTS[i] for i in greedy])
    assert [r.text for r in hf] == [offline["results"][i]["text"] for i in greedy]
    assert (
        offline["revision"]
        == f"sha256:{read_build_record(compared['root'] / 'qwen3')['weights_sha256'][:16]}"
    )


@pytest.mark.vllm
@pytest.mark.slow
def test_timings_are_reported(compared):
    """Not a check: the start-up and answer times (shown with pytest -s)."""
    offline = compared["offline"]
    for model in ("qwen3-twin", "gpt-oss-twin"):
        print(
            f"{model}: offline load {offline[model]['load_s']:.1f} s, generate "
            f"{offline[model]['generate_s']:.2f} s; served ready in "
            f"{compared['served'][model]['ready_s']:.1f} s"
        )
    print(f"offline script wall time {offline['_wall_s']:.1f} s")
    assert all(offline[m]["load_s"] > 0 for m in ("qwen3-twin", "gpt-oss-twin"))
