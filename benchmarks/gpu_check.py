"""The GPU check of the local backends: real-shape random-weight models, and the twins.

    python benchmarks/gpu_check.py --family qwen3-vl --engine vllm  # one family, vLLM
    python benchmarks/gpu_check.py --family glm-4.1v                # the same through hf
    python benchmarks/gpu_check.py --twins                          # twins: hf vs vLLM, bf16
    python benchmarks/gpu_check.py --tiny [--engine vllm] [--twins] # the same code, CPU

**Throughput** (``--family``: ``qwen2.5-vl``, ``qwen3-vl``, ``glm-4.1v``, ``intern-s1``).
A random-weight model costs what the real one costs per token, since the cost is set by
the shapes, not the values: the family's twin (:mod:`vlmrobust_demo.twins`: the real
model, processor and template classes) is built offline and its configuration given the
published 7-9B checkpoint's layers, widths, heads and vision tower (``SHAPES``, each with
its source), then instantiated on the GPU in bf16 with a fixed seed. The twin's small
tokenizer stays (ids the model generates beyond it decode to nothing, which does not
matter here). It is driven through the project's own backend, :class:`HFBackend` or
:class:`VLLMBackend` (saved to a temporary folder first, about 16-18 GB, and loaded by
vLLM), with the registry's pixel options of a model of that family
(config/models.yaml). Each request has one ``--image``-pixel image and a question of its
own; every request generates exactly ``--new-tokens`` tokens (``min_new_tokens`` /
``min_tokens`` forced).

Measured: prompt tokens per second (every request with one new token, at the large
batch), generated tokens per second at batch 1 and at ``--batch-size`` (the whole
request, prompt included, as the forecast's rates count it), whether greedy outputs at
batch 1 and at the large batch agree (reported, not asserted), and peak GPU memory;
beside them the forecast's assumed rates for that backend (``forecast/throughput.yaml``:
the class of the family's first registry model, scaled by ``backends``), so the table
can be replaced by measurement.

**Twins** (``--twins``): every twin vLLM serves, answering the same greedy prompts
through :class:`HFBackend` and :class:`VLLMBackend` in one process, bf16 on a GPU
(float32 on the CPU, where tests/test_twins.py asserts the equality): identical outputs
k of n, and where they part.

The report is JSON on stdout and in ``$OUT/gpu_check.json`` when ``OUT`` is set,
rewritten after every phase so a run cut short still leaves what it measured (vLLM logs
to stdout too: read the report from the file). Needs torch (CUDA), torchvision,
transformers 5.x, Pillow and NumPy, and vLLM for ``--engine vllm`` / ``--twins`` (its CUDA
build, ``bash envs/vllm-env.sh --cuda``, which has transformers too); ``vlmrobust`` is
taken from the working tree when it is not installed. Exit status 0 when every request
generated exactly ``--new-tokens`` tokens (throughput) or every twin answered (twins).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
try:  # the package from the working tree when it is not installed (a bare GPU machine)
    import vlmrobust  # noqa: F401
    import vlmrobust_demo  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "workflow"))

#: The published checkpoints' shapes (transformers 5 field names), by family: what the
#: twin's configuration takes at full size. Only sizes: the twin keeps its special-token
#: ids and templates.
SHAPES: dict[str, dict[str, Any]] = {
    "qwen2.5-vl": {
        "source": "Qwen/Qwen2.5-VL-7B-Instruct config.json",
        "text": {
            "vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944,
            "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
            "head_dim": 128, "max_window_layers": 28,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0,
                                "mrope_section": [16, 24, 24]},
        },
        "vision": {
            "depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
            "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2,
            "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31],
        },
    },
    "qwen3-vl": {
        "source": "Qwen/Qwen3-VL-8B-Instruct / -Thinking config.json",
        "text": {
            "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 12288,
            "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128,
            "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0,
                                "mrope_section": [24, 20, 20], "mrope_interleaved": True},
        },
        "vision": {
            "depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16,
            "out_hidden_size": 4096, "patch_size": 16, "spatial_merge_size": 2,
            "num_position_embeddings": 2304, "deepstack_visual_indexes": [8, 16, 24],
        },
    },
    "glm-4.1v": {
        "source": "zai-org/GLM-4.1V-9B-Thinking config.json (also transformers' Glm4vConfig "
                  "defaults)",
        "text": {
            "vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 13696,
            "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 2,
            "head_dim": 128,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                "mrope_section": [8, 12, 12], "partial_rotary_factor": 0.5},
        },
        "vision": {
            "depth": 24, "hidden_size": 1536, "intermediate_size": 13696, "num_heads": 12,
            "out_hidden_size": 4096, "patch_size": 14, "spatial_merge_size": 2,
            "image_size": 336,
        },
    },
    "intern-s1": {
        "source": "internlm/Intern-S1-mini model card: Qwen3-8B (Qwen/Qwen3-8B config.json) "
                  "and InternViT-300M (transformers' InternVLVisionConfig defaults); the "
                  "vocabulary size 153,216 is an assumption (Qwen3's plus Intern-S1's "
                  "scientific tokens)",
        "text": {
            "vocab_size": 153216, "hidden_size": 4096, "intermediate_size": 12288,
            "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
        },
        "vision": {
            "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
            "num_attention_heads": 16,
        },
    },
}  # fmt: skip
THROUGHPUT_FAMILIES = tuple(SHAPES)

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
    p.add_argument(
        "--family", choices=THROUGHPUT_FAMILIES, default="qwen2.5-vl",
        help="the architecture whose published 7-9B shapes are measured (qwen2.5-vl)",
    )  # fmt: skip
    p.add_argument(
        "--twins", action="store_true",
        help="instead: every twin vLLM serves, greedy through hf and vLLM, bf16 on a GPU",
    )  # fmt: skip
    p.add_argument(
        "--twin-families", nargs="+", default=None, help="with --twins: only these families"
    )
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


def _engine_options(args: Any, cuda: bool, pixels: dict[str, int]) -> dict[str, Any]:
    """The vllm backend's options: the GPU engine's, or the CPU build's (float32)."""
    options: dict[str, Any] = {
        "batch_size": args.batch_size,
        **pixels,
        "dtype": "bfloat16" if cuda else "float32",
        "max_model_len": 4096,
        "max_images_per_prompt": 1,
    }
    if not cuda:
        options.update(enforce_eager=True, engine={"kv_cache_memory_bytes": 1 << 30})
    return options


def _vllm_backend(model: Any, processor: Any, tmp: Path, args: Any, cuda: bool, report: Any):
    """The random model saved as a checkpoint and loaded by the vllm backend."""
    from vlmrobust.clients.vlm.vllm import VLLMBackend

    t0 = time.perf_counter()
    ckpt = tmp / "checkpoint"
    model.save_pretrained(ckpt, safe_serialization=True)
    processor.save_pretrained(ckpt)
    report.phase("save", seconds=round(time.perf_counter() - t0, 2))
    options = _engine_options(args, cuda, _pixels(args.family))
    options["generation"] = {"min_tokens": args.new_tokens}
    t0 = time.perf_counter()
    backend = VLLMBackend(f"{args.family}-random", {"local_path": str(ckpt), "options": options})
    import vllm

    report.data["environment"]["vllm"] = vllm.__version__
    report.phase("engine_start", seconds=round(time.perf_counter() - t0, 2))
    return backend


def _registry_entry(family: str) -> dict[str, Any]:
    """The first model of ``family`` in config/models.yaml (its options, its class)."""
    return next(e for e in _registry_models().values() if e.get("family") == family)


def _pixels(family: str) -> dict[str, int]:
    """The registry's pixel options of a model of ``family`` (none for a tiling one)."""
    options = _registry_entry(family).get("options") or {}
    return {k: int(options[k]) for k in ("min_pixels", "max_pixels") if k in options}


def _forecast_rates(family: str, engine: str, device: str) -> dict[str, Any]:
    """What the forecast assumes for this family's engine on this GPU (its class in
    forecast/throughput.yaml, scaled by ``backends``), for the report's comparison."""
    tables = _forecast_tables()
    MissingEntry, load_table, throughput_class = (
        tables.MissingEntry, tables.load_table, tables.throughput_class,
    )  # fmt: skip
    model, entry = next((m, e) for m, e in _registry_models().items() if e.get("family") == family)
    gpu = next((g for g in load_table("throughput")["gpu_types"] if g in device), None)
    try:
        rates = throughput_class(model, entry, gpu, engine)
    except MissingEntry as exc:
        return {"error": str(exc)}
    return {
        "class": rates.name, "gpu": rates.gpu, "prompt_tok_s": rates.prompt_tok_s,
        "gen_tok_s": rates.gen_tok_s, "vision_factor": rates.vision_factor,
        "note": "assumed rates (forecast/throughput.yaml), not a measurement",
    }  # fmt: skip


def _forecast_tables() -> Any:
    """vlmrobust/forecast/tables.py by itself: the package's forecast imports the
    studies' plotting, which the vLLM environment need not have."""
    import importlib.util

    name = "gpu_check_forecast_tables"
    if name not in sys.modules:
        path = REPO / "workflow" / "vlmrobust" / "forecast" / "tables.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@functools.cache
def _registry_models() -> dict[str, Any]:
    """config/models.yaml's models, read once."""
    import yaml

    return yaml.safe_load((REPO / "config" / "models.yaml").read_text())["models"]


def _processor_and_config(args: Any, tmp: Path) -> tuple[Any, Any, dict[str, Any]]:
    """The family's twin (built offline into ``tmp``): its processor, and its
    configuration at the published shapes (``SHAPES``; ``--tiny``: the twin's own), and
    those shapes for the report."""
    from transformers import AutoConfig, AutoProcessor

    from vlmrobust_demo.twins import build_twin

    twin = build_twin(args.family, tmp / "twin", seed=args.seed)
    processor = AutoProcessor.from_pretrained(twin)
    config = AutoConfig.from_pretrained(twin)
    shapes = {"source": "the twin's own (tiny)"} if args.tiny else SHAPES[args.family]
    for part in ("text", "vision"):
        sub = getattr(config, f"{part}_config")
        if shapes.get(part):  # rebuilt, so what derives from the sizes follows them
            fields = {**sub.to_dict(), **shapes[part]}
            for derived in ("layer_types", "transformers_version", "model_type"):
                fields.pop(derived, None)
            setattr(config, f"{part}_config", type(sub)(**fields))
    if not args.tiny and hasattr(config, "vocab_size"):
        config.vocab_size = shapes["text"]["vocab_size"]
    return (
        processor,
        config,
        {
            "family": args.family,
            "source": shapes["source"],
            "text": config.text_config.to_dict(),
            "vision": config.vision_config.to_dict(),
        },
    )


def _build_model(config: Any, args: Any, cuda: bool, report: Report) -> Any:
    """The random model, built directly on the device (bf16 on a GPU) from the seed."""
    import torch
    import transformers

    from vlmrobust_demo.twins import family_of

    cls = getattr(transformers, family_of(args.family).model_class)
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    t0 = time.perf_counter()
    torch.manual_seed(args.seed)
    with device:
        model = cls._from_config(config, dtype=dtype)
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
            f"{args.family}-random",
            model,
            processor,
            options={
                "batch_size": args.batch_size,
                **_pixels(args.family),
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
    report.phase("warmup", batch1_s=round(w1, 2), batchN_s=round(wb, 2))

    # Prompt tokens/s: every request with one new token, at the large batch.
    min_tokens(1)
    first = [Request(r.key, r.content, max_new_tokens=1) for r in requests]
    wallp, resp = _time(backend, first, args.batch_size)
    prompt_tok = sum(r.prompt_tokens or 0 for r in resp)
    report.phase(
        "prefill",
        requests=len(first),
        prompt_tokens=prompt_tok,
        wall_s=round(wallp, 2),
        prompt_tokens_per_s=round(prompt_tok / wallp, 1),
    )
    min_tokens(args.new_tokens)

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
        "prompt_tokens_per_s": round(prompt_tok / wallp, 1),
        "tokens_per_s_batch_1": round(tok1 / wall1, 1),
        f"tokens_per_s_batch_{args.batch_size}": round(tokN / wallN, 1),
        "speedup": round((tokN / wallN) / (tok1 / wall1), 2),
        "greedy_identical_batch_1_vs_N": f"{same}/{len(res1)}",
        "completion_tokens_seen": sorted(all_lengths),
        "total_s": round(time.perf_counter() - report.t0, 1),
    }
    report.data["ok"] = all_lengths == {args.new_tokens}


def _twin_results(backend: Any, requests: list[Any]) -> dict[str, str]:
    """Each request's text; a trailing incomplete UTF-8 character (transformers decodes
    it as U+FFFD, vLLM holds it back) left out, so the texts compare token for token. A
    failed request is an error naming it, never a text to compare."""
    results = list(backend.generate(requests))
    failed = [r for r in results if r.error or r.finish_reason == "error"]
    if failed:
        raise RuntimeError(f"{backend.model_id}: request {failed[0].key} failed: {failed[0].error}")
    return {r.key: r.text.rstrip("\ufffd") for r in results}


def check_twins(args: Any, cuda: bool, report: Report, tmp: Path) -> bool:
    """Every twin vLLM serves: the same greedy requests through hf and vLLM (bf16 on a
    GPU, float32 on the CPU); identical outputs k of n and where the first pair parts."""
    from vlmrobust.clients.vlm.hf import HFBackend
    from vlmrobust.clients.vlm.vllm import VLLMBackend
    from vlmrobust_demo.twins import FAMILIES, TWIN_FAMILIES, build_twin

    requests = _requests(tmp, args)
    dtype = "bfloat16" if cuda else "float32"
    ok = True
    chosen = args.twin_families or [f for f in TWIN_FAMILIES if FAMILIES[f].vllm]
    for i, family in enumerate(chosen):
        path = build_twin(family, tmp / family, seed=args.seed + i)
        pixels = _pixels(family)
        hf = HFBackend(
            family,
            {
                "local_path": str(path),
                "options": {"batch_size": args.batch_size, "dtype": dtype, **pixels},
            },
        )
        texts_hf = _twin_results(hf, requests)
        del hf
        options = _engine_options(args, cuda, pixels)
        vl = VLLMBackend(family, {"local_path": str(path), "options": options})
        texts_vllm = _twin_results(vl, requests)
        vl.close()
        del vl
        same = [k for k in texts_hf if texts_hf[k] == texts_vllm.get(k)]
        parted = next((k for k in texts_hf if k not in same), None)
        first = None
        if parted is not None:
            a, b = texts_hf[parted], texts_vllm.get(parted, "")
            first = next(
                (j for j, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)),
            )
        report.phase(
            f"twin_{family}",
            dtype=dtype,
            identical=f"{len(same)}/{len(texts_hf)}",
            first_parting={"key": parted, "char": first} if parted else None,
        )
        ok = ok and len(texts_vllm) == len(texts_hf) == len(requests)
    return ok


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = Report()
    import torch
    import transformers

    cuda = torch.cuda.is_available()
    if not cuda and not args.tiny:
        print("no CUDA device: run with --tiny to check the script on the CPU", file=sys.stderr)
        return 2
    device = torch.cuda.get_device_name(0) if cuda else "cpu"
    report.data["environment"] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device,
        "dtype": "bfloat16" if cuda else "float32",
        "tiny": args.tiny,
        "args": vars(args),
    }
    with tempfile.TemporaryDirectory(prefix="gpu_check.") as name:
        tmp = Path(name)
        if args.twins:
            report.data["ok"] = check_twins(args, cuda, report, tmp)
        else:
            report.data["forecast"] = _forecast_rates(args.family, args.engine, device)
            processor, config, report.data["config"] = _processor_and_config(args, tmp)
            model = _build_model(config, args, cuda, report)
            requests = _requests(tmp, args)
            backend, min_tokens = _backend(model, processor, tmp, args, cuda, report)
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
