"""The embedded demo model: a deterministic Qwen2-VL checkpoint directory (random weights
here; training is tested in test_demo_train.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torchvision")

from vlmrobust.core.io import sha256_file  # noqa: E402
from vlmrobust_demo.model import (  # noqa: E402
    DEMO_MARKER,
    DEMO_VOCAB,
    SPECIAL_TOKENS,
    THINK_TOKENS,
    build_demo_model,
    read_demo_record,
)


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("demo")
    out = {}
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        build_demo_model(root / name, seed)
        out[name] = root / name
    return out


def test_same_seed_gives_identical_files(builds):
    a, b = _files(builds["a"]), _files(builds["b"])
    assert set(a) >= {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "processor_config.json",
        "chat_template.jinja",
        DEMO_MARKER,
    }
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], name


def test_different_seed_changes_weights_only(builds):
    a, c = _files(builds["a"]), _files(builds["c"])
    assert a["model.safetensors"] != c["model.safetensors"]
    # The tokenizer and processor do not depend on the seed.
    for name in ("tokenizer.json", "tokenizer_config.json", "processor_config.json"):
        assert a[name] == c[name], name


def test_record(builds):
    rec = read_demo_record(builds["a"])
    assert rec["seed"] == 3
    assert rec["sizes"] == {
        "text_layers": 2,
        "hidden": 64,
        "vision_depth": 2,
        "vision_embed": 32,
        "vocab": DEMO_VOCAB,
    }
    assert DEMO_VOCAB == 1024
    assert rec["training"] is None and rec["init_weights_sha256"] is None
    assert rec["weights_sha256"] == sha256_file(builds["a"] / "model.safetensors")
    assert read_demo_record(builds["a"].parent) is None


def test_rebuild_replaces_directory_and_leaves_no_temporaries(tmp_path):
    out = tmp_path / "m"
    build_demo_model(out, 1)
    (out / "stale.txt").write_text("from an older build")
    rec = build_demo_model(out, 2)
    assert not (out / "stale.txt").exists()
    assert read_demo_record(out)["seed"] == 2 == rec["seed"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_loads_like_a_real_checkpoint(builds):
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    d = builds["a"]
    processor = AutoProcessor.from_pretrained(d)
    model = AutoModelForImageTextToText.from_pretrained(d, dtype=torch.float32)
    assert type(processor).__name__ == "Qwen2VLProcessor"
    assert type(model).__name__ == "Qwen2VLForConditionalGeneration"
    assert processor.video_processor is not None

    tok = processor.tokenizer
    assert len(tok) == DEMO_VOCAB == model.config.text_config.vocab_size
    for t in [*SPECIAL_TOKENS, *THINK_TOKENS]:
        ids = tok.encode(t, add_special_tokens=False)
        assert len(ids) == 1 and tok.convert_ids_to_tokens(ids[0]) == t, t
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    config = json.loads((d / "config.json").read_text())
    assert config["image_token_id"] == tok.convert_tokens_to_ids("<|image_pad|>")
    # Words of the corpus are whole tokens, so random outputs can contain answers.
    for word in ("yes", " answer", " A"):
        assert len(tok.encode(word, add_special_tokens=False)) == 1, word

    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Yes or no?"}]}
    ]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert prompt == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        "<|vision_start|><|image_pad|><|vision_end|>Yes or no?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    image = Image.new("RGB", (224, 224), (10, 200, 30))
    inputs = processor(text=[prompt], images=[image], return_tensors="pt")
    # 224x224 within [min_pixels, max_pixels]: 16x16 patches of 14 px, merged 2x2 -> 64.
    assert inputs["image_grid_thw"].tolist() == [[1, 16, 16]]
    n_image = int((inputs["input_ids"] == config["image_token_id"]).sum())
    assert n_image == 64
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=5, min_new_tokens=5, do_sample=False)
    assert out.shape[1] == inputs["input_ids"].shape[1] + 5


def test_sizes_are_checked(tmp_path):
    with pytest.raises(ValueError, match=r"hidden \(40\) a multiple of head_dim"):
        build_demo_model(tmp_path / "bad", 0, hidden=40)
    with pytest.raises(ValueError, match=r"head_dim \(24\) must be a multiple of 16"):
        build_demo_model(tmp_path / "bad", 0, hidden=48, head_dim=24)
    assert not any(tmp_path.iterdir())
