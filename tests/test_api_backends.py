"""The openai and gemini VLM backends and the shared retry policy, against a local fake API."""

from __future__ import annotations

import base64
import io
import logging
import random

import pytest
from PIL import Image

from tests.api_server import FakeAPIServer
from vlmrobust.clients.apicall import (
    APICallError,
    CallFailed,
    MalformedResponse,
    RetryPolicy,
    call_with_retries,
    map_concurrent,
    parse_retry_after,
    png_bytes,
)
from vlmrobust.clients.vlm.api_base import request_decoding
from vlmrobust.clients.vlm.base import Request
from vlmrobust.clients.vlm.gemini_api import GeminiBackend, map_finish_reason
from vlmrobust.clients.vlm.openai_api import OpenAIBackend

KEY = "test-SENTINEL-key-7f3a9c0d"
KEY_ENV = "VLMROBUST_TEST_API_KEY"
APIS = ["openai", "gemini"]
FAULTS = ["429", "500", "503", "408", "not_json", "no_choices", "drop", "timeout"]


@pytest.fixture
def server():
    with FakeAPIServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


@pytest.fixture
def images(tmp_path):
    red, blue = tmp_path / "red.png", tmp_path / "blue.jpg"
    Image.new("RGB", (3, 2), (255, 0, 0)).save(red)
    Image.new("RGB", (2, 5), (0, 0, 255)).save(blue, quality=100)
    return red, blue


class Sleeps(list):
    """An injected sleep: records the waits instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make_backend(api: str, server: FakeAPIServer, sleeps=None, **options):
    opts = {"max_retries": 3, "base_delay": 0.001, "max_delay": 0.01, "timeout_s": 5.0}
    opts.update(options)
    spec = {
        "api_model": f"{api}-test-model",
        "base_url": server.url + ("/v1" if api == "openai" else ""),
        "api_key_env": KEY_ENV,
        "options": opts,
    }
    cls = OpenAIBackend if api == "openai" else GeminiBackend
    return cls(f"{api}-test", spec, sleep=sleeps if sleeps is not None else Sleeps())


def text_request(key: str, text: str, **kw) -> Request:
    return Request(key=key, content=[{"type": "text", "text": text}], max_new_tokens=16, **kw)


def run(backend, requests):
    return {r.key: r for r in backend.generate(requests)}


# --- retries -----------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_kind_is_retried_then_succeeds(api, fault, server):
    sleeps = Sleeps()
    timeout = 0.4 if fault == "timeout" else 5.0
    backend = make_backend(api, server, sleeps, timeout_s=timeout)
    server.add_fault(fault, seconds=1.5)
    results = run(backend, [text_request("q1", "what is shown?")])
    r = results["q1"]
    assert r.error is None, r.error
    assert r.finish_reason == "stop"
    assert r.text == "echo: what is shown?"
    assert server.count == 2
    assert [rec.fault for rec in server.requests] == [fault, None]
    assert len(sleeps) == 1


@pytest.mark.parametrize("api", APIS)
def test_retry_after_is_honoured(api, server):
    sleeps = Sleeps()
    backend = make_backend(api, server, sleeps, base_delay=0.001, max_delay=0.001)
    server.add_fault("429", retry_after="7")
    r = run(backend, [text_request("q", "hi")])["q"]
    assert r.error is None
    assert sleeps == [7.0]  # the server's wait, not the (tiny) backoff


@pytest.mark.parametrize("api", APIS)
def test_exhausted_retries_give_an_error_result_and_the_batch_goes_on(api, server):
    backend = make_backend(api, server, max_retries=2, concurrency=2)
    server.add_fault("503", match="doomed", times=100)
    requests = [text_request(f"q{i}", f"question {i}") for i in range(4)]
    requests.append(text_request("bad", "doomed question"))
    results = run(backend, requests)
    assert set(results) == {"q0", "q1", "q2", "q3", "bad"}
    bad = results["bad"]
    assert bad.finish_reason == "error"
    assert bad.text == ""
    assert "HTTP 503" in bad.error and "3 attempts" in bad.error
    assert "retries exhausted" in bad.error
    assert server.count_matching("doomed") == 3
    for i in range(4):
        assert results[f"q{i}"].error is None
        assert results[f"q{i}"].text == f"echo: question {i}"


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("status", ["400", "401", "403", "404", "422"])
def test_client_errors_are_final(api, status, server):
    sleeps = Sleeps()
    backend = make_backend(api, server, sleeps)
    server.add_fault(status)
    r = run(backend, [text_request("q", "hi")])["q"]
    assert r.finish_reason == "error"
    assert f"HTTP {status}" in r.error and "1 attempt" in r.error
    assert "not retryable" in r.error
    assert server.count == 1
    assert sleeps == []


@pytest.mark.parametrize("api", APIS)
def test_concurrency_limit_is_respected(api, server):
    server.delay_s = 0.05
    backend = make_backend(api, server, concurrency=3)
    results = run(backend, [text_request(f"q{i}", f"n{i}") for i in range(12)])
    assert all(r.error is None for r in results.values())
    assert server.count == 12
    assert 2 <= server.max_in_flight <= 3


# --- the API key -------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_key_reaches_only_the_auth_header(api, server, caplog):
    caplog.set_level(logging.DEBUG)
    backend = make_backend(api, server, max_retries=1)
    server.add_fault("401", match="leaky", echo_auth=True)
    server.add_fault("500", match="flaky", times=5)
    server.add_fault("500", match="retried", times=1)
    requests = [
        text_request("leaky", "leaky"),
        text_request("flaky", "flaky"),
        text_request("ok", "retried"),
    ]
    results = run(backend, requests)
    assert results["ok"].error is None
    assert results["leaky"].error and results["flaky"].error
    # the server saw the key (and it echoed it back in the 401 message) ...
    header = "authorization" if api == "openai" else "x-goog-api-key"
    expected = f"Bearer {KEY}" if api == "openai" else KEY
    assert all(rec.headers[header] == expected for rec in server.requests)
    for rec in server.requests:
        other = {k: v for k, v in rec.headers.items() if k != header}
        assert KEY not in repr(other)
        assert KEY.encode() not in rec.raw and KEY not in rec.path
    # ... but it is in no result, log record, repr or message of ours
    assert "***" in results["leaky"].error
    for r in results.values():
        assert KEY not in repr(r) and KEY not in str(r.to_dict())
    for record in caplog.records:
        assert KEY not in record.getMessage()
    assert KEY not in caplog.text
    assert KEY not in repr(backend) and KEY not in repr(backend.chat)


@pytest.mark.parametrize("api", APIS)
def test_missing_key_variable_is_an_error_naming_it(api, server, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ValueError, match=KEY_ENV) as info:
        make_backend(api, server)
    assert KEY not in str(info.value)


def test_openai_without_key_env_sends_a_dummy_key(server):
    spec = {"api_model": "local-vlm", "base_url": server.url + "/v1", "api_key_env": None}
    backend = OpenAIBackend("local", spec)
    assert run(backend, [text_request("q", "hi")])["q"].error is None
    assert server.requests[0].headers["authorization"] == "Bearer EMPTY"


def test_gemini_without_key_env_and_without_base_url_is_an_error():
    spec = {"api_model": "gemini-2.5-flash", "api_key_env": None}
    with pytest.raises(ValueError, match="api_key_env"):
        GeminiBackend("g", spec)


# --- requests and results ----------------------------------------------------------------


def _decode_png(b64: str, urlsafe: bool = False) -> Image.Image:
    data = base64.urlsafe_b64decode(b64) if urlsafe else base64.b64decode(b64)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return Image.open(io.BytesIO(data))


def _interleaved(images):
    red, blue = images
    return [
        {"type": "text", "text": "First image:"},
        {"type": "image", "path": str(red)},
        {"type": "text", "text": "Second image:"},
        {"type": "image", "path": str(blue)},
        {"type": "text", "text": "Which is red?"},
    ]


def _check_images(decoded):
    (first, second) = decoded
    assert first.size == (3, 2) and first.getpixel((0, 0)) == (255, 0, 0)
    assert second.size == (2, 5)
    r, g, b = second.getpixel((0, 0))
    assert b > 200 and r < 50  # JPEG source, PNG on the wire


def test_openai_images_are_base64_png_parts_in_order(server, images):
    backend = make_backend("openai", server)
    req = Request(key="m", content=_interleaved(images), max_new_tokens=8, system="Be brief.")
    assert run(backend, [req])["m"].error is None
    messages = server.requests[0].body["messages"]
    assert messages[0] == {"role": "system", "content": "Be brief."}
    parts = messages[1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "text", "image_url", "text"]
    assert [p["text"] for p in parts if p["type"] == "text"] == [
        "First image:",
        "Second image:",
        "Which is red?",
    ]
    prefix = "data:image/png;base64,"
    urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert all(u.startswith(prefix) for u in urls)
    _check_images([_decode_png(u[len(prefix) :]) for u in urls])


def test_gemini_images_are_inline_png_parts_in_order(server, images):
    backend = make_backend("gemini", server)
    req = Request(key="m", content=_interleaved(images), max_new_tokens=8, system="Be brief.")
    assert run(backend, [req])["m"].error is None
    body = server.requests[0].body
    assert server.requests[0].path == "/v1/models/gemini-test-model:generateContent"
    assert body["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    (content,) = body["contents"]
    assert content["role"] == "user"
    kinds = ["text" if "text" in p else "image" for p in content["parts"]]
    assert kinds == ["text", "image", "text", "image", "text"]
    inline = [p["inlineData"] for p in content["parts"] if "inlineData" in p]
    assert all((d.get("mimeType") or d.get("mime_type")) == "image/png" for d in inline)
    _check_images([_decode_png(d["data"], urlsafe=True) for d in inline])


def test_png_bytes_applies_exif_orientation_and_is_deterministic(tmp_path):
    img = Image.new("RGB", (4, 2), (10, 20, 30))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise when displayed
    path = tmp_path / "rot.jpg"
    img.save(path, exif=exif)
    data = png_bytes(path)
    assert Image.open(io.BytesIO(data)).size == (2, 4)
    assert png_bytes(path) == data
    rgba = Image.new("RGBA", (2, 2), (1, 2, 3, 4))
    assert Image.open(io.BytesIO(png_bytes(rgba))).mode == "RGB"


def test_openai_decoding_parameters(server):
    backend = make_backend("openai", server)
    run(backend, [text_request("q", "hi", temperature=0.7, top_p=0.9, seed=11)])
    body = server.requests[0].body
    assert body["model"] == "openai-test-model"
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"]) == (
        16,
        0.7,
        0.9,
        11,
    )
    assert "max_completion_tokens" not in body


def test_openai_reasoning_model_options(server):
    backend = make_backend(
        "openai",
        server,
        max_tokens_param="max_completion_tokens",
        send_temperature=False,
        reasoning_effort="low",
        extra_body={"top_k": 5},
    )
    run(backend, [text_request("q", "hi", temperature=0.7)])
    body = server.requests[0].body
    assert body["max_completion_tokens"] == 16
    assert "max_tokens" not in body and "temperature" not in body and "top_p" not in body
    assert body["reasoning_effort"] == "low" and body["top_k"] == 5


def test_gemini_decoding_parameters(server):
    backend = make_backend("gemini", server, thinking_budget=128, include_thoughts=True)
    run(backend, [text_request("q", "hi", temperature=0.5, top_p=0.8, seed=3)])
    config = server.requests[0].body["generationConfig"]
    assert config["maxOutputTokens"] == 16
    assert (config["temperature"], config["topP"], config["seed"]) == (0.5, 0.8, 3)
    thinking = config["thinkingConfig"]
    assert set(thinking.values()) == {128, True}


@pytest.mark.parametrize("api", APIS)
def test_result_fields(api, server):
    server.reasoning = "Let me look closely."
    backend = make_backend(api, server)
    assert backend.revision == f"{api}-test-model"  # before any call: the API name
    r = run(backend, [text_request("q", "two words")])["q"]
    assert r.text == "<think>Let me look closely.</think>\n\necho: two words"
    assert r.finish_reason == "stop"
    assert r.prompt_tokens == 10
    assert r.completion_tokens == (3 if api == "openai" else 3 + 4)  # gemini adds thoughts
    assert r.latency_s > 0
    assert r.extra["model"] == f"{api}-test-model-served"
    assert backend.revision == f"{api}-test-model-served"


@pytest.mark.parametrize("api", APIS)
def test_length_finish_reason(api, server):
    server.finish = "length"
    r = run(make_backend(api, server), [text_request("q", "long")])["q"]
    assert r.finish_reason == "length" and r.error is None


def test_openai_refusal_is_recorded(server):
    server.add_fault("refusal")
    r = run(make_backend("openai", server), [text_request("q", "hi")])["q"]
    assert r.error is None
    assert r.extra["refusal"] == "I can't help with that." and r.text == r.extra["refusal"]


def test_gemini_blocked_prompt_is_content_filter(server):
    server.add_fault("blocked")
    r = run(make_backend("gemini", server), [text_request("q", "hi")])["q"]
    assert r.finish_reason == "content_filter" and r.text == ""
    assert server.count == 1


def test_gemini_finish_reason_mapping():
    assert map_finish_reason("STOP") == "stop"
    assert map_finish_reason("MAX_TOKENS") == "length"
    assert map_finish_reason("SAFETY") == "content_filter"
    assert map_finish_reason("MALFORMED_FUNCTION_CALL") == "other"
    assert map_finish_reason(None) == "other"


@pytest.mark.parametrize("api", APIS)
def test_unreadable_image_is_an_error_result(api, server, tmp_path):
    req = Request(
        key="q",
        content=[{"type": "image", "path": str(tmp_path / "missing.png")}],
        max_new_tokens=4,
    )
    r = run(make_backend(api, server), [req])["q"]
    assert r.finish_reason == "error" and "missing.png" in r.error
    assert server.count == 0


# --- the policy itself ---------------------------------------------------------------------


def test_backoff_is_exponential_with_full_jitter():
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, jitter=False)
    assert [policy.backoff(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    jittered = RetryPolicy(base_delay=1.0, max_delay=5.0)
    rng = random.Random(0)
    draws = [jittered.backoff(3, rng) for _ in range(200)]
    assert all(0.0 <= d <= 4.0 for d in draws) and max(draws) > 3.0 and min(draws) < 1.0


def test_call_with_retries_counts_attempts_and_reports():
    sleeps = Sleeps()
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise MalformedResponse("no choices")
        return "fine"

    policy = RetryPolicy(max_retries=5, base_delay=0.01)
    assert call_with_retries(flaky, policy, describe="t", sleep=sleeps) == "fine"
    assert len(calls) == 3 and len(sleeps) == 2

    def always():
        raise APICallError("overloaded", retryable=True, status=529)

    with pytest.raises(CallFailed) as info:
        call_with_retries(always, RetryPolicy(max_retries=2), describe="job x", sleep=sleeps)
    assert info.value.attempts == 3 and info.value.status == 529
    assert str(info.value) == (
        "job x failed after 3 attempts (retries exhausted): HTTP 529: overloaded"
    )


def test_unexpected_exceptions_are_not_retried():
    calls = []

    def buggy():
        calls.append(1)
        raise KeyError("oops")

    with pytest.raises(CallFailed, match="KeyError"):
        call_with_retries(buggy, RetryPolicy(), describe="t", sleep=Sleeps())
    assert len(calls) == 1


def test_parse_retry_after():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    when = "Wed, 21 Oct 2015 07:28:10 GMT"
    assert parse_retry_after(when, now=1445412480.0) == 10.0
    assert parse_retry_after(when, now=1445412500.0) == 0.0


def test_policy_from_options_and_validation():
    p = RetryPolicy.from_options({"max_retries": "2", "timeout_s": 30, "concurrency": 4})
    assert (p.max_retries, p.timeout_s, p.base_delay) == (2, 30.0, 1.0)
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)


def test_map_concurrent_yields_every_result():
    assert sorted(map_concurrent(lambda x: x * x, range(20), concurrency=4)) == [
        x * x for x in range(20)
    ]
    assert list(map_concurrent(lambda x: x, [], concurrency=4)) == []


# --- the registry's GPT-5 and GPT-4o requests -------------------------------------------


def _registry_entry(model_id: str, server: FakeAPIServer) -> dict:
    """The shipped registry entry of ``model_id``, pointed at the fake server."""
    from vlmrobust.core.config import load_yaml, validate_registry

    from .conftest import REPO

    spec = validate_registry(load_yaml(REPO / "config/models.yaml"))["models"][model_id]
    return {**spec, "base_url": server.url + "/v1", "api_key_env": KEY_ENV}


@pytest.mark.parametrize(
    ("model_id", "sent"),
    [
        # a reasoning model: the output budget as max_completion_tokens, no temperature
        ("gpt-5", {"max_completion_tokens": 16}),
        ("gpt-4o", {"max_tokens": 16, "temperature": 0.0, "top_p": 1.0}),
    ],
)
def test_gpt5_and_gpt4o_requests_are_what_the_api_accepts(model_id, sent, server, monkeypatch):
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

    monkeypatch.setenv(KEY_ENV, "sk-test")
    backend = OpenAIBackend(model_id, _registry_entry(model_id, server), sleep=Sleeps())
    request = text_request("q", "hi")  # greedy: temperature 0
    kwargs = backend.chat.request_kwargs(request_decoding(request))
    assert kwargs == sent
    # every field is one of the SDK's request fields
    assert set(kwargs) <= set(CompletionCreateParamsNonStreaming.__annotations__)
    result = run(backend, [request])["q"]
    body = server.requests[0].body
    assert {k: body[k] for k in sent} == sent
    assert not {"max_tokens", "temperature", "top_p"} & (set(body) - set(sent))
    # the output row records what was sent (generation.sent)
    assert result.extra["generation"] == {"sent": sent}
