"""One short GPU check of a local backend: a Qwen2.5-VL-7B-shaped model, random weights.

    python benchmarks/gpu_check.py                  # hf on a CUDA machine (H200: minutes)
    python benchmarks/gpu_check.py --engine vllm    # the vllm backend (vLLM installed)
    python benchmarks/gpu_check.py --tiny           # the same code path, tiny sizes, CPU
    .venv-vllm/bin/python benchmarks/gpu_check.py --tiny --engine vllm   # vLLM's CPU build

With ``--engine vllm`` the random model and its processor are saved to a temporary
folder first (about 16 GB at the 7B size) and loaded by :class:`VLLMBackend` (bf16 on a
GPU, float32 on the CPU; the tiny text model has heads of 32, the smallest vLLM's CPU
attention accepts); ``min_tokens`` forces the token count. vLLM must be installed where
it runs (its CUDA build, ``bash envs/vllm-env.sh --cuda``): a machine that reaches no
package index and has no vLLM cannot run this part. vLLM logs to stdout too: read the
report from ``$OUT/gpu_check.json`` there.

Nothing is downloaded: the model is built from a configuration written below (the
sizes of ``Qwen/Qwen2.5-VL-7B-Instruct``'s ``config.json``), instantiated directly on
the GPU in bf16 with a fixed seed, and driven through :class:`HFBackend` (left
padding, explicit greedy decoding) with the demo model's tokenizer and a
``Qwen2_5_VLProcessor`` built around it. Each request has one ``--image``-pixel image
(448x448: 32x32 patches, 256 image tokens) and a question of its own length; every
request generates exactly ``--new-tokens`` tokens (``min_new_tokens`` forced), so the
batch sizes do equal work per token.

Measured: generated tokens per second at batch 1 (on the first ``--batch1-requests``
requests, to stay inside the time budget; tokens/s does not depend on how many) and
at ``--batch-size`` (all ``--requests``), the speed-up, whether greedy outputs at batch
1 and at the large batch agree (bf16 kernels are not batch-invariant, so exact
agreement is not expected with random weights; reported, not asserted), and peak GPU
memory. The report is JSON on stdout and in ``$OUT/gpu_check.json`` when ``OUT`` is
set, rewritten after every phase so a run cut short still leaves what it measured.

Needs torch (CUDA), torchvision (the Qwen-VL image and video processors), transformers
5.x (written against 5.24.0), Pillow and NumPy; ``vlmrobust`` is taken from the working
tree when it is not installed. Exit status 0 when every request generated exactly
``--new-tokens`` tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:  # the package from the working tree when it is not installed (a bare GPU machine)
    import vlmrobust  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "workflow"))

# Qwen/Qwen2.5-VL-7B-Instruct, config.json (transformers 5 field names).
QWEN25_VL_7B_TEXT = {
    "vocab_size": 152064,
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "hidden_act": "silu",
    "max_position_embeddings": 128000,
    "rms_norm_eps": 1e-6,
    "use_sliding_window": False,
    "sliding_window": 32768,
    "max_window_layers": 28,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 1000000.0,
        "mrope_section": [16, 24, 24],
    },
    "tie_word_embeddings": False,
}
QWEN25_VL_7B_VISION = {
    "depth": 32,
    "hidden_size": 1280,
    "intermediate_size": 3420,
    "num_heads": 16,
    "hidden_act": "silu",
    "in_channels": 3,
    "out_hidden_size": 3584,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "window_size": 112,
    "fullatt_block_indexes": [7, 15, 23, 31],
    "tokens_per_second": 2,
}
TINY_TEXT = {
    **QWEN25_VL_7B_TEXT,
    "vocab_size": 1024,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,  # heads of 32: vLLM's CPU attention accepts no smaller
    "num_key_value_heads": 1,
    "max_window_layers": 2,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 1000000.0,
        "mrope_section": [4, 6, 6],
    },
}
TINY_VISION = {
    **QWEN25_VL_7B_VISION,
    "depth": 2,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_heads": 2,
    "out_hidden_size": 64,
    "fullatt_block_indexes": [1],
}

QUESTIONS = [
    "What is shown in the image?",
    "How many objects are in the picture? Answer with a number.",
    "Is there a dog in the image? Please answer yes or no.",
    "Which option is correct: A, B, C, D or E? Think step by step about the triangle, "
    "its three angles and its area before you give the final answer.",
    "Describe the colours.",
    "What is the value of x in the figure? Give the final answer at the end.",
    "Read the chart: which year has the maximum total?",
    "Where is the red object relative to the blue one: left, right, top or bottom?",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny sizes; runs on the CPU too")
    p.add_argument("--engine", choices=["hf", "vllm"], default="hf", help="backend (hf)")
    p.add_argument("--requests", type=int, default=None, help="requests (32; tiny: 4)")
    p.add_argument("--new-tokens", type=int, default=None, help="per request (256; tiny: 8)")
    p.add_argument("--batch-size", type=int, default=32, help="the large batch (default 32)")
    p.add_argument(
        "--batch1-requests", type=int, default=None, help="timed at batch 1 (4; tiny: 2)"
    )
    p.add_argument("--image", type=int, default=448, help="side of the square input image")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.requests is None:
        args.requests = 4 if args.tiny else 32
    if args.new_tokens is None:
        args.new_tokens = 8 if args.tiny else 256
    if args.batch1_requests is None:
        args.batch1_requests = 2 if args.tiny else 4
    args.batch1_requests = min(args.batch1_requests, args.requests)
    return args


class Report:
    """The JSON report, printed and saved to ``$OUT/gpu_check.json`` after every phase."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {"ok": False, "phases": {}}
        self.t0 = time.perf_counter()
        out = os.environ.get("OUT")
        self.path = Path(out) / "gpu_check.json" if out else None

    def phase(self, name: str, **values: Any) -> None:
        values["at_s"] = round(time.perf_counter() - self.t0, 2)
        self.data["phases"][name] = values
        print(f"[{values['at_s']:8.1f}s] {name}: {values}", file=sys.stderr, flush=True)
        self.save()

    def save(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.data, indent=2) + "\n")


def _time(backend: Any, requests: list[Any], batch_size: int) -> tuple[float, list[Any]]:
    backend.default_batch_size = batch_size
    t0 = time.perf_counter()
    results = list(backend.generate(requests))  # .tolist() inside synchronises the GPU
    wall = time.perf_counter() - t0
    errors = [r for r in results if r.finish_reason == "error"]
    if errors:
        raise RuntimeError(f"{len(errors)} request(s) failed; first: {errors[0].error}")
    return wall, results


def _vllm_backend(model: Any, processor: Any, tmp: Path, args: Any, cuda: bool, report: Any):
    """The random model saved as a checkpoint and loaded by the vllm backend."""
    from vlmrobust.clients.vlm.vllm import VLLMBackend

    t0 = time.perf_counter()
    ckpt = tmp / "checkpoint"
    model.save_pretrained(ckpt, safe_serialization=True)
    processor.save_pretrained(ckpt)
    report.phase("save", seconds=round(time.perf_counter() - t0, 2))
    options: dict[str, Any] = {
        "batch_size": args.batch_size,
        "min_pixels": 3136,
        "max_pixels": 12845056,
        "dtype": "bfloat16" if cuda else "float32",
        "max_model_len": 4096,
        "max_images_per_prompt": 1,
        "generation": {"min_tokens": args.new_tokens},
    }
    if not cuda:
        options.update(enforce_eager=True, engine={"kv_cache_memory_bytes": 1 << 30})
    t0 = time.perf_counter()
    backend = VLLMBackend("qwen2.5-vl-7b-random", {"local_path": str(ckpt), "options": options})
    import vllm

    report.data["environment"]["vllm"] = vllm.__version__
    report.phase("engine_start", seconds=round(time.perf_counter() - t0, 2))
    return backend


def _processor_and_config(args: Any) -> tuple[Any, Any, dict[str, Any]]:
    """The processor (the demo model's byte-level BPE, 600 tokens: ids the model
    generates beyond it decode to nothing, which does not matter here), the model's
    configuration at the 7B or the tiny sizes, and those sizes for the report."""
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    from vlmrobust_demo.model import CHAT_TEMPLATE, _build_tokenizer

    tokenizer = _build_tokenizer(600)
    processor = Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(min_pixels=3136, max_pixels=12845056),
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(),
        chat_template=CHAT_TEMPLATE,
    )
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in tokenizer.all_special_tokens}
    text_cfg = dict(TINY_TEXT if args.tiny else QWEN25_VL_7B_TEXT)
    text_cfg.update(
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    vision_cfg = dict(TINY_VISION if args.tiny else QWEN25_VL_7B_VISION)
    config = Qwen2_5_VLConfig(
        text_config=text_cfg,
        vision_config=vision_cfg,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    return processor, config, {"text": text_cfg, "vision": vision_cfg}


def _build_model(config: Any, args: Any, cuda: bool, report: Report) -> Any:
    """The random model, built directly on the device (bf16 on a GPU) from the seed."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    t0 = time.perf_counter()
    torch.manual_seed(args.seed)
    with device:
        model = Qwen2_5_VLForConditionalGeneration._from_config(config, dtype=dtype)
    model.eval()
    if cuda:
        torch.cuda.synchronize()
    report.phase(
        "build",
        seconds=round(time.perf_counter() - t0, 2),
        parameters=sum(p.numel() for p in model.parameters()),
        device=str(model.device),
        dtype=str(next(model.parameters()).dtype),
        gpu_memory_gb=round(torch.cuda.memory_allocated() / 2**30, 2) if cuda else None,
    )
    return model


def _requests(tmp: Path, args: Any) -> list[Any]:
    """One random ``--image``-pixel image per request, each with its own question."""
    import numpy as np
    from PIL import Image

    from vlmrobust.clients.vlm.base import Request

    rng = np.random.default_rng(args.seed)
    requests = []
    for i in range(args.requests):
        path = tmp / f"im{i}.png"
        pixels = rng.integers(0, 256, (args.image, args.image, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(path)
        content = [
            {"type": "image", "path": str(path)},
            {"type": "text", "text": QUESTIONS[i % len(QUESTIONS)]},
        ]
        requests.append(Request(key=f"r{i}", content=content, max_new_tokens=args.new_tokens))
    return requests


def _backend(model: Any, processor: Any, tmp: Path, args: Any, cuda: bool, report: Report):
    """The backend under test and a function that sets the tokens it must generate."""
    if args.engine == "hf":
        from vlmrobust.clients.vlm.hf import HFBackend

        backend = HFBackend.from_loaded(
            "qwen2.5-vl-7b-random",
            model,
            processor,
            options={
                "batch_size": args.batch_size,
                "min_pixels": 3136,
                "max_pixels": 12845056,
                "generation": {"min_new_tokens": args.new_tokens},
            },
            revision=f"random-seed-{args.seed}",
        )

        def min_tokens(n: int) -> None:
            backend._generation_extra = {"min_new_tokens": n}

        return backend, min_tokens
    backend = _vllm_backend(model, processor, tmp, args, cuda, report)

    def min_tokens(n: int) -> None:
        backend.options["generation"] = {"min_tokens": n}

    return backend, min_tokens


def _measure(
    backend: Any, min_tokens: Any, requests: list[Any], args: Any, cuda: bool, report: Report
) -> None:
    """Warm up, then time batch 1 and the large batch; the summary goes in the report."""
    import torch

    from vlmrobust.clients.vlm.base import Request

    # Warm-up: kernels, allocator, both batch shapes (few tokens).
    warm = [Request(r.key, r.content, max_new_tokens=4) for r in requests[: args.batch_size]]
    min_tokens(4)
    w1, _ = _time(backend, warm[:1], 1)
    wb, _ = _time(backend, warm, args.batch_size)
    min_tokens(args.new_tokens)
    report.phase("warmup", batch1_s=round(w1, 2), batchN_s=round(wb, 2))

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    one_reqs = requests[: args.batch1_requests]
    wall1, res1 = _time(backend, one_reqs, 1)
    tok1 = sum(r.completion_tokens for r in res1)
    report.phase(
        "batch_1",
        requests=len(one_reqs),
        new_tokens=tok1,
        wall_s=round(wall1, 2),
        tokens_per_s=round(tok1 / wall1, 1),
        prompt_tokens=[r.prompt_tokens for r in res1],
    )

    wallN, resN = _time(backend, requests, args.batch_size)
    tokN = sum(r.completion_tokens for r in resN)
    report.phase(
        f"batch_{args.batch_size}",
        requests=len(requests),
        new_tokens=tokN,
        wall_s=round(wallN, 2),
        tokens_per_s=round(tokN / wallN, 1),
        # (vLLM's engine runs in its own process: its memory is not this one's)
        peak_gpu_memory_gb=round(torch.cuda.max_memory_allocated() / 2**30, 2)
        if cuda and args.engine == "hf"
        else None,
    )

    by_key = {r.key: r for r in resN}
    same = sum(r.text == by_key[r.key].text for r in res1)
    all_lengths = {r.completion_tokens for r in [*res1, *resN]}
    report.data["summary"] = {
        "tokens_per_s_batch_1": round(tok1 / wall1, 1),
        f"tokens_per_s_batch_{args.batch_size}": round(tokN / wallN, 1),
        "speedup": round((tokN / wallN) / (tok1 / wall1), 2),
        "greedy_identical_batch_1_vs_N": f"{same}/{len(res1)}",
        "completion_tokens_seen": sorted(all_lengths),
        "total_s": round(time.perf_counter() - report.t0, 1),
    }
    report.data["ok"] = all_lengths == {args.new_tokens}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = Report()
    import torch
    import transformers

    cuda = torch.cuda.is_available()
    if not cuda and not args.tiny:
        print("no CUDA device: run with --tiny to check the script on the CPU", file=sys.stderr)
        return 2
    report.data["environment"] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "dtype": "bfloat16" if cuda else "float32",
        "tiny": args.tiny,
        "args": vars(args),
    }
    processor, config, report.data["config"] = _processor_and_config(args)
    model = _build_model(config, args, cuda, report)

    with tempfile.TemporaryDirectory(prefix="gpu_check.") as tmp:
        requests = _requests(Path(tmp), args)
        backend, min_tokens = _backend(model, processor, Path(tmp), args, cuda, report)
        if args.engine != "hf":
            del model  # the engine loaded its own copy from the checkpoint
            if cuda:
                torch.cuda.empty_cache()
        _measure(backend, min_tokens, requests, args, cuda, report)
        report.save()
    print(json.dumps(report.data, indent=2))
    return 0 if report.data["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
