"""The vLLM side of tests/test_wrapper_tensors.py, run in the vLLM environment (one
process, one engine per family, loaded through the project's ``VLLMBackend``).

``python tests/wrapper_tensors_vllm.py PLAN.json OUT``: for each family of the plan
(``family``, ``path``, ``options``, ``requests``: the project's ``Request`` objects as
dicts), each request is built by the project's ``build_vllm_request`` (prompt text,
images fitted as the request says, ``mm_processor_kwargs``, ``SamplingParams``) and
generated alone, as ``VLLMBackend._run`` sends it. Written to ``OUT/<family>.json`` per
request, in order: its key, the prompt text, ``mm_processor_kwargs``, vLLM's prompt token ids, the
generated token ids and the decoding record; and to ``OUT/<family>/<n>.npz`` what
vLLM's call of the transformers processor returned for that prompt
(``InputProcessingContext.call_hf_processor``, after vLLM's cast to the model dtype):
``pixel_values`` (raw ``uint8`` patches: vLLM 0.32 rescales and normalises on the
device, ``mm_device_do_normalize``), ``image_grid_thw``, the processor's ``input_ids``,
and ``normalized``: those patches through the model's own input normalisation
(``build_mm_input_norm``), i.e. what its vision tower is given.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def _capture() -> list[dict[str, Any]]:
    """Every later call of vLLM's transformers-processor step, its outputs kept."""
    from vllm.multimodal.processing import context

    calls: list[dict[str, Any]] = []
    real = context.InputProcessingContext.call_hf_processor

    def call(self: Any, hf_processor: Any, data: Any, kwargs: Any = {}) -> Any:  # noqa: B006
        out = real(self, hf_processor, data, kwargs)
        calls.append(
            {k: out[k] for k in ("pixel_values", "image_grid_thw", "input_ids") if k in out}
        )
        return out

    context.InputProcessingContext.call_hf_processor = call
    return calls


def _device_norm(backend: Any) -> tuple[Any, str]:
    """The model's own input normalisation (``build_mm_input_norm``) as a function of raw
    pixel patches (numpy) to the float32 its vision tower gets, and its class name."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers.fusion.mm_input_norm import build_mm_input_norm

    config = backend.llm.llm_engine.vllm_config
    with set_current_vllm_config(config):
        module = build_mm_input_norm(backend.llm.model_config)

    def norm(raw: Any) -> Any:
        with set_current_vllm_config(config), torch.inference_mode():
            return module(torch.from_numpy(raw), torch.float32).numpy()

    return norm, type(module).__name__


def _prompt(item: dict[str, Any]) -> dict[str, Any]:
    """The prompt dict ``VLLMBackend._run`` sends for a built request."""
    prompt: dict[str, Any] = {"prompt": item["prompt"]}
    for key in ("multi_modal_data", "mm_processor_kwargs"):
        if key in item:
            prompt[key] = item[key]
    return prompt


def run_family(fam: dict[str, Any], out: Path) -> dict[str, Any]:
    import numpy as np

    from vlmrobust.clients.vlm.base import Request
    from vlmrobust.clients.vlm.vllm import VLLMBackend, build_vllm_request

    t0 = time.perf_counter()
    spec = {"backend": "vllm", "local_path": fam["path"], "options": fam["options"]}
    backend = VLLMBackend(fam["family"], spec)
    result: dict[str, Any] = {"load_s": time.perf_counter() - t0, "rows": []}
    norm, result["input_norm"] = _device_norm(backend)
    calls = _capture()
    folder = out / fam["family"]
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for n, fields in enumerate(fam["requests"]):
        req = Request(**fields)
        item = build_vllm_request(
            req, backend.processor, backend.options, backend.checkpoint_defaults
        )
        params = backend._sampling_cls(**item["sampling_params"])
        del calls[:]
        (res,) = backend.llm.generate([_prompt(item)], sampling_params=[params], use_tqdm=False)
        tensors = {k: v.numpy() for k, v in [c for c in calls if "pixel_values" in c][-1].items()}
        tensors["normalized"] = norm(tensors["pixel_values"])
        np.savez(folder / f"{n}.npz", **tensors)
        result["rows"].append({
            "key": req.key, "prompt": item["prompt"], "mm_processor_kwargs": item.get("mm_processor_kwargs"),
            "prompt_ids": list(res.prompt_token_ids), "ids": list(res.outputs[0].token_ids),
            "finish": res.outputs[0].finish_reason, "generation": item["generation"],
            "processor_calls": len(calls),
        })  # fmt: skip
    result["rows_s"] = time.perf_counter() - t0
    backend.close()
    return result


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    for fam in plan:
        try:
            result = run_family(fam, out)
        except Exception as exc:  # reported per family; the others still run
            result = {"error": f"{type(exc).__name__}: {exc}"[:3000]}
        (out / f"{fam['family']}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
