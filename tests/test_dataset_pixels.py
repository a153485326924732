"""A dataset's pixel limits (``datasets.<name>.pixels: harness``): from the lmms-eval chat
wrappers' defaults into the job spec, each request, every backend, the rows and the
forecast."""

from __future__ import annotations

import contextlib
import copy
import inspect
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from vlmrobust.clients.vlm.base import Request, Result
from vlmrobust.core import harness
from vlmrobust.core.config import ConfigError, load_yaml, validate_config, validate_registry
from vlmrobust.core.records import Sample, Variant
from vlmrobust.core.vision_tokens import image_tokens, processor_of
from vlmrobust.infer.run import Job, _reusable, plan_requests, to_row
from vlmrobust.plan import RunPlan, inference

from .conftest import REPO
from .lmms_stubs import chat_wrapper

HARNESS = {"min_pixels": 200704, "max_pixels": 1605632}
#: what pixels: harness shows each wrapper's models (core/harness.py harness_pixels): the
#: first resize of qwen_vl_utils.fetch_image (fit), then the processor's limits: the
#: wrapper's for Qwen2.5-VL, the fit's own for Qwen3-VL (its processor does not resize)
FIT_25 = {"factor": 28, "min_pixels": 3136, "max_pixels": 12845056}
FIT_3 = {"factor": 32, "min_pixels": 4096, "max_pixels": 16777216}
SHOWN = {
    "qwen2_5_vl": {**HARNESS, "fit": FIT_25},
    "qwen3_vl": {"min_pixels": 4096, "max_pixels": 16777216, "fit": FIT_3},
}
CORRUPTION = (
    "chartqa",
    "hallusionbench",
    "infovqa",
    "mmmu",
    "mmstar",
    "textvqa",
    "mathvision",
    "mathvista",
    "distract-bench",
)


@pytest.fixture(scope="module")
def paper() -> RunPlan:
    with contextlib.chdir(REPO):
        return RunPlan.load("config/paper.yaml")


# --- the wrappers' defaults ---------------------------------------------------------------


def test_wrapper_pixels_are_the_wrappers_constructor_defaults():
    assert harness.wrapper_pixels("qwen2_5_vl") == HARNESS
    assert harness.wrapper_pixels("qwen3_vl") == HARNESS
    for name, shown in SHOWN.items():
        assert harness.harness_pixels({"harness": {"lmms_eval": name}}) == shown
    assert harness.harness_pixels({"backend": "openai"}) is None


def test_wrapper_pixels_equal_the_imported_classes():
    """The defaults read from the source are the imported classes' (decord stubbed for
    the import: tests/lmms_stubs.py), and the classes are the ones lmms-eval resolves."""
    for name, wrapper in harness.CHAT_WRAPPERS.items():
        cls = chat_wrapper(name)
        assert (cls.__module__, cls.__name__) == (wrapper.module, wrapper.cls)
        params = inspect.signature(cls.__init__).parameters
        expected = {k: params[k].default for k in harness.PIXEL_ARGUMENTS}
        assert harness.wrapper_pixels(name) == expected


# --- the plan ------------------------------------------------------------------------------


def test_the_corruption_datasets_show_harness_models_the_wrapper_limits(paper):
    spec = inference.infer_spec(paper, "qwen2.5-vl-7b", "chartqa", "lmms-chartqa")
    assert spec["pixels"] == SHOWN["qwen2_5_vl"]
    mmstar = inference.infer_spec(paper, "qwen3-vl-8b-thinking", "mmstar", "lmms-mmstar")
    assert mmstar["pixels"] == SHOWN["qwen3_vl"]
    for dataset in CORRUPTION:
        assert paper.datasets[dataset]["pixels"] == "harness", dataset
    # an API model on the same dataset: no limits, its spec as before
    assert "pixels" not in inference.infer_spec(paper, "gpt-4o", "distract-bench", "distract-open")
    # the Idis datasets keep the registry's limits (perception: only a fit, below)
    for dataset in ("imagenet9", "mathverse", "waterbirds"):
        assert paper.datasets[dataset].get("pixels") is None, dataset
    assert "pixels" not in inference.infer_spec(
        paper, "qwen3-vl-8b-thinking", "mathverse", "idis-math"
    )


def _variant(tmp_path: Path, size=(40, 30)) -> tuple[Sample, Variant]:
    img = tmp_path / "img.png"
    Image.new("RGB", size, (200, 10, 10)).save(img)
    sample = Sample("s0", "chartqa", [str(img)], "What is it?", "1", "number")
    variant = Variant("s0", "s0", "chartqa", "clean", "none", [str(img)], ["sha"], "What is it?")
    return sample, variant


def test_the_job_spec_reaches_each_request_and_row(paper, tmp_path):
    spec = inference.infer_spec(paper, "qwen2.5-vl-7b", "chartqa", "lmms-chartqa")
    job = Job(**{**spec, "prompt": "short", "prompt_versions": None})
    sample, variant = _variant(tmp_path)
    (plan,) = plan_requests(job, [variant], {"s0": sample})
    assert (plan.request.min_pixels, plan.request.max_pixels) == (200704, 1605632)
    assert plan.request.pixels == HARNESS
    assert plan.request.fit == FIT_25

    idis = Job(**{**spec, "prompt": "short", "prompt_versions": None, "pixels": None})
    (plain,) = plan_requests(idis, [variant], {"s0": sample})
    assert plain.request.min_pixels is None and plain.request.pixels is None
    assert plain.request.fit is None

    backend = SimpleNamespace(
        name="hf",
        revision="r",
        options={"min_pixels": 200704, "max_pixels": 1003520},
        applies_pixel_limits=True,
        count_tokens=lambda text: 1,
    )
    from vlmrobust.clients.vlm.base import Backend

    backend.pixel_limits = lambda req: Backend.pixel_limits(backend, req)
    row = to_row(Result(plan.request.key, "1", "stop"), plan, job, backend).to_dict()
    assert row["pixels"] == {**HARNESS, "set_by": "dataset", "fit": FIT_25}
    assert _reusable(row, plan, job)
    # a row shown without the fit (before rows recorded it): asked again
    unfit = {**row, "pixels": {**HARNESS, "set_by": "dataset"}}
    assert not _reusable(unfit, plan, job)
    assert not _reusable(row, plain, idis)  # shown at other limits: asked again
    row_plain = to_row(Result(plain.request.key, "1", "stop"), plain, idis, backend).to_dict()
    assert row_plain["pixels"] == {"min_pixels": 200704, "max_pixels": 1003520, "set_by": "model"}
    assert _reusable(row_plain, plain, idis) and not _reusable(row_plain, plan, job)
    # a row from before rows recorded limits: the model's own
    assert _reusable({**row_plain, "pixels": None}, plain, idis)
    # an API model applies none, and its rows say so
    api = SimpleNamespace(**{**vars(backend), "applies_pixel_limits": False})
    assert Backend.pixel_limits(api, plan.request) is None


def test_the_schema_rejects_another_value_naming_the_key():
    registry = validate_registry(load_yaml(REPO / "config/models.yaml"))
    config = copy.deepcopy(load_yaml(REPO / "config/paper.yaml"))
    config["datasets"]["chartqa"]["pixels"] = "lmms"
    with pytest.raises(ConfigError, match=r"datasets\.chartqa\.pixels|chartqa.*pixels"):
        validate_config(config, registry)


def test_a_datasets_fit_alone_resizes_before_the_registrys_limits(paper, tmp_path):
    """``fit: qwen-vl-utils`` (the Idis perception datasets): qwen_vl_utils'
    ``process_vision_info`` resize without arguments (factor 28) and nothing else: the
    job spec gains ``pixels: {fit}`` for the models whose processor the workflow feeds
    (not the Gemini API), each request carries the fit but no limits of its own, a row
    records it under the model's limits, and the attention-blocking re-answer of that
    row resizes the same way. With ``pixels: harness`` too, the config is refused."""
    from vlmrobust.infer.blocking import _request

    assert harness.vision_utils_fit() == FIT_25
    for dataset in ("imagenet9", "imagenet9-sampling", "waterbirds"):
        assert paper.datasets[dataset]["fit"] == "qwen-vl-utils", dataset
    for dataset in ("mathverse", "imagenet9-gemini", "chartqa"):
        assert paper.datasets[dataset]["fit"] is None, dataset
    spec = inference.infer_spec(paper, "r1-onevision-7b-rl", "imagenet9", "idis-perception")
    assert (spec["image_size"], spec["pixels"]) == (512, {"fit": FIT_25})
    paper.datasets["imagenet9-gemini"]["fit"] = "qwen-vl-utils"
    try:  # an API model: sent no fit, its spec as before
        assert "pixels" not in inference.infer_spec(
            paper, "gemini-3-flash-low", "imagenet9-gemini", "idis-perception"
        )
    finally:
        paper.datasets["imagenet9-gemini"]["fit"] = None
    # the same grid at 512 x 512 as without it (504 is the processor's own rounding)
    entry = paper.registry["r1-onevision-7b-rl"]
    assert image_tokens((512, 512), processor_of(entry, spec["pixels"])) == image_tokens(
        (512, 512), processor_of(entry)
    )

    job = Job(**{**spec, "prompt": "short", "prompt_versions": None, "n": 1})
    sample, variant = _variant(tmp_path)
    (plan,) = plan_requests(job, [variant], {"s0": sample})
    assert plan.request.fit == FIT_25 and plan.request.pixels is None
    options = {"min_pixels": 200704, "max_pixels": 1003520}
    backend = SimpleNamespace(
        name="hf", revision="r", options=options, applies_pixel_limits=True,
        count_tokens=lambda text: 1,
    )  # fmt: skip
    from vlmrobust.clients.vlm.base import Backend

    backend.pixel_limits = lambda req: Backend.pixel_limits(backend, req)
    row = to_row(Result(plan.request.key, "1", "stop"), plan, job, backend).to_dict()
    assert row["pixels"] == {**options, "set_by": "model", "fit": FIT_25}
    assert _reusable(row, plan, job)
    assert not _reusable({**row, "pixels": {**options, "set_by": "model"}}, plan, job)
    again = _request(row, sample, variant, None, 8, tmp_path / "resized")
    assert again.fit == FIT_25 and again.pixels is None

    registry = validate_registry(load_yaml(REPO / "config/models.yaml"))
    config = copy.deepcopy(load_yaml(REPO / "config/paper.yaml"))
    config["datasets"]["chartqa"]["fit"] = "qwen-vl-utils"
    with pytest.raises(ConfigError, match=r"datasets\.chartqa\.fit: `pixels: harness`"):
        validate_config(config, registry)
    config["datasets"]["chartqa"]["fit"] = "qwen_vl_utils"
    with pytest.raises(ConfigError, match=r"datasets\.chartqa\.fit|chartqa.*fit"):
        validate_config(config, registry)


# --- the forecast --------------------------------------------------------------------------


def test_the_forecast_counts_vision_tokens_at_the_datasets_limits(paper):
    from vlmrobust.forecast.tokens import vision_tokens

    entry = paper.registry["qwen2.5-vl-7b"]
    size = (2000, 1500)  # 3 MP: over both ceilings
    own = image_tokens(size, processor_of(entry))
    shown = image_tokens(size, processor_of(entry, SHOWN["qwen2_5_vl"]))
    assert own <= 1280 < shown <= 2048
    # the fit first (2016 x 1512), then the processor's downscale: not the processor's
    # downscale of the original alone
    assert shown == 1989 != image_tokens(size, processor_of(entry, HARNESS)) == 2028

    def cond(dataset):
        return SimpleNamespace(
            dataset=dataset, condition="clean", sizes=[size], images_per_variant=1.0
        )

    assert vision_tokens(paper, "qwen2.5-vl-7b", cond("chartqa")) == shown
    # MathVerse (Idis; shown as is, no image_size): the registry's limits
    assert vision_tokens(paper, "qwen3-vl-8b-thinking", cond("mathverse")) == image_tokens(
        size, processor_of(paper.registry["qwen3-vl-8b-thinking"])
    )


# --- the backends --------------------------------------------------------------------------

transformers = pytest.importorskip("transformers")
pytest.importorskip("torchvision")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from vlmrobust_demo.model import build_demo_model

    root = tmp_path_factory.mktemp("pixels")
    build_demo_model(root / "model", 11)
    big = root / "big.png"
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)).save(big)
    return {"model": root / "model", "image": str(big)}


def _ask(key: str, image: str, **kw) -> Request:
    content = [{"type": "image", "path": image}, {"type": "text", "text": "What?"}]
    return Request(key=key, content=content, max_new_tokens=2, **kw)


def test_hf_shows_a_request_at_its_own_limits(demo):
    from vlmrobust.clients.vlm.hf import HFBackend

    options = {"batch_size": 8, "min_pixels": 3136, "max_pixels": 50176}
    backend = HFBackend("demo", {"local_path": str(demo["model"]), "options": options})
    reqs = [
        _ask("model", demo["image"]),
        _ask("small", demo["image"], max_pixels=28 * 28 * 16),
        _ask("model2", demo["image"]),
    ]
    out = {r.key: r for r in backend.generate(reqs)}
    assert all(r.error is None for r in out.values())
    # 640x480 under the model's 50,176 pixels: 168x252, 54 vision tokens; under the
    # request's 12,544: 84x112, 12 (the demo rule of core/vision_tokens.py says the same)
    rule = {"demo_seed": 0, "options": options}
    assert image_tokens((640, 480), processor_of(rule)) == 54
    assert image_tokens((640, 480), processor_of(rule, {"max_pixels": 12544})) == 12
    assert out["model"].prompt_tokens - out["small"].prompt_tokens == 54 - 12
    assert out["model"].prompt_tokens == out["model2"].prompt_tokens
    assert out["model"].extra["batch_size"] == 2 and out["small"].extra["batch_size"] == 1
    assert backend.pixel_limits(reqs[1]) == {
        "min_pixels": 3136,
        "max_pixels": 12544,
        "set_by": "dataset",
    }


def test_vllm_puts_the_limits_on_each_prompt(demo, monkeypatch):
    from transformers import AutoProcessor

    from vlmrobust.clients.vlm.vllm import VLLMBackend, build_vllm_requests

    processor = AutoProcessor.from_pretrained(demo["model"])
    options = {"min_pixels": 3136, "max_pixels": 50176}
    reqs = [_ask("own", demo["image"], **HARNESS), _ask("model", demo["image"])]
    own, model = build_vllm_requests(reqs, processor, options)
    assert own["mm_processor_kwargs"] == HARNESS
    assert "mm_processor_kwargs" not in model
    (partial,) = build_vllm_requests(
        [_ask("p", demo["image"], max_pixels=12544)], processor, options
    )
    assert partial["mm_processor_kwargs"] == {"min_pixels": 3136, "max_pixels": 12544}

    # and the engine gets them per prompt (a stand-in vllm package)
    sent: list[dict] = []

    class LLM:
        def __init__(self, **kw):
            self.engine = kw

        def generate(self, prompts, sampling_params, use_tqdm):
            sent.extend(prompts)
            done = SimpleNamespace(text="A", token_ids=[1], finish_reason="stop")
            return [SimpleNamespace(outputs=[done], prompt_token_ids=[0]) for _ in prompts]

    fake = SimpleNamespace(LLM=LLM, SamplingParams=lambda **kw: kw)
    monkeypatch.setitem(sys.modules, "vllm", fake)
    backend = VLLMBackend("demo", {"local_path": str(demo["model"]), "options": options})
    sent.clear()
    list(backend.generate(reqs))
    assert [p.get("mm_processor_kwargs") for p in sent] == [HARNESS, None]


def test_openai_sends_the_limits_to_a_server_only(monkeypatch):
    from vlmrobust.clients.vlm.openai_api import OpenAIBackend

    req = Request("k", [{"type": "text", "text": "q"}], 8, **HARNESS)
    served = OpenAIBackend(
        "served",
        {
            "api_model": "m",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": None,
            "options": {"extra_body": {"skip_special_tokens": False}},
        },
    )
    kwargs = served.request_kwargs(req)
    assert kwargs["extra_body"] == {"skip_special_tokens": False, "mm_processor_kwargs": HARNESS}
    assert "mm_processor_kwargs" not in served.request_kwargs(Request("n", req.content, 8)).get(
        "extra_body", {}
    )
    monkeypatch.setenv("PIXELS_TEST_KEY", "x")
    api = OpenAIBackend("gpt", {"api_model": "gpt-4o", "api_key_env": "PIXELS_TEST_KEY"})
    assert "extra_body" not in api.request_kwargs(req)
    assert api.pixel_limits(req) is None and served.pixel_limits(req) == {
        **HARNESS,
        "set_by": "dataset",
    }


def test_openai_resizes_by_the_fit_for_a_server_only(tmp_path, monkeypatch):
    """Against a vLLM server the image is sent as the local backends load it (the
    request's ``fit``: sides of 28 pixels, qwen-vl-utils' rule); to the OpenAI API as
    it is."""
    import base64
    import io

    from vlmrobust.clients.vlm.openai_api import OpenAIBackend, build_user_content

    img = tmp_path / "img.png"
    Image.new("RGB", (300, 200), (10, 200, 30)).save(img)
    content = [{"type": "image", "path": str(img)}, {"type": "text", "text": "q"}]
    req = Request("k", content, 8, **HARNESS, fit=FIT_25)

    def sent_size(parts: list[dict]) -> tuple[int, int]:
        data = parts[0]["image_url"]["url"].split(",", 1)[1]
        return Image.open(io.BytesIO(base64.b64decode(data))).size

    assert sent_size(build_user_content(req, fit=True)) == (308, 196)
    assert sent_size(build_user_content(req)) == (300, 200)
    served = OpenAIBackend(
        "served", {"api_model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}
    )
    assert sent_size(served._messages(req)[0]["content"]) == (308, 196)
    assert served.pixel_limits(req) == {**HARNESS, "set_by": "dataset", "fit": FIT_25}
