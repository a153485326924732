"""Training the demo models: inputs as the processor makes them, targets, determinism."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("torchvision")

from vlmrobust.clients.vlm.thinking import split_thinking  # noqa: E402
from vlmrobust.core.records import Sample  # noqa: E402
from vlmrobust_demo.data import generate_demo  # noqa: E402
from vlmrobust_demo.model import build_demo_model, read_demo_record  # noqa: E402
from vlmrobust_demo.traces import crm_chain, describe, target_text, think_trace  # noqa: E402
from vlmrobust_demo.train import (  # noqa: E402
    TASKS,
    TrainSpec,
    _samples,
    expand_image_tokens,
    load_examples,
)

TINY = {"steps": 3, "batch_size": 2, "threads": 1, "weights": {t: 1.0 for t in TASKS}}


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("train") / "split"
    generate_demo(root, n_per_family=3, seed=1000, image_size=192)
    return root


@pytest.fixture(scope="module")
def random_model(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("model") / "m"
    build_demo_model(out, 5)
    return out


def _sample(meta: dict, answer: str = "Dog", answer_type: str = "label") -> Sample:
    return Sample("demo-train-x", "demo-train", ["a.png"], "Q?", answer, answer_type, meta=meta)


OBJECT_META = {
    "source_family": "imagenet-9",
    "label": "Dog",
    "imagenet9_class": "dog",
    "background": "meadow",
    "flipped": True,
}


def test_direct_target_is_the_answer_and_think_target_splits_back():
    s = _sample(OBJECT_META)
    rng = np.random.default_rng(0)
    assert target_text(s, "label", "direct", rng) == "Dog"
    text = target_text(s, "label", "think", np.random.default_rng(0))
    assert text.startswith("<think> ") and text.endswith("</think> Dog")
    thinking, answer = split_thinking(text)
    assert answer == "Dog"
    assert thinking.endswith("So the category is Dog.")
    with pytest.raises(ValueError, match="direct' or 'think"):
        target_text(s, "label", "verbose", rng)


def test_traces_vary_in_length_and_name_the_image():
    s = _sample(OBJECT_META)
    traces = {think_trace(s, np.random.default_rng(k)) for k in range(40)}
    lengths = {len(t.split()) for t in traces}
    assert len(lengths) >= 3
    assert all(t.endswith("So the category is Dog.") for t in traces)
    assert any("The image shows a dog." in t for t in traces)
    assert any("meadow" in t for t in traces)


def test_describe_and_crm_chain():
    bars = {
        "source_family": "hallusionbench",
        "figure_kind": "bars",
        "heights": {"A": 4, "B": 8},
        "colours": {"A": "blue", "B": "red"},
    }
    assert (
        describe(_sample(bars, "yes", "yes/no")) == "There are 2 bars. Bar A is blue. Bar B is red."
    )
    premise = Sample(
        "v-1",
        "demo-train",
        ["a.png"],
        "What is shown in the left part of the image?",
        "A red car.",
        "text",
        meta={"premise_index": 0, "commonsense_premises": ["Cars pollute the air."]},
    )
    assert crm_chain(premise) == (
        "1. The image shows a red car.\n2. Cars pollute the air.\n3. Conclusion: A red car."
    )
    assert target_text(premise, "crm-answer", "think", np.random.default_rng(0)) == "A red car."


def test_expand_image_tokens():
    import torch

    grid = torch.tensor([[1, 4, 6], [1, 2, 2]])
    assert expand_image_tokens([7, 9, 3, 9], grid, 9, 2) == [7, 9, 9, 9, 9, 9, 9, 3, 9]
    with pytest.raises(ValueError, match="2 images but 1 image placeholders"):
        expand_image_tokens([9], grid, 9, 2)


def test_training_inputs_are_what_the_processor_makes(split, random_model):
    """The inputs of every task equal the processor's own (ids, image-token types,
    pixels up to float16, grid), so training sees what inference sees."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from vlmrobust.clients.vlm.hf import HFBackend

    processor = AutoProcessor.from_pretrained(random_model)
    model = AutoModelForImageTextToText.from_pretrained(random_model)
    backend = HFBackend.from_loaded("m", model, processor, {"max_pixels": 50176})
    examples = load_examples(split, backend, "think", 0, tasks=["objects", "crm-answer"])
    assert len(examples["objects"]) == 3 and len(examples["crm-answer"]) >= 3
    sample, images = next(_samples("objects", split))
    first = examples["objects"][0]
    assert first.sample_id == sample.sample_id
    n_prompt = int((first.labels == -100).sum())
    prompt = processor.tokenizer.decode(first.input_ids[:n_prompt])
    n_image = int(first.mm_token_type_ids.sum())
    ref = processor(text=[prompt.replace("<|image_pad|>" * n_image, "<|image_pad|>")], images=images,
                    return_tensors="pt", images_kwargs={"size": {"shortest_edge": 3136,
                    "longest_edge": 50176}})  # fmt: skip
    assert ref["input_ids"][0].tolist() == first.input_ids[:n_prompt].tolist()
    assert ref["mm_token_type_ids"][0].tolist() == first.mm_token_type_ids[:n_prompt].tolist()
    assert torch.equal(ref["image_grid_thw"], first.image_grid_thw)
    assert torch.allclose(ref["pixel_values"], first.pixel_values.float(), atol=2e-3)
    target = processor.tokenizer.decode(first.input_ids[n_prompt:])
    assert target.endswith("</think> Dog<|im_end|>")
    assert "Which category best describes" in prompt


def test_two_builds_are_byte_identical_and_seeds_differ(split, tmp_path):
    spec = TrainSpec.from_dict(TINY)
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        build_demo_model(tmp_path / name, seed, train_dir=split, train=spec)
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    a, c = (tmp_path / "a" / "model.safetensors"), (tmp_path / "c" / "model.safetensors")
    assert a.read_bytes() != c.read_bytes()
    rec = read_demo_record(tmp_path / "a")
    assert rec["training"]["spec"]["steps"] == 3
    assert rec["training"]["examples"]["objects"] == 3
    assert rec["init_weights_sha256"] is None
    # fine-tuned from "a": the record names the start
    think = TrainSpec.from_dict({**TINY, "style": "think"})
    rec2 = build_demo_model(tmp_path / "r", 7, train_dir=split, train=think, init=tmp_path / "a")
    assert rec2["init_weights_sha256"] == rec["weights_sha256"]


def test_training_lowers_the_loss(split, tmp_path):
    spec = TrainSpec.from_dict(
        {"steps": 40, "batch_size": 4, "threads": 1, "lr": 3e-3, "weights": {"objects": 1}}
    )
    rec = build_demo_model(tmp_path / "m", 1, train_dir=split, train=spec)
    t = rec["training"]
    assert t["examples"] == {"objects": 3}
    assert t["loss_last_tenth"] < 0.5 * t["loss_first_tenth"]


def test_bad_specs_are_named(split, tmp_path):
    with pytest.raises(ValueError, match="demo.train.steps must be an integer >= 1"):
        TrainSpec(steps=0)
    with pytest.raises(ValueError, match="unknown task"):
        TrainSpec(weights={"cats": 1.0})
    with pytest.raises(ValueError, match="at least one > 0"):
        TrainSpec(weights={"objects": 0})
    with pytest.raises(ValueError, match="unknown key"):
        TrainSpec.from_dict({"epochs": 3})
    with pytest.raises(ValueError, match="both train_dir and train"):
        build_demo_model(tmp_path / "x", 0, train_dir=split)
    with pytest.raises(ValueError, match="not a demo checkpoint"):
        build_demo_model(
            tmp_path / "x", 0, train_dir=split, train=TrainSpec.from_dict(TINY), init=tmp_path
        )
    assert not (tmp_path / "x").exists()


def test_the_run_plan_builds_base_then_fine_tunes_reasoning():
    from tests.conftest import REPO
    from vlmrobust.core.config import ConfigError, load_yaml
    from vlmrobust.plan import RunPlan, inference

    config = load_yaml(REPO / "config/config.yaml")
    config["model_registry"] = str(REPO / "config/models.yaml")
    plan = RunPlan.from_config(config)
    base = inference.demo_model_spec(plan, "demo-base")
    assert base["seed"] == 1 and base["init"] is None
    assert base["train_dir"] == "results/raw/demo-train"
    assert base["options"] == {"min_pixels": 3136, "max_pixels": 50176}
    assert base["train"]["style"] == "direct"
    assert base["train"]["steps"] == 300 and base["train"]["pretrain_steps"] == 200
    TrainSpec.from_dict(base["train"])  # the CLI accepts what the plan writes
    reasoning = inference.demo_model_spec(plan, "demo-reasoning")
    assert reasoning["init"] == "results/models/demo-base"
    assert reasoning["train"]["style"] == "think"
    assert reasoning["train"]["steps"] == 200 and reasoning["train"]["pretrain_steps"] == 0
    assert inference.demo_model_inputs(plan, "demo-reasoning") == [
        "results/raw/demo-train/summary.json",
        "results/models/demo-base/vlmrobust_demo.json",
    ]
    with pytest.raises(ValueError, match="not a demo model"):
        inference.demo_model_spec(plan, "qwen2.5-vl-7b")

    off = load_yaml(REPO / "config/config.yaml")
    off["model_registry"] = str(REPO / "config/models.yaml")
    off["demo"]["train"] = {"enabled": False}
    quiet = RunPlan.from_config(off)
    assert inference.demo_model_spec(quiet, "demo-reasoning")["train"] is None
    assert inference.demo_model_inputs(quiet, "demo-reasoning") == []

    same = load_yaml(REPO / "config/config.yaml")
    same["model_registry"] = str(REPO / "config/models.yaml")
    same["demo"]["train"] = {"seed": 0}
    with pytest.raises(ConfigError, match=r"demo.train.seed \(0\) equals seed"):
        RunPlan.from_config(same)
