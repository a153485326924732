"""The LLM judge/writer backends and their content-addressed cache, against a local fake API."""

from __future__ import annotations

import json
import threading

import pytest
from PIL import Image

from tests.api_server import FakeAPIServer
from vlmrobust.clients.llm import GeminiLLM, LLMCache, OpenAILLM, make_key, make_llm

KEY = "test-SENTINEL-key-llm-91b2"
KEY_ENV = "VLMROBUST_TEST_LLM_KEY"
APIS = ["openai", "gemini"]
SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"enum": ["yes", "no"]},
        "score": {"type": "integer", "minimum": 0, "maximum": 5},
    },
    "required": ["label", "score"],
    "additionalProperties": False,
}


@pytest.fixture
def server():
    with FakeAPIServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture
def cache(tmp_path):
    return LLMCache(tmp_path / "llm-cache")


@pytest.fixture
def image_files(tmp_path):
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    Image.new("RGB", (4, 4), (255, 0, 0)).save(a)
    Image.new("RGB", (4, 4), (0, 255, 0)).save(b)
    return a, b


def spec(api: str, server: FakeAPIServer, **options) -> dict:
    opts = {"max_retries": 2, "base_delay": 0.001, "max_delay": 0.005, "timeout_s": 5}
    opts.update(options)
    return {
        "backend": api,
        "model": f"{api}-judge",
        "base_url": server.url + ("/v1" if api == "openai" else ""),
        "api_key_env": KEY_ENV,
        "options": opts,
    }


def llm(api, server, cache, **options):
    return make_llm(spec(api, server, **options), cache, sleep=lambda s: None)


def cache_files(cache: LLMCache) -> list:
    return sorted(cache.root.rglob("*.json")) if cache.root.exists() else []


# --- the cache ------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_second_identical_call_makes_no_request(api, server, cache, image_files):
    judge = llm(api, server, cache)
    first = judge.complete("Is the cat on the mat?", images=[image_files[0]])
    assert first.ok and not first.cached
    assert first.text == "echo: Is the cat on the mat?"
    assert server.count == 1
    again = judge.complete("Is the cat on the mat?", images=[image_files[0]])
    assert again.cached and again.text == first.text and again.usage == first.usage
    assert server.count == 1
    # a rerun (a fresh backend and cache object on the same directory) makes no call either
    rerun = llm(api, server, LLMCache(cache.root))
    assert rerun.complete("Is the cat on the mat?", images=[image_files[0]]).cached
    assert server.count == 1
    assert cache.stats == {"hits": 1, "misses": 1, "writes": 1}


@pytest.mark.parametrize("api", APIS)
def test_a_different_input_or_parameter_makes_a_request(api, server, cache, image_files, tmp_path):
    a, b = image_files
    judge = llm(api, server, cache)
    judge.complete("Q", images=[a])
    assert server.count == 1
    # same file name, different pixels: a different image hash
    changed = tmp_path / "sub" / "a.png"
    changed.parent.mkdir()
    Image.new("RGB", (4, 4), (0, 0, 1)).save(changed)
    judge.complete("Q", images=[b])
    judge.complete("Q", images=[changed])
    judge.complete("Q", images=[a, b])
    judge.complete("Q", images=[a], temperature=0.5)
    judge.complete("Q", images=[a], seed=7)
    judge.complete("Q", images=[a], max_tokens=99)
    server.reply('"a JSON string"')
    assert judge.complete("Q", images=[a], json_schema={"type": "string"}).ok
    judge.complete([{"role": "system", "content": "Be strict."}, {"role": "user", "content": "Q"}])
    assert server.count == 9
    # the same image given as bytes has the same hash as the file
    assert judge.complete("Q", images=[a.read_bytes()]).cached
    # an option that changes the answer is part of the key; concurrency or retries are not
    llm(api, server, cache, concurrency=2, max_retries=4).complete("Q", images=[a])
    assert server.count == 9
    llm(api, server, cache, send_seed=False).complete("Q", images=[a])
    assert server.count == 10


def test_cache_key_ignores_base_url_and_key(server, cache):
    judge = llm("openai", server, cache)
    judge.complete("hello")
    with FakeAPIServer() as other:
        moved = make_llm(spec("openai", other), cache)
        assert moved.complete("hello").cached
        assert other.count == 0


@pytest.mark.parametrize("api", APIS)
def test_cache_entry_layout_and_no_secret(api, server, cache):
    judge = llm(api, server, cache, price_input_per_mtok=2.0, price_output_per_mtok=8.0)
    r = judge.complete("price me")
    (path,) = cache_files(cache)
    assert path == cache.root / r.key[:2] / f"{r.key}.json"
    entry = json.loads(path.read_text())
    assert entry["text"] == "echo: price me" and entry["key"] == r.key
    assert entry["usage"] == {"prompt_tokens": 10, "completion_tokens": 3}
    assert entry["cost_usd"] == pytest.approx((10 * 2.0 + 3 * 8.0) / 1e6) == r.cost_usd
    assert entry["timestamp"].endswith("Z")
    assert entry["request"]["model"] == f"{api}-judge"
    assert make_key(entry["request"]) == r.key
    assert KEY not in path.read_text() and KEY_ENV not in path.read_text()


def test_corrupt_entry_is_a_miss(server, cache):
    judge = llm("openai", server, cache)
    r = judge.complete("x")
    cache.path(r.key).write_text("{not json")
    assert not judge.complete("x").cached
    assert server.count == 2
    assert judge.complete("x").cached
    cache.path(r.key).write_bytes(b'{"text": "caf\xe9"}')  # not UTF-8: a miss, not a crash
    assert not judge.complete("x").cached
    assert server.count == 3 and judge.complete("x").cached


def test_concurrent_writers_leave_a_valid_entry(cache):
    key = make_key({"k": 1})

    def write(i):
        for _ in range(20):
            cache.put(key, {"text": f"writer {i}", "usage": {}})

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entry = cache.get(key)
    assert entry["text"].startswith("writer ")
    assert [p.name for p in cache_files(cache)] == [f"{key}.json"]
    assert not list(cache.root.rglob("*.tmp"))


def test_cache_rejects_bad_keys(cache):
    with pytest.raises(ValueError, match="sha256"):
        cache.get("../../etc/passwd")


# --- JSON mode ------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_invalid_json_is_retried_and_the_valid_answer_cached(api, server, cache):
    server.reply("Sure! The label is yes.", '```json\n{"label": "yes", "score": 4}\n```')
    judge = llm(api, server, cache)
    r = judge.complete("Judge it.", json_schema=SCHEMA)
    assert r.ok, r.error
    assert r.parsed_json == {"label": "yes", "score": 4}
    assert server.count == 2
    again = judge.complete("Judge it.", json_schema=SCHEMA)
    assert again.cached and again.parsed_json == {"label": "yes", "score": 4}
    assert server.count == 2


@pytest.mark.parametrize("api", APIS)
def test_schema_violation_is_an_error_after_the_retries(api, server, cache):
    server.reply_fn = lambda text, body: '{"label": "maybe", "score": 4}'
    judge = llm(api, server, cache, max_retries=2)
    r = judge.complete("Judge it.", json_schema=SCHEMA)
    assert not r.ok and r.text == "" and r.parsed_json is None
    assert "schema violation at label" in r.error and "3 attempts" in r.error
    assert server.count == 3
    assert cache_files(cache) == []
    judge.complete("Judge it.", json_schema=SCHEMA)  # not cached: asks again
    assert server.count == 6


def test_openai_json_request_shape(server, cache):
    server.reply('{"label": "no", "score": 0}')
    llm("openai", server, cache).complete("j", json_schema=SCHEMA)
    fmt = server.requests[0].body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == SCHEMA
    server.reply('{"label": "no", "score": 0}')
    llm("openai", server, cache, json_mode="json_object").complete("j", json_schema=SCHEMA)
    assert server.requests[1].body["response_format"] == {"type": "json_object"}


def test_gemini_json_request_shape(server, cache):
    server.reply('{"label": "no", "score": 0}')
    llm("gemini", server, cache).complete("j", json_schema=SCHEMA)
    config = server.requests[0].body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == SCHEMA


def test_invalid_schema_is_a_caller_error(server, cache):
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        llm("openai", server, cache).complete("j", json_schema={"type": "no-such-type"})


# --- failures -------------------------------------------------------------------------------


def test_refusal_is_an_error_and_not_cached(server, cache):
    server.add_fault("refusal")
    judge = llm("openai", server, cache)
    r = judge.complete("Describe the person.")
    assert not r.ok and "refused: I can't help with that." in r.error
    assert server.count == 1  # a refusal is not retried
    assert cache_files(cache) == []
    assert judge.complete("Describe the person.").ok
    assert server.count == 2


def test_gemini_blocked_prompt_is_an_error(server, cache):
    server.add_fault("blocked")
    r = llm("gemini", server, cache).complete("x")
    assert not r.ok and "prompt blocked" in r.error
    assert cache_files(cache) == []


@pytest.mark.parametrize("api", APIS)
def test_api_failures_are_error_responses(api, server, cache, caplog):
    server.add_fault("401", echo_auth=True)
    server.add_fault("500", match="flaky", times=10)
    judge = llm(api, server, cache)
    denied = judge.complete("a")
    assert not denied.ok and "HTTP 401" in denied.error and "1 attempt" in denied.error
    assert KEY not in denied.error and "***" in denied.error
    flaky = judge.complete("flaky")
    assert "HTTP 500" in flaky.error and "3 attempts" in flaky.error
    assert KEY not in caplog.text
    assert cache_files(cache) == []


@pytest.mark.parametrize("api", APIS)
def test_complete_many_keeps_order_and_limits_concurrency(api, server, cache):
    server.delay_s = 0.03
    judge = llm(api, server, cache, concurrency=3)
    calls = [{"messages": f"item {i}"} for i in range(9)]
    out = judge.complete_many(calls)
    assert [r.text for r in out] == [f"echo: item {i}" for i in range(9)]
    assert server.max_in_flight <= 3


def test_gemini_messages_roles(server, cache, image_files):
    messages = [
        {"role": "system", "content": "You are a judge."},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "second"},
    ]
    llm("gemini", server, cache).complete(messages, images=[image_files[0]])
    body = server.requests[0].body
    assert body["systemInstruction"]["parts"] == [{"text": "You are a judge."}]
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    last = body["contents"][-1]["parts"]
    assert last[0] == {"text": "second"} and "inlineData" in last[1]


def test_openai_images_go_with_the_last_user_message(server, cache, image_files):
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "look"}]
    llm("openai", server, cache).complete(messages, images=list(image_files))
    sent = server.requests[0].body["messages"]
    assert sent[0] == {"role": "system", "content": "s"}
    assert [p["type"] for p in sent[1]["content"]] == ["text", "image_url", "image_url"]


def test_make_llm_and_bad_messages(server, cache):
    assert isinstance(make_llm(spec("openai", server), cache), OpenAILLM)
    assert isinstance(make_llm(spec("gemini", server), cache), GeminiLLM)
    with pytest.raises(ValueError, match="backend 'hf-nope' is unknown"):
        make_llm({"backend": "hf-nope", "model": "x"})
    with pytest.raises(ValueError, match="messages"):
        llm("openai", server, cache).complete([{"role": "robot", "content": "x"}])
