"""The chat client both API families share (vlmrobust.clients.chat): retries, final client
errors, the key from the environment, sampling fields and cost; scripted and against a
local fake OpenAI / Gemini API."""

from __future__ import annotations

import logging

import pytest

from tests.api_server import FakeAPIServer
from vlmrobust.clients.apicall import APICallError, CallFailed, Completion, default_classify
from vlmrobust.clients.chat import ChatClient, Decoding, usage_cost
from vlmrobust.clients.llm import LLMCache, make_llm
from vlmrobust.clients.vlm.gemini_api import GeminiChat
from vlmrobust.clients.vlm.openai_api import OpenAIChat

KEY = "test-SENTINEL-chat-key-5e1d"
KEY_ENV = "VLMROBUST_TEST_CHAT_KEY"
FAST = {"max_retries": 3, "base_delay": 0.5, "max_delay": 4.0, "timeout_s": 5.0}


class Sleeps(list):
    """An injected sleep: records the waits instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _parse(response: dict, latency_s: float) -> Completion:
    return Completion(text=response["text"], finish_reason="stop", latency_s=latency_s)


class ScriptedChat(ChatClient):
    """A family without an SDK: each attempt takes the next outcome of ``script``."""

    family = "scripted"
    classify = staticmethod(default_classify)
    parse = staticmethod(_parse)

    def _connect(self, base_url, api_key):
        self.connected_with = api_key
        self.script: list = []
        self.sent: list = []
        return None

    def _send(self, request):
        self.sent.append(request)
        outcome = self.script.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture
def server():
    with FakeAPIServer() as srv:
        yield srv


def scripted(sleeps=None, **options) -> ScriptedChat:
    spec = {"api_key_env": KEY_ENV}
    return ScriptedChat.from_spec(
        spec,
        model="m",
        who="test",
        options={**FAST, **options},
        sleep=sleeps if sleeps is not None else Sleeps(),
    )


# --- the shared policy, scripted ----------------------------------------------------------


@pytest.mark.parametrize("status", [408, 429, 500, 503])
def test_retryable_status_is_retried_then_succeeds(status):
    sleeps = Sleeps()
    chat = scripted(sleeps, jitter=False)
    chat.script = [APICallError("busy", retryable=True, status=status)] * 2 + [{"text": "ok"}]
    completion = chat.call({"q": 1}, describe="scripted call")
    assert completion.text == "ok"
    assert chat.sent == [{"q": 1}] * 3
    assert sleeps == [0.5, 1.0]  # base_delay * 2**(n-1), no jitter


def test_server_status_from_an_sdk_error_decides_the_retry():
    class SDKError(Exception):
        def __init__(self, status_code: int) -> None:
            super().__init__(f"server said {status_code}")
            self.status_code = status_code

    chat = scripted()
    chat.script = [SDKError(502), {"text": "ok"}]
    assert chat.call({}, describe="d").text == "ok"
    chat.script = [SDKError(404), {"text": "never"}]
    with pytest.raises(CallFailed) as info:
        chat.call({}, describe="d")
    assert info.value.attempts == 1 and info.value.status == 404
    assert (
        info.value.reason == "d failed after 1 attempt (not retryable): HTTP 404: server said 404"
    )


def test_a_wrong_shape_is_a_retried_malformed_response():
    chat = scripted()
    chat.script = [{"no text": 1}, {"text": "ok"}]
    assert chat.call({}, describe="d").text == "ok"
    assert len(chat.sent) == 2


def test_retries_stop_after_max_retries_with_the_last_message():
    sleeps = Sleeps()
    chat = scripted(sleeps, max_retries=2)
    chat.script = [APICallError("overloaded", retryable=True, status=529)] * 5
    with pytest.raises(CallFailed) as info:
        chat.call({}, describe="d")
    assert info.value.attempts == 3 and len(sleeps) == 2
    assert (
        info.value.reason == "d failed after 3 attempts (retries exhausted): HTTP 529: overloaded"
    )


def test_a_check_can_reject_an_answer():
    chat = scripted()
    chat.script = [{"text": "bad"}, {"text": "good"}]

    def check(completion: Completion) -> None:
        if completion.text == "bad":
            raise APICallError("rejected", retryable=True)

    assert chat.call({}, describe="d", check=check).text == "good"


def test_the_key_comes_from_the_environment_and_is_scrubbed(monkeypatch):
    chat = scripted()
    assert chat.connected_with == KEY
    chat.script = [APICallError(f"invalid key {KEY}", retryable=False, status=401)]
    with pytest.raises(CallFailed) as info:
        chat.call({}, describe="d")
    assert KEY not in info.value.reason and "invalid key ***" in info.value.reason
    assert KEY not in repr(chat)
    monkeypatch.setenv(KEY_ENV, "another-key-1234")
    assert scripted().connected_with == "another-key-1234"
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ValueError, match=KEY_ENV):
        scripted()


def test_a_key_is_optional_by_family():
    no_env = {"api_key_env": None}
    assert OpenAIChat.key_optional(no_env)
    assert not GeminiChat.key_optional(no_env)
    assert GeminiChat.key_optional({**no_env, "base_url": "http://localhost:1"})
    with pytest.raises(ValueError, match="api_key_env is not set"):
        GeminiChat.from_spec(no_env, model="g", who="test", options={})


def test_sampling_fields_follow_the_send_options():
    decoding = Decoding(max_tokens=8, temperature=0.5, top_p=0.9, seed=3)
    assert scripted().sampling(decoding) == {"temperature": 0.5, "top_p": 0.9, "seed": 3}
    assert scripted().sampling(Decoding(8, 0.0)) == {"temperature": 0.0}
    assert scripted(send_temperature=False, send_seed=False).sampling(decoding) == {}
    assert scripted(send_temperature=False, send_top_p=True).sampling(decoding) == {
        "top_p": 0.9,
        "seed": 3,
    }


def test_usage_cost():
    prices = {"price_input_per_mtok": 2.0, "price_output_per_mtok": 8.0}
    assert usage_cost(prices, 10, 3) == pytest.approx((10 * 2.0 + 3 * 8.0) / 1e6)
    assert usage_cost(prices, None, 3) is None
    assert usage_cost({"price_input_per_mtok": 2.0}, 10, 3) is None
    assert scripted(**prices).cost(1_000_000, 0) == pytest.approx(2.0)


# --- both families against the fake API ---------------------------------------------------


def family_chat(api: str, server: FakeAPIServer, sleeps: Sleeps):
    cls = OpenAIChat if api == "openai" else GeminiChat
    spec = {"api_key_env": KEY_ENV, "base_url": server.url + ("/v1" if api == "openai" else "")}
    return cls.from_spec(spec, model=f"{api}-m", who="test", options=FAST, sleep=sleeps)


def family_request(chat, text: str) -> dict:
    decoding = Decoding(max_tokens=16, temperature=0.0, seed=1)
    if isinstance(chat, OpenAIChat):
        return {"messages": [{"role": "user", "content": text}], **chat.request_kwargs(decoding)}
    contents = [chat.types.Content(role="user", parts=[chat.text_part(text)])]
    return {"contents": contents, "config": chat.config(decoding)}


@pytest.mark.parametrize("api", ["openai", "gemini"])
def test_family_retries_429_and_5xx_then_succeeds_with_the_same_body(api, server):
    sleeps = Sleeps()
    chat = family_chat(api, server, sleeps)
    server.add_fault("429", retry_after="2")
    server.add_fault("500")
    server.add_fault("503")
    completion = chat.call(family_request(chat, "hello"), describe="c")
    assert completion.text == "echo: hello"
    assert [r.fault for r in server.requests] == ["429", "500", "503", None]
    assert len({r.raw for r in server.requests}) == 1  # the same body every attempt
    assert len(sleeps) == 3 and sleeps[0] == 2.0  # the server's Retry-After first


@pytest.mark.parametrize("api", ["openai", "gemini"])
@pytest.mark.parametrize("status", ["400", "401", "403", "404", "422"])
def test_family_client_error_fails_at_once_with_its_message(api, status, server):
    sleeps = Sleeps()
    chat = family_chat(api, server, sleeps)
    server.add_fault(status)
    with pytest.raises(CallFailed) as info:
        chat.call(family_request(chat, "hello"), describe="c")
    assert server.count == 1 and sleeps == []
    assert info.value.attempts == 1 and info.value.status == int(status)
    assert info.value.reason.startswith(
        f"c failed after 1 attempt (not retryable): HTTP {status}: "
    )
    assert info.value.reason.endswith(f"injected {status}")


@pytest.mark.parametrize("api", ["openai", "gemini"])
def test_the_key_is_sent_but_never_written(api, server, tmp_path):
    log_file = tmp_path / "run.log"
    handler = logging.FileHandler(log_file)
    logger = logging.getLogger("vlmrobust")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        spec = {
            "backend": api,
            "model": f"{api}-judge",
            "base_url": server.url + ("/v1" if api == "openai" else ""),
            "api_key_env": KEY_ENV,
            "options": {**FAST, "price_input_per_mtok": 1.0, "price_output_per_mtok": 2.0},
        }
        server.add_fault("401", match="leaky", echo_auth=True)
        server.add_fault("500", match="flaky")
        llm = make_llm(spec, LLMCache(tmp_path / "cache"), sleep=Sleeps())
        ok = llm.complete("flaky but fine")
        leaky = llm.complete("leaky")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        handler.close()
    assert ok.ok and ok.cost_usd is not None
    assert not leaky.ok and "***" in (leaky.error or "")
    header = "authorization" if api == "openai" else "x-goog-api-key"
    assert all(KEY in r.headers[header] for r in server.requests)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert log_file in written and len(written) >= 2  # the log and a cache entry
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in repr(llm) and KEY not in repr(llm.chat) and KEY not in str(leaky.to_dict())
