"""The inputs of the Idis runs, as config/paper.yaml plans them, against the authors' code.

The authors' code (effl-lab/Idis@b0443df2, docs/studies/idis.md) fixes what each model is
given. Perception (``inference/run_perception.py``, transformers): every image
``.convert("RGB").resize((512, 512))``, then ``qwen_vl_utils.process_vision_info`` (no
arguments: 504 x 504) and the family's chat template (Intern-S1 with
``enable_thinking=True``, ``inference/models.py``), then ``model.generate(max_new_tokens=
2048, do_sample=True, temperature=0.7, top_p=0.95, num_return_sequences=5)``, or
``do_sample=False`` and one output with ``--greedy`` (the attribute-guiding prompt); the
fields the call leaves unset come from the checkpoint's ``generation_config.json``. Math
(``inference/run_math_vllm.py``, vLLM): MathVerse's image as it is, the question +
``SUFFIX`` in the same chat template, ``SamplingParams(temperature=0.7, top_p=0.95,
max_tokens=8192, n=5)``.

Per family (the tiny twin of each Idis model, :mod:`vlmrobust_demo.twins`, whose
``generation_config.json`` sets ``top_k`` and ``repetition_penalty`` as real checkpoints
do): the job spec of ``RunPlan.load("config/paper.yaml")`` plans the requests of
real-format rows (the ImageNet-9 and MathVerse adapters on folders in their layouts, the
released Idis files through the ``idis-release`` conditions); the project's ``hf``
backend answers the perception requests, and what reaches ``model.generate`` is compared
with the authors' inputs built here from their code; the math requests become the
``vllm`` backend's prompts and ``SamplingParams`` (the real object in the vLLM
environment). Where they differ, the test asserts the difference as the override that
docs/studies/idis.md documents ("Inputs as the authors' code fixes them").
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from qwen_vl_utils import process_vision_info

from tests.vllm_env import VLLM_PYTHON, require_vllm, vllm_env_vars
from vlmrobust.clients.vlm.hf import HFBackend, RowSampler
from vlmrobust.clients.vlm.media import load_images
from vlmrobust.clients.vlm.vllm import (
    build_vllm_request,
    checkpoint_sampling_defaults,
    engine_kwargs,
    read_checkpoint_generation,
)
from vlmrobust.core.config import load_yaml
from vlmrobust.core.idis import IMAGENET9_FOLDERS
from vlmrobust.core.records import read_samples, read_variants
from vlmrobust.core.seeding import derive_seed
from vlmrobust.data.build import build_samples
from vlmrobust.infer.run import Job, plan_requests
from vlmrobust.perturb import build_variants
from vlmrobust.plan import RunPlan, inference
from vlmrobust_demo.twins import build_twin

from .conftest import FIXTURES, REPO
from .test_prompts_idis import PERCEPTION_BASE, PERCEPTION_STRATEGY, SUFFIX

#: the Idis models of config/paper.yaml by the family of their twin
MODELS = {
    "qwen3-vl": "qwen3-vl-8b-thinking",
    "glm-4.1v": "glm-4.1v-9b-thinking",
    "intern-s1": "intern-s1-mini",
    "qwen2.5-vl": "r1-onevision-7b-rl",
}
FAMILIES = list(MODELS)
#: run_perception.py: IMAGE_SIZE and the generate arguments (its argparse defaults)
IMAGE_SIZE = (512, 512)
#: models.py: process_vision_info(messages) without arguments, whichever the family:
#: qwen-vl-utils' default rule (factor 28, 4 to 16,384 tokens of 28 x 28 pixels), which
#: the perception jobs carry as their ``fit`` (config/paper.yaml ``fit: qwen-vl-utils``)
FIT = {"factor": 28, "min_pixels": 4 * 28 * 28, "max_pixels": 16384 * 28 * 28}
#: what that makes of the 512 x 512 image
FITTED_SIZE = (504, 504)
PERCEPTION = {"max_new_tokens": 2048, "do_sample": True, "temperature": 0.7, "top_p": 0.95,
              "num_return_sequences": 5}  # fmt: skip
GREEDY = {"max_new_tokens": 2048, "do_sample": False}
#: run_math_vllm.py: SamplingParams(temperature, top_p, max_tokens=MAX_NEW_TOKENS[key]
#: (8192 for each of the four), n=num_samples)
MATH = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 8192, "n": 5}
#: the twins' checkpoint sampling fields (generation_config.json)
CHECKPOINT = {"do_sample": True, "top_k": 20, "repetition_penalty": 1.05}
#: run_math_vllm.py THINKING_MODELS / models.py BUILDERS: enable_thinking=True
THINKING = {"intern-s1"}
#: the SamplingParams fields where the project's differ from the authors' (per-draw
#: requests: n=1 with a seed each; special tokens kept in the text)
MATH_OVERRIDES = ["n", "seed", "skip_special_tokens"]


def _plan(engines: str) -> RunPlan:
    """config/paper.yaml's plan with ``engines`` (its own: ``registry``)."""
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        config = load_yaml("config/paper.yaml")
        assert config["engines"] == "registry"
        config["engines"] = engines
        return RunPlan.from_config(config)
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def plans() -> dict[str, RunPlan]:
    return {engines: _plan(engines) for engines in ("registry", "papers")}


@pytest.fixture(scope="session")
def idis_twins(tmp_path_factory) -> Path:
    """One twin per family, its generation_config.json with :data:`CHECKPOINT`."""
    from transformers import GenerationConfig

    root = tmp_path_factory.mktemp("idis-twins")
    for i, family in enumerate(FAMILIES):
        build_twin(family, root / family, seed=300 + i)
        cfg = GenerationConfig.from_pretrained(root / family)
        cfg.update(**CHECKPOINT)
        cfg.save_pretrained(root / family)
    return root


def _picture(path: Path, size: tuple[int, int], seed: int, fmt: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, format=fmt)
    return path


def _rows(plan: RunPlan, dataset: str, spec: dict, conditions: dict, out: Path) -> tuple:
    """(samples by id, variants) of ``dataset``: the adapter on ``spec`` (the paper's
    dataset settings, a local folder) and each condition of ``conditions`` (name ->
    released root or None), as the samples and variants jobs make them."""
    samples = out / "samples" / dataset / "samples.jsonl"
    build_samples(dataset, {**plan.datasets[dataset], **spec}, samples, samples.with_name("r.json"))
    variants = []
    for condition, root in conditions.items():
        cond = copy.deepcopy(plan.conditions[condition])
        if root is not None:
            cond["root"] = str(root)
        manifest = out / "variants" / dataset / condition / "manifest.jsonl"
        assert build_variants(samples, condition, cond, plan.config["seed"], manifest) == 1
        variants += read_variants(manifest)
    return {s.sample_id: s for s in read_samples(samples)}, variants


@pytest.fixture(scope="module")
def perception(plans, tmp_path_factory) -> dict:
    """One ImageNet-9 image (a 300 x 225 JPEG of original/val/00_dog) on ``clean`` and
    its released visual-distractor image (1024 x 1024) on ``idis-visual``; ``sources``:
    the files the authors' code opens, by condition."""
    root = tmp_path_factory.mktemp("idis-perception")
    bg = root / "bg_challenge"
    for folder in IMAGENET9_FOLDERS:
        (bg / "original" / "val" / folder).mkdir(parents=True)
    stem = "n02085620_1321"
    sources = {
        "clean": _picture(bg / "original/val/00_dog" / f"{stem}.JPEG", (300, 225), 1, "JPEG"),
        "idis-visual": _picture(
            root / "Idis/Idis-perception/visual_distractor/00_dog/1/aligned" / f"{stem}.png",
            (1024, 1024),
            2,
        ),
    }
    conditions = {"clean": None, "idis-visual": root / "Idis"}
    spec = {"path": str(bg)}
    samples, variants = _rows(plans["papers"], "imagenet9", spec, conditions, root / "results")
    return {"samples": samples, "variants": variants, "sources": sources, "root": root}


@pytest.fixture(scope="module")
def math(plans, tmp_path_factory) -> dict:
    """MathVerse testmini's problem 685, Text Dominant (the real row, a 380 x 260
    diagram), on ``clean`` and with one released irrelevant visual distractor (640 x
    480) on ``idis-math-visual``."""
    root = tmp_path_factory.mktemp("idis-math")
    rows = json.loads((FIXTURES / "idis/mathverse/testmini_versions_sample.json").read_text())
    row = next(r for r in rows if r["problem_version"] == "Text Dominant")
    folder = root / "MathVerse"
    folder.mkdir()
    (folder / "testmini.json").write_text(json.dumps([row]))
    visual = root / "Idis/Idis-math/visual_distractor"
    for semantics in ("aligned", "conflicting"):  # nothing released for this row
        (visual / semantics).mkdir(parents=True)
        (visual / semantics / "meta.jsonl").write_text("")
    release = visual / "irrelevant"
    release.mkdir()
    (release / "meta.jsonl").write_text(
        json.dumps({"sample_index": row["sample_index"], "image": "n1/685.png"}) + "\n"
    )
    sources = {
        "clean": _picture(folder / row["image"], (380, 260), 3),
        "idis-math-visual": _picture(release / "n1/685.png", (640, 480), 4),
    }
    conditions = {"clean": None, "idis-math-visual": root / "Idis"}
    spec = {"source": "local", "path": str(folder)}
    samples, variants = _rows(plans["registry"], "mathverse", spec, conditions, root / "results")
    return {"samples": samples, "variants": variants, "sources": sources, "row": row}


def _planned(plan: RunPlan, model: str, dataset: str, prompt: str, data: dict, resized=None):
    """The job of config/paper.yaml's (model, dataset, prompt) and its planned requests."""
    job = Job(**inference.infer_spec(plan, model, dataset, prompt))
    return job, plan_requests(job, data["variants"], data["samples"], None, resized)


def _authors_text(processor, image: Image.Image, question: str, family: str) -> str:
    """models.py ``build_chat_prompt`` / ``build_intern_thinking_prompt`` (and
    run_math_vllm.py ``build_chat_prompt``): the image, then the question; no system."""
    content = [{"type": "image", "image": image}, {"type": "text", "text": question}]
    messages = [{"role": "user", "content": content}]
    kwargs = {"enable_thinking": True} if family in THINKING else {}
    return processor.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, **kwargs
    )


def _authors_image(source: Path, vision_utils: bool = True) -> Image.Image:
    """run_perception.py's image: opened, RGB, 512 x 512, then through
    ``qwen_vl_utils.process_vision_info`` as models.py passes it (no arguments: a second
    resize, to 504 x 504); ``vision_utils=False``: the 512 x 512 image before it."""
    image = Image.open(source).convert("RGB").resize(IMAGE_SIZE)
    if vision_utils:
        messages = [{"role": "user", "content": [{"type": "image", "image": image}]}]
        image = process_vision_info(messages)[0][0]
    return image


def _authors_inputs(processor, source: Path, question: str, family: str, vision_utils=True):
    """run_perception.py's processor inputs of one image (:func:`_authors_image`)."""
    image = _authors_image(source, vision_utils)
    text = _authors_text(processor, image, question, family)
    return processor(text=[text], images=[image], padding=True, return_tensors="pt")


def _hf_backend(twins: Path, family: str, job: Job) -> HFBackend:
    """The job's model (``engines: papers``: backend hf) loaded from the family's twin."""
    spec = {k: v for k, v in job.model_spec.items() if k != "hf_repo"}
    assert spec["backend"] == "hf"
    return HFBackend(job.model, {**spec, "local_path": str(twins / family)})


def _spy(backend: HFBackend) -> list[dict]:
    """Every ``model.generate`` call's keyword arguments; the call then runs with 2 new
    tokens (the tiny twin's output is not what is checked)."""
    calls: list[dict] = []
    generate = backend.model.generate

    def spy(**kwargs):
        calls.append(kwargs)
        short = copy.deepcopy(kwargs["generation_config"])
        short.max_new_tokens = 2
        return generate(**{**kwargs, "generation_config": short})

    backend.model.generate = spy
    return calls


def _answer(backend: HFBackend, planned: list) -> tuple[list[dict], list]:
    calls = _spy(backend)
    results = list(backend.generate([p.request for p in planned]))
    assert [r.key for r in results] == [p.request.key for p in planned]
    assert all(r.error is None for r in results), [r.error for r in results]
    return calls, results


# -- the job specs of config/paper.yaml ----------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_paper_config_plans_the_authors_settings(family, plans):
    """Every Idis dataset's job of the family's model: the perception and Waterbirds
    settings of run_perception.py (the attribute-guiding prompts greedy, one output),
    App. D.3's 64 draws, and run_math_vllm.py's for MathVerse (no checkpoint defaults);
    ``engines: papers`` answers perception with transformers and math with vLLM, as the
    authors did (config/paper.yaml's own ``engines: registry`` runs both on vLLM). The
    perception and Waterbirds jobs carry models.py's ``process_vision_info`` resize
    (``pixels.fit``, the registry's limits kept) on either engine; math shows the images
    as they are."""
    papers, registry = plans["papers"], plans["registry"]
    model = MODELS[family]
    assert registry.registry[model]["family"] == family
    fields = ("max_new_tokens", "temperature", "top_p", "n")
    for dataset, prompt, image_size, want in [
        ("imagenet9", "idis-perception", 512, (2048, 0.7, 0.95, 5)),
        ("imagenet9", "idis-perception-mitigate", 512, (2048, 0.0, 0.95, 1)),
        ("waterbirds", "waterbirds", 512, (2048, 0.7, 0.95, 5)),
        ("waterbirds", "waterbirds-mitigate", 512, (2048, 0.0, 0.95, 1)),
        ("mathverse", "idis-math", None, (8192, 0.7, 0.95, 5)),
    ]:
        spec = inference.infer_spec(papers, model, dataset, prompt)
        assert tuple(spec[k] for k in fields) == want, (dataset, prompt)
        assert spec.get("image_size") == image_size
        math = dataset == "mathverse"
        # the registry's limits (see the math test), after models.py's resize
        assert spec.get("pixels") == (None if math else {"fit": FIT}), (dataset, prompt)
        assert inference.infer_spec(registry, model, dataset, prompt).get("pixels") == spec.get(
            "pixels"
        )
        assert inference.cell_backend(papers, model, dataset) == ("vllm" if math else "hf")
        assert inference.cell_backend(registry, model, dataset) == "vllm"
        assert Job(**spec).generation == ("explicit" if math else "checkpoint")
    assert (PERCEPTION["max_new_tokens"], PERCEPTION["num_return_sequences"]) == (2048, 5)
    assert (MATH["max_tokens"], MATH["n"]) == (8192, 5)
    if family == "qwen3-vl":
        sampling = inference.infer_spec(papers, model, "imagenet9-sampling", "idis-perception")
        assert tuple(sampling[k] for k in fields) == (2048, 0.7, 0.95, 64)
        assert (sampling["image_size"], sampling["pixels"]) == (512, {"fit": FIT})


# -- perception: what reaches model.generate (transformers) ----------------------------


def _check_rows(calls: list[dict], planned: list, expected: dict, authors) -> None:
    """Each captured row against the authors' inputs of its variant (``expected``:
    variant id -> processor inputs) and their generate settings (``authors``, the
    checkpoint's generation config updated with their arguments)."""
    index = 0
    for kwargs in calls:
        rows = kwargs["input_ids"].shape[0]
        batch = planned[index : index + rows]
        index += rows
        want = [expected[p.variant.variant_id] for p in batch]
        for key in ("pixel_values", "image_grid_thw"):
            if key in want[0]:
                assert torch.equal(kwargs[key], torch.cat([w[key] for w in want])), key
        sampler = [p for p in kwargs["logits_processor"] if isinstance(p, RowSampler)]
        assert len(sampler) == (1 if authors.do_sample else 0)
        for i, (plan, inputs) in enumerate(zip(batch, want, strict=True)):
            ids = kwargs["input_ids"][i][kwargs["attention_mask"][i].bool()]
            assert torch.equal(ids, inputs["input_ids"][0]), plan.request.key
            if authors.do_sample:
                seed = plan.request.seed
                assert sampler[0].rows[i] == (authors.temperature, authors.top_p, seed)
                assert sampler[0].top_k[i] == authors.top_k
        cfg = kwargs["generation_config"]
        assert cfg.max_new_tokens == authors.max_new_tokens
        assert cfg.repetition_penalty == authors.repetition_penalty
        # the draws are rows of their own, sampled by RowSampler (do_sample=False)
        assert (cfg.do_sample, cfg.num_beams, cfg.num_return_sequences) == (False, 1, 1)
    assert index == len(planned)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "prompt, text, authors_kwargs",
    [("idis-perception", PERCEPTION_BASE, PERCEPTION),
     ("idis-perception-mitigate", PERCEPTION_STRATEGY, GREEDY)],
    ids=["sampled", "greedy"],
)  # fmt: skip
def test_perception_generate_gets_the_authors_inputs(
    family, prompt, text, authors_kwargs, plans, idis_twins, perception, tmp_path
):
    """The hf backend on config/paper.yaml's imagenet9 job (``engines: papers``): the
    prompt ids are the family's chat template of the authors' prompt, the pixel inputs
    are exactly the processor's of the authors' image (512 x 512, then 504 x 504 by
    models.py's ``process_vision_info``: the job's ``fit``), and the generate settings are theirs: 2,048 new tokens, T 0.7 / top-p 0.95 with the
    checkpoint's top_k and repetition penalty, 5 draws (one row each, seeded per draw);
    greedy and one draw for the attribute-guiding prompt."""
    model = MODELS[family]
    job, planned = _planned(plans["papers"], model, "imagenet9", prompt, perception, tmp_path)
    assert {p.prompt_source.split()[-1] for p in planned} == {
        "PERCEPTION_BASE" if prompt == "idis-perception" else "PERCEPTION_STRATEGY"
    }
    backend = _hf_backend(idis_twins, family, job)
    authors = copy.deepcopy(backend.model.generation_config)
    authors.update(**authors_kwargs)
    expected = {
        v.variant_id: _authors_inputs(
            backend.processor, perception["sources"][v.condition], text, family
        )
        for v in perception["variants"]
    }
    calls, results = _answer(backend, planned)
    _check_rows(calls, planned, expected, authors)
    draws = Counter(p.variant.variant_id for p in planned)
    n = authors.num_return_sequences if authors.do_sample else 1
    assert set(draws.values()) == {n} and len(draws) == 2
    if authors.do_sample:
        assert [p.request.seed for p in planned] == [
            derive_seed(0, model, p.variant.variant_id, p.draw) for p in planned
        ]
        assert len({p.request.seed for p in planned}) == len(planned)
    record = {"config": "checkpoint", "repetition_penalty": authors.repetition_penalty}
    if authors.do_sample:
        record.update(temperature=0.7, top_p=0.95, top_k=authors.top_k)
    else:
        record.update(temperature=0.0, top_p=None, top_k=None)
    assert all(r.extra["generation"] == record for r in results)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_jobs_fit_is_the_authors_vision_utils_resize(
    family, plans, idis_twins, perception, tmp_path
):
    """models.py passes the 512 x 512 image through ``qwen_vl_utils.process_vision_info``,
    which resizes it again, to 504 x 504, before the processor (for all four families).
    The perception job's ``fit`` (config/paper.yaml ``fit: qwen-vl-utils``) is that
    resize: each request's image as the backends load it (the 512 x 512 copy, fitted)
    equals the authors' pixel for pixel. Without it the prompt ids and the vision grid
    would be the same, the pixel values not (that one resampling is what it adds)."""
    from transformers import AutoProcessor

    model = MODELS[family]
    job, planned = _planned(
        plans["papers"], model, "imagenet9", "idis-perception", perception, tmp_path
    )
    assert job.pixels == {"fit": FIT}
    for plan in planned:
        assert plan.request.fit == FIT and plan.request.pixels is None  # the registry's limits
        (ours,) = load_images(plan.request.image_paths, plan.request.fit)
        theirs = _authors_image(perception["sources"][plan.variant.condition])
        assert ours.size == theirs.size == FITTED_SIZE
        assert np.array_equal(np.asarray(ours), np.asarray(theirs)), plan.request.key
    processor = AutoProcessor.from_pretrained(idis_twins / family)
    for source in perception["sources"].values():
        fitted = _authors_inputs(processor, source, PERCEPTION_BASE, family)
        unfitted = _authors_inputs(processor, source, PERCEPTION_BASE, family, vision_utils=False)
        assert torch.equal(fitted["input_ids"], unfitted["input_ids"])
        assert fitted["pixel_values"].shape == unfitted["pixel_values"].shape
        if "image_grid_thw" in fitted:
            assert torch.equal(fitted["image_grid_thw"], unfitted["image_grid_thw"])
        assert not torch.equal(fitted["pixel_values"], unfitted["pixel_values"])


# -- math: the vLLM prompts and SamplingParams --------------------------------------------


def _vllm_requests(family: str, twins: Path, job: Job, planned: list) -> list[dict]:
    """The vllm backend's prompts of ``planned`` (VLLMBackend.generate's
    build_vllm_request: the twin's processor, the job's options, the checkpoint's
    sampling defaults as the backend reads them)."""
    from transformers import AutoProcessor

    options = job.model_spec["options"]
    trust = bool(options.get("trust_remote_code"))
    processor = AutoProcessor.from_pretrained(twins / family, trust_remote_code=trust)
    checkpoint = checkpoint_sampling_defaults(read_checkpoint_generation(str(twins / family)))
    assert checkpoint == {k: CHECKPOINT[k] for k in ("top_k", "repetition_penalty")}
    built = [build_vllm_request(p.request, processor, options, checkpoint) for p in planned]
    return [{**b, "processor": processor} for b in built]


@pytest.mark.parametrize("family", FAMILIES)
def test_math_vllm_prompts_and_sampling_are_the_authors(family, plans, idis_twins, math):
    """config/paper.yaml's mathverse job through the vllm backend's request building:
    the prompt is the authors' chat template of the question + SUFFIX, the image as it
    is, and each draw's SamplingParams fields are temperature 0.7, top-p 0.95, 8,192
    tokens, none of the checkpoint's defaults (repetition penalty 1, no top-k), n = 1
    with its own seed, 5 draws per question (the authors: one request, n = 5)."""
    model = MODELS[family]
    job, planned = _planned(plans["registry"], model, "mathverse", "idis-math", math)
    assert job.model_spec["backend"] == "vllm"
    question = math["row"]["question"] + SUFFIX
    for plan, built in zip(planned, _vllm_requests(family, idis_twins, job, planned), strict=True):
        source = Image.open(math["sources"][plan.variant.condition]).convert("RGB")
        assert built["prompt"] == _authors_text(built["processor"], source, question, family)
        (image,) = built["multi_modal_data"]["image"]
        assert image.size == source.size and np.array_equal(np.asarray(image), np.asarray(source))
        assert "mm_processor_kwargs" not in built  # the engine's limits (below)
        seed = derive_seed(0, model, plan.variant.variant_id, plan.draw)
        assert built["sampling_params"] == {
            "temperature": MATH["temperature"], "top_p": MATH["top_p"],
            "max_tokens": MATH["max_tokens"], "n": 1, "seed": seed,
            "repetition_penalty": 1.0, "skip_special_tokens": False,
        }  # fmt: skip
    assert set(Counter(p.variant.variant_id for p in planned).values()) == {MATH["n"]}
    assert len({p.request.seed for p in planned}) == len(planned)


@pytest.mark.parametrize("family", FAMILIES)
def test_registry_pixel_limits_are_an_override(family, plans, idis_twins, math, perception):
    """The authors' processors run at their own limits; the registry gives
    Qwen3-VL-Thinking and R1-OneVision limits of their own (the vLLM engine's
    ``mm_processor_kwargs``, the hf processor's ``size``): the same tokens at 512 x 512
    (every perception image), but R1-OneVision's floor of 200,704 pixels enlarges a
    smaller MathVerse diagram (380 x 260: 126 tokens at the processor's own limits, 280
    at the registry's; Qwen3-VL's floor is its processor's own)."""
    from transformers import AutoProcessor

    job = Job(**inference.infer_spec(plans["registry"], MODELS[family], "mathverse", "idis-math"))
    options = job.model_spec["options"]
    limits = engine_kwargs("x", job.model_spec, options).get("mm_processor_kwargs")
    expected = {"qwen3-vl": (65536, 4194304), "qwen2.5-vl": (200704, 1003520)}.get(family)
    if expected is not None:
        expected = {"min_pixels": expected[0], "max_pixels": expected[1]}
    assert limits == expected
    if limits is None:
        return
    processor = AutoProcessor.from_pretrained(idis_twins / family)
    size = {"shortest_edge": limits["min_pixels"], "longest_edge": limits["max_pixels"]}

    def grid(image: Image.Image, **kwargs) -> list[int]:
        return processor.image_processor(images=[image], return_tensors="pt", **kwargs)[
            "image_grid_thw"
        ][0].tolist()

    square = Image.open(perception["sources"]["idis-visual"]).convert("RGB").resize(IMAGE_SIZE)
    assert grid(square) == grid(square, size=size)
    diagram = Image.open(math["sources"]["clean"]).convert("RGB")
    tokens = [int(np.prod(grid(diagram, **kw))) // 4 for kw in ({}, {"size": size})]
    assert tokens == ([96, 96] if family == "qwen3-vl" else [126, 280])


#: Run in the vLLM environment: each project params dict and the authors' arguments as
#: ``vllm.SamplingParams``; every field of each, and the fields where they differ.
_SAMPLING_PARAMS = r"""
import json, sys
from vllm import SamplingParams

def plain(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)

todo = json.load(open(sys.argv[1]))
authors = SamplingParams(**todo["authors"])
fields = SamplingParams.__struct_fields__
out = []
for params in todo["project"]:
    ours = SamplingParams(**params)
    out.append({"fields": {f: plain(getattr(ours, f)) for f in fields},
                "differ": sorted(f for f in fields if getattr(ours, f) != getattr(authors, f))})
json.dump(out, open(sys.argv[2], "w"))
"""


@pytest.mark.vllm
@pytest.mark.slow
def test_math_sampling_params_objects_equal_the_authors_but_the_draws(
    plans, idis_twins, math, tmp_path
):
    """The real ``vllm.SamplingParams`` of every family's math requests equal the
    authors' ``SamplingParams(temperature=0.7, top_p=0.95, max_tokens=8192, n=5)`` in
    every field but :data:`MATH_OVERRIDES`: n = 1 and a seed per draw (5 requests, one
    per draw), and special tokens kept in the text (the tokens drawn are the same)."""
    require_vllm()
    project, seeds = [], []
    for family, model in MODELS.items():
        job, planned = _planned(plans["registry"], model, "mathverse", "idis-math", math)
        for built in _vllm_requests(family, idis_twins, job, planned):
            project.append(built["sampling_params"])
            seeds.append(built["sampling_params"]["seed"])
    (tmp_path / "in.json").write_text(json.dumps({"authors": MATH, "project": project}))
    proc = subprocess.run(
        [str(VLLM_PYTHON), "-c", _SAMPLING_PARAMS, str(tmp_path / "in.json"),
         str(tmp_path / "out.json")],
        capture_output=True, text=True, env=vllm_env_vars(), timeout=600, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert len(out) == len(project) == len(MODELS) * 2 * MATH["n"]
    for got, seed in zip(out, seeds, strict=True):
        assert got["differ"] == MATH_OVERRIDES
        fields = got["fields"]
        assert (fields["n"], fields["seed"], fields["skip_special_tokens"]) == (1, seed, False)
        assert (fields["temperature"], fields["top_p"], fields["max_tokens"]) == (0.7, 0.95, 8192)
        assert (fields["top_k"], fields["min_p"], fields["repetition_penalty"]) == (0, 0.0, 1.0)
