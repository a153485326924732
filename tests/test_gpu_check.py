"""benchmarks/gpu_check.py on the CPU at small shapes (its GPU run is the measurement):
the published shapes it builds, the tiny run through hf with the forecast's assumed
rates beside it, and through vLLM's CPU build (marker ``vllm``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from vlmrobust.forecast.tables import throughput_class

from .conftest import REPO
from .vllm_env import VLLM_PYTHON, require_vllm, vllm_env_vars

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_check  # noqa: E402


@pytest.mark.parametrize(
    ("family", "low", "high"),
    [
        # the counts these shapes give (2026-12-05), the sizes the hub lists for the
        # checkpoints (8.29B, 8.77B, 10.3B; the exact digits not checked against the hub)
        ("qwen2.5-vl", 8_292_166_656, 8_292_166_656),  # Qwen/Qwen2.5-VL-7B-Instruct
        ("qwen3-vl", 8_767_123_696, 8_767_123_696),  # Qwen/Qwen3-VL-8B-Instruct
        ("glm-4.1v", 10_250_000_000, 10_350_000_000),  # zai-org/GLM-4.1V-9B-Thinking
        ("intern-s1", 8_300_000_000, 8_700_000_000),  # Qwen3-8B (8.19B) + InternViT-300M
    ],
)
def test_the_published_shapes_have_the_checkpoints_parameters(family, low, high, tmp_path):
    """The twin's configuration at SHAPES, instantiated without memory (meta device),
    has the real checkpoint's parameter count: the model gpu_check times is the real
    model's size, layer for layer."""
    import torch
    import transformers

    from vlmrobust_demo.twins import family_of

    args = gpu_check.parse_args(["--family", family])
    _, config, shapes = gpu_check._processor_and_config(args, tmp_path)
    assert shapes["source"] == gpu_check.SHAPES[family]["source"]
    with torch.device("meta"):
        model = getattr(transformers, family_of(family).model_class)._from_config(config)
    count = sum(p.numel() for p in model.parameters())
    assert low <= count <= high, f"{count:,}"


def _report(tmp_path, python, *args, env=None):
    out = tmp_path / "out"
    done = subprocess.run(
        [python, str(REPO / "benchmarks" / "gpu_check.py"), "--tiny", *args],
        env={**os.environ, **(env or {}), "OUT": str(out)},
        capture_output=True, text=True, timeout=900, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "gpu_check.json").read_text())


def test_tiny_run_through_hf_beside_the_forecasts_rates(tmp_path):
    """Every request generates exactly --new-tokens tokens; prompt and generated tokens/s
    are measured; the forecast's assumed rates for that backend are beside them."""
    import yaml

    report = _report(tmp_path, sys.executable, "--family", "glm-4.1v", "--requests", "3",
                     env={"PYTHONPATH": str(REPO / "workflow")})  # fmt: skip
    assert report["ok"] is True
    assert set(report["phases"]) == {"build", "warmup", "prefill", "batch_1", "batch_32"}
    assert report["phases"]["batch_32"]["new_tokens"] == 3 * 8
    assert report["summary"]["prompt_tokens_per_s"] > 0
    models = yaml.safe_load((REPO / "config" / "models.yaml").read_text())["models"]
    rates = throughput_class("glm-4.1v-9b-thinking", models["glm-4.1v-9b-thinking"], None, "hf")
    assert report["forecast"]["prompt_tok_s"] == rates.prompt_tok_s == 13000.0
    assert report["forecast"]["gen_tok_s"] == rates.gen_tok_s == 650.0


@pytest.mark.vllm
@pytest.mark.slow
def test_tiny_run_through_vllm_and_the_twins_check(tmp_path):
    """The same through vLLM's CPU build (Qwen3-VL's twin at its tiny shapes), and
    --twins for one family: hf and vLLM give the same greedy outputs in float32."""
    require_vllm()
    env = {**vllm_env_vars(), "VLLM_CPU_KVCACHE_SPACE": "1"}
    report = _report(tmp_path / "a", str(VLLM_PYTHON), "--engine", "vllm", "--family",
                     "qwen3-vl", "--requests", "3", env=env)  # fmt: skip
    assert report["ok"] is True and report["forecast"]["gen_tok_s"] == 6500.0
    assert report["phases"]["batch_32"]["new_tokens"] == 3 * 8
    twins = _report(tmp_path / "b", str(VLLM_PYTHON), "--twins", "--twin-families",
                    "qwen2.5-vl", "--requests", "3", env=env)  # fmt: skip
    assert twins["ok"] is True
    assert twins["phases"]["twin_qwen2.5-vl"]["identical"] == "3/3"
