"""The vllm backend's request building (pure; runs without vllm) on the demo processor."""

from __future__ import annotations

import importlib.util
import sys
from types import SimpleNamespace

import pytest
from PIL import Image

pytest.importorskip("transformers")
pytest.importorskip("torchvision")

from vlmrobust.clients.vlm.base import Request  # noqa: E402
from vlmrobust.clients.vlm.vllm import (  # noqa: E402
    VLLMBackend,
    build_vllm_requests,
    checkpoint_sampling_defaults,
    engine_kwargs,
    read_checkpoint_generation,
    sampling_params,
    serve_command,
)
from vlmrobust_demo.model import build_demo_model  # noqa: E402

PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from transformers import AutoProcessor

    root = tmp_path_factory.mktemp("vllm")
    build_demo_model(root / "model", 0)
    images = []
    for i, size in enumerate([(30, 40), (50, 60), (70, 80)]):
        path = root / f"im{i}.png"
        Image.new("RGB", size, (i * 80, 10, 10)).save(path)
        images.append(str(path))
    return {
        "processor": AutoProcessor.from_pretrained(root / "model"),
        "images": images,
        "model_dir": root / "model",
    }


def _interleaved(images: list[str]) -> Request:
    return Request(
        key="multi",
        content=[
            {"type": "text", "text": "First:"},
            {"type": "image", "path": images[2]},
            {"type": "text", "text": "Second:"},
            {"type": "image", "path": images[0]},
            {"type": "text", "text": "Third:"},
            {"type": "image", "path": images[1]},
            {"type": "text", "text": "Which differs?"},
        ],
        max_new_tokens=32,
        system="Answer briefly.",
    )


def test_placeholders_match_images_in_order(env):
    (item,) = build_vllm_requests([_interleaved(env["images"])], env["processor"])
    prompt = item["prompt"]
    assert prompt.count("<|image_pad|>") == 3 == len(item["multi_modal_data"]["image"])
    assert prompt == (
        "<|im_start|>system\nAnswer briefly.<|im_end|>\n<|im_start|>user\n"
        f"First:{PLACEHOLDER}Second:{PLACEHOLDER}Third:{PLACEHOLDER}Which differs?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    # Images in content order (told apart by their sizes), RGB.
    assert [im.size for im in item["multi_modal_data"]["image"]] == [(70, 80), (30, 40), (50, 60)]
    assert all(im.mode == "RGB" for im in item["multi_modal_data"]["image"])
    assert item["sampling_params"] == {
        "n": 1,
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 32,
        "seed": None,
        "repetition_penalty": 1.0,
        "skip_special_tokens": False,
    }


def test_template_string_renders_like_the_processor(env):
    reqs = [
        _interleaved(env["images"]),
        Request("t", [{"type": "text", "text": "No image here."}], 8),
    ]
    from_processor = build_vllm_requests(reqs, env["processor"])
    from_string = build_vllm_requests(reqs, env["processor"].chat_template)
    assert [x["prompt"] for x in from_processor] == [x["prompt"] for x in from_string]
    assert "multi_modal_data" not in from_processor[1]
    assert "<|image_pad|>" not in from_processor[1]["prompt"]


def test_sampling_params_and_errors(env):
    img = env["images"][0]
    reqs = [
        Request("s", [{"type": "image", "path": img}], 16, temperature=0.7, top_p=0.9, seed=5),
        Request("bad", [{"type": "image", "path": img + ".missing"}], 16),
        Request("g", [{"type": "text", "text": "hi"}], 4, seed=9),
    ]
    s, bad, g = build_vllm_requests(reqs, env["processor"])
    assert s["sampling_params"] == {
        "n": 1,
        "temperature": 0.7,
        "top_p": 0.9,
        "max_tokens": 16,
        "seed": 5,
        "repetition_penalty": 1.0,
        "skip_special_tokens": False,
    }
    assert bad["key"] == "bad" and ".missing" in bad["error"] and "prompt" not in bad
    assert g["sampling_params"]["seed"] is None and g["sampling_params"]["temperature"] == 0.0
    # Registry extras are added; the request's own fields cannot be overridden.
    (x,) = build_vllm_requests(
        reqs[:1], env["processor"], {"generation": {"repetition_penalty": 1.05}}
    )
    assert x["sampling_params"]["repetition_penalty"] == 1.05
    (y,) = build_vllm_requests(reqs[:1], env["processor"], {"generation": {"temperature": 0}})
    assert "decided by the request" in y["error"]


def test_engine_kwargs():
    spec = {"hf_repo": "org/model", "revision": "abc", "local_path": None}
    kw = engine_kwargs(
        "org/model",
        spec,
        {
            "max_model_len": 32768,
            "tensor_parallel_size": 2,
            "min_pixels": 3136,
            "max_pixels": 1003520,
            "max_images_per_prompt": 4,
            "engine": {"enable_prefix_caching": True},
        },
    )
    assert kw == {
        "model": "org/model",
        "dtype": "bfloat16",
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.9,
        "limit_mm_per_prompt": {"image": 4},
        "trust_remote_code": False,
        "enforce_eager": False,
        "generation_config": "vllm",
        "revision": "abc",
        "tokenizer_revision": "abc",
        "max_model_len": 32768,
        "mm_processor_kwargs": {"min_pixels": 3136, "max_pixels": 1003520},
        "enable_prefix_caching": True,
    }


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_missing_vllm_is_named():
    """This environment has no vLLM: the error names the model, the setting that says
    where vLLM models run, and how to make that environment."""
    with pytest.raises(ImportError) as info:
        VLLMBackend("m", {"hf_repo": "org/model", "options": {}})
    message = str(info.value)
    assert message.startswith("models.m (backend vllm): the `vllm` package is not installed")
    assert "`environments.vllm`" in message and "bash envs/vllm-env.sh" in message


def test_missing_checkpoint_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"models.m.local_path: .*gone is not a directory"):
        VLLMBackend("m", {"local_path": str(tmp_path / "gone"), "options": {}})


def test_serve_command_carries_the_engine_settings():
    spec = {
        "local_path": "results/models/demo-vllm",
        "options": {
            "dtype": "float32",
            "max_model_len": 2048,
            "enforce_eager": True,
            "max_images_per_prompt": 2,
            "min_pixels": 3136,
            "max_pixels": 50176,
            "engine": {"kv_cache_memory_bytes": 1024},
        },
    }
    cmd = serve_command("demo-vllm", spec, python="/env/bin/python", port=8123, check=False)
    assert cmd[:3] == ["/env/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    pairs = dict(zip(cmd[3::2], cmd[4::2], strict=False))
    flags = " ".join(cmd)
    assert pairs["--model"] == "results/models/demo-vllm"
    assert pairs["--served-model-name"] == "demo-vllm"
    assert "--host 127.0.0.1 --port 8123" in flags
    assert "--dtype float32" in flags and "--max-model-len 2048" in flags
    assert '--limit-mm-per-prompt {"image": 2}' in flags
    assert '--mm-processor-kwargs {"max_pixels": 50176, "min_pixels": 3136}' in flags
    assert "--enforce-eager" in flags and "--trust-remote-code" not in flags
    assert "--generation-config vllm" in flags and "--kv-cache-memory-bytes 1024" in flags


def test_image_limit_stops_the_job_before_loading(tmp_path):
    """A variant with more images than the model's limit: the job stops before the
    engine is loaded (this environment has no vLLM) and writes no row."""
    from vlmrobust.core.io import sha256_file
    from vlmrobust.core.records import Sample, Variant, write_samples, write_variants
    from vlmrobust.infer.run import Job, run_inference

    imgs = []
    for i in range(2):
        imgs.append(tmp_path / f"{i}.png")
        Image.new("RGB", (28, 28), (i * 90, 0, 0)).save(imgs[-1])
    paths = [str(p) for p in imgs]
    write_samples(tmp_path / "s.jsonl", [Sample("d-1", "d", paths, "Which?", "A", "letter")])
    write_variants(
        tmp_path / "m.jsonl",
        [
            Variant(
                "d-1", "d-1", "d", "clean", "none", paths, [sha256_file(p) for p in imgs], "Which?"
            )
        ],
    )
    spec = {"backend": "vllm", "local_path": str(tmp_path), "options": {"max_images_per_prompt": 1}}
    job = Job(model="m", model_spec=spec, prompt="short", max_new_tokens=4)
    out = tmp_path / "out.jsonl"
    with pytest.raises(ValueError) as info:
        run_inference(job, tmp_path / "m.jsonl", tmp_path / "s.jsonl", out)
    assert str(info.value).startswith(
        "models.m.options.max_images_per_prompt is 1, but variant 'd-1' has 2 images"
    )
    assert not out.exists() and not out.with_name("out.jsonl.partial").exists()


class _FakeVLLM:
    """Stands in for the vllm package: records the engine arguments and the prompts."""

    def __init__(self) -> None:
        self.engine: dict = {}
        self.calls: list[int] = []
        fake = self

        class SamplingParams:
            def __init__(self, **kw):
                self.kw = kw

        class LLM:
            def __init__(self, **kw):
                fake.engine = kw

            def generate(self, prompts, sampling_params, use_tqdm):
                fake.calls.append(len(prompts))
                outs = []
                for prompt, params in zip(prompts, sampling_params, strict=True):
                    if "FAIL" in prompt["prompt"]:
                        raise ValueError("prompt too long (simulated)")
                    n = len(prompt.get("multi_modal_data", {}).get("image", []))
                    cut = params.kw["max_tokens"] < 3
                    text = "<think>x</think>B" + ("" if cut else "<|im_end|>")
                    completion = SimpleNamespace(
                        text=text,
                        token_ids=list(range(2 if cut else 5)),
                        finish_reason="length" if cut else "stop",
                    )
                    outs.append(
                        SimpleNamespace(outputs=[completion], prompt_token_ids=[0] * (10 + n))
                    )
                return outs

        self.SamplingParams, self.LLM = SamplingParams, LLM


def test_engine_path_with_a_stand_in_vllm(env, monkeypatch):
    fake = _FakeVLLM()
    monkeypatch.setitem(sys.modules, "vllm", fake)
    model_dir = env["model_dir"]
    backend = VLLMBackend("demo", {"local_path": str(model_dir), "options": {"batch_size": 8}})
    assert fake.engine["model"] == str(model_dir) and fake.engine["generation_config"] == "vllm"
    img = env["images"][0]
    reqs = [
        Request("a", [{"type": "image", "path": img}, {"type": "text", "text": "q"}], 16),
        Request("fail", [{"type": "text", "text": "FAIL"}], 16),
        Request("missing", [{"type": "image", "path": img + ".gone"}], 16),
        Request("short", [{"type": "text", "text": "q"}], 2, temperature=1.0, seed=3),
    ]
    out = {r.key: r for r in backend.generate(reqs)}
    # the start-up probe (one token for one image), then the batch failed, then one by one
    assert fake.calls == [1, 3, 1, 1, 1]
    assert out["a"].text == "<think>x</think>B" and out["a"].finish_reason == "stop"
    assert (out["a"].prompt_tokens, out["a"].completion_tokens) == (11, 5)
    assert out["a"].extra == {
        "batch_size": 1,
        "seed": None,
        "generation": {
            "config": "explicit",
            "temperature": 0.0,
            "top_p": None,
            "top_k": None,
            "min_p": None,
            "repetition_penalty": 1.0,
        },
    }
    assert out["short"].finish_reason == "length" and out["short"].extra["seed"] == 3
    assert out["fail"].finish_reason == "error" and "simulated" in out["fail"].error
    assert out["missing"].finish_reason == "error" and ".gone" in out["missing"].error


def test_placeholders_written_in_the_text_are_dropped(env):
    # a model's own output fed back (CRM's final-answer stage) may hold "<|image_pad|>"
    req = Request(
        key="fed-back",
        content=[
            {"type": "image", "path": env["images"][0]},
            {"type": "text", "text": "Your reasoning: a <|image_pad|> b <|video_pad|> c"},
        ],
        max_new_tokens=8,
    )
    (item,) = build_vllm_requests([req], env["processor"])
    assert item["prompt"].count("<|image_pad|>") == 1 == len(item["multi_modal_data"]["image"])
    assert "<|video_pad|>" not in item["prompt"]
    assert "Your reasoning: a  b  c" in item["prompt"]


# --- generation_config: checkpoint (vLLM's generation_config="auto") -------------------

#: Qwen2.5-VL-7B-Instruct's generation_config.json
QWEN25_GENERATION = {
    "bos_token_id": 151643,
    "pad_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "repetition_penalty": 1.05,
    "temperature": 0.1,
    "top_p": 0.001,
    "top_k": 1,
}


def test_checkpoint_defaults_are_the_fields_vllm_takes(tmp_path):
    import json

    defaults = {"repetition_penalty": 1.05, "temperature": 0.1, "top_k": 1, "top_p": 0.001}
    assert checkpoint_sampling_defaults(QWEN25_GENERATION) == defaults
    assert checkpoint_sampling_defaults(None) == {}
    (tmp_path / "generation_config.json").write_text(json.dumps(QWEN25_GENERATION))
    assert checkpoint_sampling_defaults(read_checkpoint_generation(str(tmp_path))) == defaults
    empty = tmp_path / "none"
    empty.mkdir()
    assert read_checkpoint_generation(str(empty)) == {}


def test_checkpoint_sampling_params_take_the_requests_fields_over_the_checkpoints():
    defaults = checkpoint_sampling_defaults(QWEN25_GENERATION)
    text = [{"type": "text", "text": "q"}]
    greedy = Request("g", text, 8, generation_config="checkpoint")
    sampled = Request(
        "s", text, 8, temperature=0.7, top_p=0.95, seed=5, generation_config="checkpoint"
    )
    explicit = Request("e", text, 8, temperature=0.7, top_p=0.95, seed=5)
    base = {"n": 1, "max_tokens": 8, "skip_special_tokens": False}
    assert sampling_params(greedy, None, defaults) == {
        **base,
        "repetition_penalty": 1.05,
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 1,
        "seed": None,
    }
    assert sampling_params(sampled, None, defaults) == {
        **base,
        "repetition_penalty": 1.05,
        "temperature": 0.7,
        "top_p": 0.95,
        "top_k": 1,
        "seed": 5,
    }
    # explicit: none of the checkpoint's (the Idis math runs' SamplingParams)
    assert sampling_params(explicit, None, defaults) == {
        **base,
        "repetition_penalty": 1.0,
        "temperature": 0.7,
        "top_p": 0.95,
        "seed": 5,
    }
    with pytest.raises(ValueError, match="request 'x': generation_config must be"):
        sampling_params(Request("x", text, 8, generation_config="auto"), None, defaults)


def test_checkpoint_choice_is_recorded_and_served(env):
    defaults = checkpoint_sampling_defaults(QWEN25_GENERATION)
    text = [{"type": "text", "text": "q"}]
    reqs = [
        Request("g", text, 8, generation_config="checkpoint"),
        Request("s", text, 8, temperature=0.7, top_p=0.95, seed=5, generation_config="checkpoint"),
    ]
    g, s = build_vllm_requests(reqs, env["processor"], {}, defaults)
    assert g["generation"] == {
        "config": "checkpoint",
        "temperature": 0.0,
        "top_p": None,
        "top_k": None,  # greedy: vLLM ignores top-k
        "min_p": None,
        "repetition_penalty": 1.05,
    }
    assert s["generation"] == {
        "config": "checkpoint",
        "temperature": 0.7,
        "top_p": 0.95,
        "top_k": 1,
        "min_p": None,
        "repetition_penalty": 1.05,
    }
    spec = {"hf_repo": "org/model", "local_path": None}
    assert engine_kwargs("org/model", spec, {})["generation_config"] == "vllm"
    options = {"generation_config": "checkpoint"}
    assert engine_kwargs("org/model", spec, options)["generation_config"] == "auto"
    cmd = serve_command("m", {**spec, "options": options}, check=False)
    assert cmd[cmd.index("--generation-config") + 1] == "auto"
