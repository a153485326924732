"""The vLLM side of tests/test_twins.py, run in the vLLM environment (one process, one
engine per family, loaded through the project's ``VLLMBackend``).

``python tests/twins_vllm.py PLAN.json OUT.json ARCH,ARCH,...``: for each family of the plan, the
engine the registry options give (``engine_kwargs``: ``mm_processor_kwargs`` from
``min_pixels`` / ``max_pixels``), then

- ``vision``: per image size, the prompt token ids vLLM made of one image and a
  question (``RequestOutput.prompt_token_ids``);
- ``greedy``: per prompt, the generated token ids (greedy, ``ignore_eos``, prompts built
  by ``build_vllm_request``) and the project backend's result text
  (``VLLMBackend.generate``);

and, under ``_registry``, what vLLM's model registry says of each named architecture
(served, or the version that removed it).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def _requests(items: list[dict], max_new: int) -> list:
    from vlmrobust.clients.vlm.base import Request

    return [
        Request(
            it["key"],
            [{"type": "image", "path": it["image"]}, {"type": "text", "text": it["question"]}],
            max_new_tokens=max_new,
        )
        for it in items
    ]


def run_family(fam: dict) -> dict:
    from vllm import SamplingParams

    from vlmrobust.clients.vlm.vllm import VLLMBackend, build_vllm_request

    t0 = time.perf_counter()
    spec = {"backend": "vllm", "local_path": fam["path"], "options": fam["options"]}
    backend = VLLMBackend(fam["family"], spec)
    out: dict = {"load_s": time.perf_counter() - t0, "vision": {}, "greedy": {}}
    probe = SamplingParams(max_tokens=1, temperature=0.0)
    for item in _requests(fam["vision"], 1):
        built = build_vllm_request(item, backend.processor, backend.options)
        prompt = {"prompt": built["prompt"], "multi_modal_data": built["multi_modal_data"]}
        res = backend.llm.generate([prompt], sampling_params=[probe], use_tqdm=False)[0]
        out["vision"][item.key] = list(res.prompt_token_ids)
    reqs = _requests(fam["greedy"], fam["max_new"])
    greedy = SamplingParams(max_tokens=fam["max_new"], temperature=0.0, ignore_eos=True)
    prompts = []
    for req in reqs:
        built = build_vllm_request(req, backend.processor, backend.options)
        prompts.append({"prompt": built["prompt"], "multi_modal_data": built["multi_modal_data"]})
    results = backend.llm.generate(prompts, sampling_params=[greedy] * len(prompts), use_tqdm=False)
    texts = {r.key: r.text for r in backend.generate(reqs)}
    for req, res in zip(reqs, results, strict=True):
        out["greedy"][req.key] = {
            "prompt_ids": list(res.prompt_token_ids),
            "ids": list(res.outputs[0].token_ids),
            "text": texts[req.key],
        }
    backend.close()
    return out


def registry_facts(archs: list[str]) -> dict:
    """Per architecture: whether vLLM's registry serves it, and the version vLLM's
    registry says removed it (None where it does not say)."""
    from vllm.model_executor.models import registry

    supported = set(registry.ModelRegistry.get_supported_archs())
    removed = registry._PREVIOUSLY_SUPPORTED_MODELS
    return {a: {"supported": a in supported, "removed_in": removed.get(a)} for a in archs}


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    results: dict = {"_registry": registry_facts(sys.argv[3].split(","))}
    for fam in plan:
        try:
            results[fam["family"]] = run_family(fam)
        except Exception as exc:  # reported per family; the others still run
            results[fam["family"]] = {"error": f"{type(exc).__name__}: {exc}"[:3000]}
    Path(sys.argv[2]).write_text(json.dumps(results))


if __name__ == "__main__":
    main()
