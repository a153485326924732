"""The model receives what lmms-eval's own chat wrappers give it.

The papers ran lmms-eval (pinned here: 0.7.2) as ``--model qwen2_5_vl`` and ``--model
qwen3_vl``. lmms-eval resolves both names to its transformers *chat* wrappers,
``lmms_eval.models.chat.qwen2_5_vl.Qwen2_5_VL`` and
``lmms_eval.models.chat.qwen3_vl.Qwen3_VL`` (its model registry prefers a chat class;
:func:`tests.lmms_stubs.chat_wrapper` asks it), and the released samples'
``token_counts`` are what those classes' ``generate_until`` writes (a
``GenerationResult`` with ``TokenCounts``; the ``simple`` wrappers return bare strings).
Those classes are the reference here.

For each family the papers ran through lmms-eval (config/models.yaml
``harness.lmms_eval``: Qwen2.5-VL-7B and the five reasoning models built on it ->
``qwen2_5_vl``; Qwen3-VL-8B Instruct and Thinking -> ``qwen3_vl``) and each lmms-eval
benchmark of config/paper.yaml (the ``lmms-*`` settings: ChartQA, HallusionBench,
InfoVQA, MMMU with two images, MMStar, TextVQA, MathVision), rows in the hub's schema
(the helpers of tests/test_harness_prompts.py and tests/test_adapters.py; images of
several sizes, below, inside and above the wrappers' pixel limits, PNG, JPEG and a
transparent PNG) are answered on the family's tiny random-weight twin
(vlmrobust_demo/twins.py, built once per session) by

- the chat wrapper, instantiated on the twin, running ``generate_until`` on the task's
  own ``Instance`` (``ConfigurableMessagesTask.construct_requests`` with the task's
  config and lmms-eval's own ``_prepare_model_specific_config``; the document is the
  hub row); ``model.generate`` and ``processor.apply_chat_template`` are spied on for
  the exact inputs, text and generation arguments, then run;
- the project's ``hf`` backend (clients/vlm/hf.py) on the ``Request`` the project builds
  for the row (config/paper.yaml's ``plan.inference.infer_spec`` -> ``plan_requests``);
- the project's ``vllm`` backend (clients/vlm/vllm.py) on the same requests in the vLLM
  environment (tests/wrapper_tensors_vllm.py; marked ``vllm``): the tensors its
  transformers processor returns inside vLLM, the prompt token ids and greedy tokens.

Compared: the chat text, ``input_ids``, ``image_grid_thw``, ``pixel_values`` (float32),
the generation settings and the greedy tokens (float32, every row). docs/prompts.md,
"Same tensors as the harness", says what is equal, what differs and why.

Test-side choices: the wrappers load bfloat16 (their ``from_pretrained(...,
torch_dtype/dtype="bfloat16")``, asserted); here they load float32, the dtype the
project's backends run at on the CPU, through a shim around the class's
``from_pretrained``. Each twin's ``generation_config.json`` gets sampling defaults and a
repetition penalty as the Qwen checkpoints ship them (:data:`CHECKPOINT_GENERATION`),
so the checkpoint's logits processor is part of the comparison. New tokens: :data:`N`
instead of the paper's 4,096 (lmms-eval's ``--gen_kwargs max_new_tokens`` route, here
on the task's ``generation_kwargs``). Stubbed imports (``sys.modules`` entries while the
wrappers are imported, tests/lmms_stubs.py): ``decord``.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw

from tests.lmms_stubs import chat_wrapper
from tests.vllm_env import CPU_ENGINE, REPO, require_vllm, vllm_cli, vllm_env_vars
from vlmrobust.core import harness
from vlmrobust.core.records import Variant
from vlmrobust.core.vision_tokens import fetch_size, image_tokens, processor_of
from vlmrobust.infer.run import Job, plan_requests
from vlmrobust.plan import RunPlan, inference

from .test_adapters import run, spec, struct, write_parquet
from .test_harness_prompts import MATHVISION_ROWS, MMSTAR_ROWS, SINGLE, _mmmu_row, _raw

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")

#: new tokens per row (the paper: 4,096; 16,384 for MathVision)
N = 8
#: lmms-eval model name -> (twin family, the registry model whose Request is built)
FAMILIES = {
    "qwen2_5_vl": ("qwen2.5-vl", "qwen2.5-vl-7b"),
    "qwen3_vl": ("qwen3-vl", "qwen3-vl-8b-instruct"),
}
#: what each twin's generation_config.json gets besides its end tokens: the sampling
#: defaults and repetition penalty of the Qwen2-VL checkpoints as clients/vlm/hf.py
#: quotes them (the penalty applies to greedy decoding too)
CHECKPOINT_GENERATION = {
    "do_sample": True, "temperature": 0.01, "top_k": 1, "top_p": 0.001, "repetition_penalty": 1.05,
}  # fmt: skip
#: the generation fields compared (besides the end tokens, which differ: docs)
GENERATION_FIELDS = (
    "max_new_tokens", "do_sample", "num_beams", "repetition_penalty", "no_repeat_ngram_size",
    "pad_token_id", "min_new_tokens", "min_length",
)  # fmt: skip


# --------------------------------------------------------------------------- rows


def _picture(size: tuple[int, int], seed: int, transparent: bool = False) -> Image.Image:
    """A chart-like picture: a colour gradient, bars and lines (resampling shows on it);
    ``transparent``: RGBA whose background is transparent over dark colours."""
    w, h = size
    x = np.linspace(0, 255, w, dtype=np.float32)[None, :]
    y = np.linspace(0, 255, h, dtype=np.float32)[:, None]
    rgb = np.stack([x + 0 * y, y + 0 * x, (x * y / 255 + 40 * seed) % 256], axis=-1)
    img = Image.fromarray(rgb.astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(img)
    for i in range(7):
        top = h // 3 + (i * 37 + seed * 11) % max(1, h // 2)
        draw.rectangle([w * i // 8, top, w * i // 8 + w // 16, h - 4], fill=(220, 30 * i, 60))
        draw.line([0, h * i // 7, w, h - h * i // 7], fill=(10, 10, 10), width=2)
    if not transparent:
        return img
    alpha = Image.new("L", size, 0)
    ImageDraw.Draw(alpha).ellipse([w // 6, h // 6, w * 5 // 6, h * 5 // 6], fill=255)
    dark = Image.fromarray((rgb // 4).astype(np.uint8), "RGB")
    rgba = Image.composite(img, dark, alpha).convert("RGBA")
    rgba.putalpha(alpha)
    return rgba


def _image(size: tuple[int, int], seed: int, fmt: str = "PNG", transparent: bool = False):
    buf = io.BytesIO()
    _picture(size, seed, transparent).save(buf, format=fmt)
    return struct(buf.getvalue())


def _single(prompt: str, changes: dict[str, Any]) -> dict[str, Any]:
    """tests/test_harness_prompts.py's hub row of a single-image benchmark, changed."""
    return {**copy.deepcopy(SINGLE[prompt][2]), **changes}


#: (dataset, prompt setting, changes to the hub row); the images' sizes are chosen around
#: the limits: 300x200 and 512x384 below Qwen2.5-VL's wrapper floor (200,704 pixels),
#: 1400x1300 and 600x2800 above its ceiling (1,605,632), the rest inside
CASES = [
    ("chartqa", "lmms-chartqa", {"image": _image((850, 600), 1)}),
    ("chartqa", "lmms-chartqa", {"image": _image((300, 200), 2), "question": "Which bar is red?"}),
    ("hallusionbench", "lmms-hallusionbench", {"image": _image((640, 480), 3)}),
    ("infovqa", "lmms-infovqa", {"image": _image((1400, 1300), 4, "JPEG")}),
    ("infovqa", "lmms-infovqa", {"image": _image((600, 2800), 5, "JPEG"), "questionId": 7}),
    ("textvqa", "lmms-textvqa", {"image": _image((1024, 768), 6, "JPEG")}),
    ("mmstar", "lmms-mmstar", {"image": _image((512, 384), 7, "JPEG")}),
    ("mathvision", "lmms-mathvision", {"decoded_image": _image((180, 120), 8, transparent=True)}),
    ("mathvision", "lmms-mathvision", {"decoded_image": _image((420, 260), 9), "id": "3"}),
]


def _mmmu_cases() -> list[tuple[str, str, dict[str, Any]]]:
    two = _mmmu_row(
        "validation_Math_1", "Compare <image 2> with <image 1>. Which one is blue?",
        "['the first', 'the second', 'neither']", "B", "multiple-choice",
        image_1=_image((400, 300), 10), image_2=_image((250, 500), 11, "JPEG"),
    )  # fmt: skip
    one = _mmmu_row(
        "validation_Math_3", "<image 1> What is the value of x?", "[]", "3.5", "open",
        image_1=_image((700, 500), 12),
    )  # fmt: skip
    return [("mmmu", "lmms-mmmu", two), ("mmmu", "lmms-mmmu", one)]


def _hub_row(dataset: str, prompt: str, changes: dict[str, Any]) -> dict[str, Any]:
    if dataset == "mmmu":
        return changes
    if dataset == "mmstar":
        return {**copy.deepcopy(MMSTAR_ROWS[0]), **changes}
    if dataset == "mathvision":
        template = MATHVISION_ROWS[2 if changes.get("id") == "3" else 0]
        return {**copy.deepcopy(template), **changes}
    return _single(prompt, changes)


_FILES = {
    "mmmu": "validation-00000-of-00001.parquet",
    "mmstar": "val-00000-of-00001.parquet",
    "mathvision": "data/testmini-00000-of-00001.parquet",
}


def _size(path: str) -> tuple[int, int]:
    with Image.open(path) as image:
        return image.size


@dataclass
class Case:
    """One hub row: its sample, clean variant and lmms-eval document."""

    name: str
    dataset: str
    prompt: str
    row: dict[str, Any]
    sample: Any
    variant: Variant
    sizes: list[tuple[int, int]] = field(default_factory=list)

    def doc(self) -> dict[str, Any]:
        """The row as lmms-eval's task functions get it (``datasets`` decodes images)."""
        return _raw(self.row)


@pytest.fixture(scope="session")
def cases(tmp_path_factory) -> list[Case]:
    """Every row through the project's adapter into a sample and its clean variant."""
    out = []
    for i, (dataset, prompt, changes) in enumerate([*CASES, *_mmmu_cases()]):
        row = _hub_row(dataset, prompt, changes)
        tmp = tmp_path_factory.mktemp(f"rows-{dataset}")
        file = _FILES.get(dataset) or SINGLE[prompt][1]
        write_parquet(tmp / dataset / file, [row])
        samples, _, _ = run(tmp, dataset, spec(dataset, tmp / dataset))
        (sample,) = samples.values()
        variant = Variant(
            sample.sample_id, sample.sample_id, dataset, "clean", "none", sample.images,
            ["0" * 64] * len(sample.images), sample.question,
        )  # fmt: skip
        sizes = [_size(p) for p in sample.images]
        out.append(
            Case(f"{i:02d}-{sample.sample_id}", dataset, prompt, row, sample, variant, sizes)
        )
    return out


# --------------------------------------------------------------------------- models


@pytest.fixture(scope="session")
def paper() -> RunPlan:
    with contextlib.chdir(REPO):
        return RunPlan.load("config/paper.yaml")


@pytest.fixture(scope="session")
def twins(tmp_path_factory) -> dict[str, Path]:
    """One twin per family (built once per session), its generation config given the
    checkpoint defaults of :data:`CHECKPOINT_GENERATION`."""
    from vlmrobust_demo.twins import build_twin

    root = tmp_path_factory.mktemp("wrapper-twins")
    out = {}
    for i, (name, (family, _model)) in enumerate(FAMILIES.items()):
        path = build_twin(family, root / family, seed=470 + i)
        config = path / "generation_config.json"
        config.write_text(json.dumps({**json.loads(config.read_text()), **CHECKPOINT_GENERATION}))
        out[name] = path
    return out


class _Float32:
    """A model class whose ``from_pretrained`` loads float32 whatever dtype it is asked
    for (the dtype it was asked for is kept in ``asked``)."""

    def __init__(self, cls: type) -> None:
        self.cls, self.asked = cls, []

    def from_pretrained(self, path: str, **kwargs: Any) -> Any:
        self.asked.append({k: kwargs.pop(k) for k in ("torch_dtype", "dtype") if k in kwargs})
        return self.cls.from_pretrained(path, dtype=torch.float32, **kwargs)


def _load_wrapper(name: str, path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list]:
    """The chat wrapper of ``name`` on the twin ``path`` (CPU, float32, batch size 1 as
    lmms-eval's default ``--batch_size``), and the dtypes it asked for."""
    cls = chat_wrapper(name)
    simple = sys.modules[cls.__mro__[1].__module__]
    if name == "qwen2_5_vl":
        shim = _Float32(simple.Qwen2_5_VLForConditionalGeneration)
        monkeypatch.setattr(simple, "Qwen2_5_VLForConditionalGeneration", shim)
    else:
        resolve = simple._resolve_model_class

        def resolved(pretrained: str, is_moe: bool) -> tuple[Any, str]:
            model_cls, key = resolve(pretrained, is_moe)
            shim.cls = model_cls
            return shim, key

        shim = _Float32(object)
        monkeypatch.setattr(simple, "_resolve_model_class", resolved)
    wrapper = cls(pretrained=str(path), device="cpu", device_map="cpu", batch_size=1)
    monkeypatch.undo()
    return wrapper, shim.asked


@pytest.fixture(scope="session")
def wrappers(twins) -> dict[str, tuple[Any, list]]:
    mp = pytest.MonkeyPatch()
    try:
        return {name: _load_wrapper(name, twins[name], mp) for name in FAMILIES}
    finally:
        mp.undo()


@pytest.fixture(scope="session")
def backends(twins, paper) -> dict[str, Any]:
    """The project's hf backend on each twin with the registry model's options (batch
    size 1: the wrapper's, so neither side pads)."""
    from vlmrobust.clients.vlm.hf import HFBackend

    out = {}
    for name, (_family, model) in FAMILIES.items():
        options = {**paper.registry[model]["options"], "batch_size": 1}
        spec_ = {"backend": "hf", "local_path": str(twins[name]), "options": options}
        out[name] = HFBackend(model, spec_)
    return out


def _request(paper: RunPlan, model: str, case: Case):
    """The Request the project builds for ``case`` answered by ``model`` under
    config/paper.yaml (its job spec with :data:`N` new tokens)."""
    spec_ = inference.infer_spec(paper, model, case.dataset, case.prompt)
    job = Job(**{**spec_, "max_new_tokens": N})
    (planned,) = plan_requests(job, [case.variant], {case.sample.sample_id: case.sample})
    return planned.request


# --------------------------------------------------------------------------- one row, three ways


@dataclass
class Seen:
    """What one side handed the model for one row."""

    text: str
    input_ids: list[int]
    grid: list[list[int]]
    pixels: Any  # float32 tensor
    generation: Any  # the effective GenerationConfig (transformers' own merge)
    tokens: list[int]  # the generated ids, up to and with the side's first end token
    eos: set[int]
    kwargs: dict[str, Any] = field(default_factory=dict)


def _task(prompt: str, model_name: str) -> Any:
    """lmms-eval's ``ConfigurableMessagesTask`` of ``prompt``'s task, set up as its
    ``__init__`` does (config, model-specific kwargs, output type) without loading the
    dataset; ``generation_kwargs`` updated with ``max_new_tokens`` as ``--gen_kwargs``."""
    from PIL import ImageFile

    truncated = ImageFile.LOAD_TRUNCATED_IMAGES
    from lmms_eval.api.task import ConfigurableMessagesTask, TaskConfig

    # the task module turns on PIL's LOAD_TRUNCATED_IMAGES at import: not for the
    # tests after this one (core/harness.py keeps it likewise)
    ImageFile.LOAD_TRUNCATED_IMAGES = truncated
    config = harness.task_config(harness.HARNESS_TASKS[prompt].yaml)
    fields = {
        k: harness.task_function(v) if isinstance(v, harness.FunctionRef) else copy.deepcopy(v)
        for k, v in config.items()
        if k in TaskConfig.__dataclass_fields__
        and (k.startswith("doc_to_") or not isinstance(v, harness.FunctionRef))
        and k != "process_results"
    }
    task = ConfigurableMessagesTask.__new__(ConfigurableMessagesTask)
    task._config = TaskConfig(**fields)
    task.config.generation_kwargs.update({"max_new_tokens": N})
    task.model_name = model_name
    task._prepare_model_specific_config()
    task.OUTPUT_TYPE = task.config.output_type
    return task


def _spy(obj: Any, name: str, calls: list) -> None:
    """Record every call of ``obj.name`` (keyword arguments and result), then run it."""
    real = getattr(obj, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        calls.append((args, kwargs, out))
        return out

    setattr(obj, name, spy)


def _cut(ids: list[int], eos: set[int]) -> list[int]:
    stop = next((i for i, t in enumerate(ids) if t in eos), None)
    return ids if stop is None else ids[: stop + 1]


def _seen(text: str, kwargs: dict, out: Any, config: Any, eos: set[int]) -> Seen:
    ids = kwargs["input_ids"][0].tolist()
    return Seen(
        text=text, input_ids=ids, grid=kwargs["image_grid_thw"].tolist(),
        pixels=kwargs["pixel_values"].float(), generation=config,
        tokens=_cut(out[0, len(ids) :].tolist(), eos), eos=eos,
        kwargs={k: v for k, v in kwargs.items() if not torch.is_tensor(v)},
    )  # fmt: skip


def theirs(wrapper: Any, name: str, case: Case) -> Seen:
    """``generate_until`` of the chat wrapper on the task's own Instance of ``case``."""
    task = _task(case.prompt, name)
    split = task.config.test_split or "test"
    meta = {"task": task.config.task, "doc_id": 0, "repeats": 1, "split": split}
    instance = task.construct_requests(doc_id=0, ctx="", metadata=meta)
    wrapper.task_dict = {task.config.task: {split: {0: case.doc()}}}
    model, generated, rendered = wrapper.model, [], []
    _spy(model, "generate", generated)
    _spy(wrapper.processor, "apply_chat_template", rendered)
    try:
        (result,) = wrapper.generate_until([instance])
    finally:
        del model.generate, wrapper.processor.apply_chat_template
    (_, kwargs, out), ((_, _, texts),) = generated[0], rendered
    gen = {k: v for k, v in kwargs.items() if not torch.is_tensor(v)}
    config, _ = model._prepare_generation_config(None, **gen)
    eos = {int(t) for t in np.atleast_1d(kwargs["eos_token_id"])}
    seen = _seen(texts[0], kwargs, out, config, eos)
    assert result.token_counts.output_tokens == out.shape[1] - len(seen.input_ids)
    return seen


def ours_hf(backend: Any, req: Any) -> Seen:
    """The project's hf backend on ``req``: ``generate`` of the backend, spied on."""
    model, generated = backend.model, []
    _spy(model, "generate", generated)
    try:
        (result,) = list(backend.generate([req]))
    finally:
        del model.generate
    assert result.error is None, result.error
    ((_, kwargs, out),) = generated
    config, _ = model._prepare_generation_config(kwargs["generation_config"])
    return _seen(backend.chat_prompt(req), kwargs, out, config, set(backend._eos_ids))


@pytest.fixture(scope="session")
def compared(cases, wrappers, backends, paper) -> dict[str, list[tuple[Case, Any, Seen, Seen]]]:
    """Every row answered by the chat wrapper and by the hf backend, per family
    (timed: printed to stderr)."""
    out: dict[str, list] = {}
    for name, (_family, model) in FAMILIES.items():
        t0 = time.perf_counter()
        out[name] = []
        for case in cases:
            req = _request(paper, model, case)
            out[name].append(
                (case, req, theirs(wrappers[name][0], name, case), ours_hf(backends[name], req))
            )
        took = time.perf_counter() - t0
        print(f"{name}: {len(cases)} rows, wrapper + hf, {took:.1f} s", file=sys.stderr)
    return out


# --------------------------------------------------------------------------- the hf backend


def _max_diff(a: Any, b: Any) -> float:
    return float((a.float() - b.float()).abs().max()) if a.shape == b.shape else float("inf")


@pytest.mark.parametrize("name", list(FAMILIES))
def test_hf_backend_gets_the_wrappers_text_ids_and_tensors(name, compared):
    """The chat text, input_ids, image grid and pixel values (float32) of every row are
    the chat wrapper's, exactly."""
    report = []
    for case, _req, their, our in compared[name]:
        diff = _max_diff(their.pixels, our.pixels)
        report.append(
            f"{case.name} {case.sizes}: grid {their.grid} vs {our.grid}, max |dpx| {diff:g}"
        )
        assert our.text == their.text, case.name
        assert our.grid == their.grid, case.name
        assert our.input_ids == their.input_ids, case.name
        assert diff == 0.0, case.name
    print(f"{name}:\n  " + "\n  ".join(report), file=sys.stderr)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_hf_backend_decodes_with_the_wrappers_settings(name, compared, twins):
    """The effective generation settings (transformers' merge of the checkpoint's
    generation_config and the call's arguments) agree: N new tokens, greedy, one beam,
    the checkpoint's repetition penalty; the wrapper stops at the tokenizer's end token
    only, the project at every end token the generation config names as well (docs)."""
    checkpoint = json.loads((twins[name] / "generation_config.json").read_text())
    for case, req, their, our in compared[name]:
        for key in GENERATION_FIELDS:
            assert getattr(our.generation, key) == getattr(their.generation, key), (case.name, key)
        assert their.generation.max_new_tokens == req.max_new_tokens == N
        assert their.generation.do_sample is False and their.generation.num_beams == 1
        assert their.generation.repetition_penalty == checkpoint["repetition_penalty"] != 1.0
        assert req.generation_config == "checkpoint" and req.greedy
        assert their.eos < our.eos == set(checkpoint["eos_token_id"]), case.name


@pytest.mark.parametrize("name", list(FAMILIES))
def test_hf_backend_generates_the_wrappers_greedy_tokens(name, compared):
    """float32, every row: the project's greedy tokens are the wrapper's, up to the
    project's first end token (an end token the wrapper does not stop at would leave it
    writing on: counted, none expected of these rows)."""
    cut = 0
    for case, _req, their, our in compared[name]:
        assert their.tokens[: len(our.tokens)] == our.tokens, case.name
        cut += their.tokens != our.tokens
    assert cut == 0
    assert len({tuple(t.tokens) for _c, _r, t, _o in compared[name]}) > 1  # not one reply


def test_the_wrappers_load_bfloat16(wrappers):
    """What the papers' runs loaded (the test loads float32 instead; module docstring)."""
    assert wrappers["qwen2_5_vl"][1] == [{"torch_dtype": "bfloat16"}]
    assert wrappers["qwen3_vl"][1] == [{"dtype": "bfloat16"}]
    for wrapper, _asked in wrappers.values():
        assert wrapper.model.dtype == torch.float32


# --------------------------------------------------------------------------- the vllm backend


@pytest.fixture(scope="session")
def vllm_side(compared, twins, paper, tmp_path_factory) -> dict[str, dict]:
    """One subprocess in the vLLM environment (tests/wrapper_tensors_vllm.py): the
    project's vllm backend on every row's Request, per family (CPU engine, float32,
    eager; a context of 4,096 for the largest images; no processor cache, so every
    prompt goes through the transformers processor)."""
    require_vllm()
    root = tmp_path_factory.mktemp("wrapper-vllm")
    plan = []
    for name, (_family, model) in FAMILIES.items():
        engine = {**CPU_ENGINE["engine"], "mm_processor_cache_gb": 0}
        options = {**paper.registry[model]["options"], **CPU_ENGINE}
        options.update({"max_model_len": 4096, "engine": engine})
        requests = [dataclasses.asdict(req) for _case, req, _t, _o in compared[name]]
        family = {"family": name, "path": str(twins[name]), "options": options}
        plan.append({**family, "requests": requests})
    (root / "plan.json").write_text(json.dumps(plan))
    env = {**vllm_env_vars(), "VLLM_CPU_KVCACHE_SPACE": "1"}
    script = str(REPO / "tests" / "wrapper_tensors_vllm.py")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [vllm_cli()[0], script, str(root / "plan.json"), str(root)],
        capture_output=True, text=True, env=env, timeout=1200, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = {name: json.loads((root / f"{name}.json").read_text()) for name in FAMILIES}
    for name, result in out.items():
        assert "error" not in result, result["error"]
        rows = range(len(result["rows"]))
        result["tensors"] = [dict(np.load(root / name / f"{n}.npz")) for n in rows]
        took = f"load {result['load_s']:.0f} s, rows {result['rows_s']:.0f} s"
        print(f"{name}: vLLM {took}", file=sys.stderr)
    print(f"vLLM side in all: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return out


def _normalized(raw: Any, image_processor: Any) -> Any:
    """Raw pixel patches rescaled and normalised as transformers' image processor does
    it (its fused ``(x - mean / r) / (std / r)`` in float32, per channel)."""
    scale = 1.0 / image_processor.rescale_factor
    mean = (torch.tensor(image_processor.image_mean) * scale).view(1, -1, 1)
    std = (torch.tensor(image_processor.image_std) * scale).view(1, -1, 1)
    x = torch.as_tensor(raw).to(torch.float32)
    return ((x.view(x.shape[0], mean.shape[1], -1) - mean) / std).view(x.shape)


@pytest.mark.vllm
@pytest.mark.parametrize("name", list(FAMILIES))
def test_vllm_backend_gets_the_wrappers_text_ids_and_tensors(name, compared, backends, vllm_side):
    """vLLM's prompt text, prompt token ids, image grid and pixels of every row are the
    chat wrapper's: its transformers processor hands over raw pixel patches (vLLM
    normalises on the device), which normalised as transformers does equal the
    wrapper's ``pixel_values`` exactly; vLLM's own normalisation (what its vision tower
    gets) differs from them in the last bits of float32 (docs/prompts.md)."""
    report, largest = [], 0.0
    image_processor = backends[name].processor.image_processor
    rows, tensors_of = vllm_side[name]["rows"], vllm_side[name]["tensors"]
    for (case, req, their, _our), row, tensors in zip(
        compared[name], rows, tensors_of, strict=True
    ):
        assert row["key"] == req.key
        assert row["prompt"] == their.text, case.name
        assert row["prompt_ids"] == their.input_ids, case.name
        assert tensors["image_grid_thw"].tolist() == their.grid, case.name
        assert row["mm_processor_kwargs"] == req.pixels, case.name
        exact = _max_diff(their.pixels, _normalized(tensors["pixel_values"], image_processor))
        device = _max_diff(their.pixels, torch.from_numpy(tensors["normalized"]))
        largest = max(largest, device)
        report.append(
            f"{case.name}: max |dpx| {exact:g} (vLLM's device normalisation: {device:.3g})"
        )
        assert exact == 0.0, case.name
        assert device < 1e-5, case.name
    assert vllm_side[name]["input_norm"] == "FusedMMInputNorm"
    print(f"{name} (vLLM), largest {largest:.3g}:\n  " + "\n  ".join(report), file=sys.stderr)


@pytest.mark.vllm
@pytest.mark.parametrize("name", list(FAMILIES))
def test_vllm_backend_generates_the_wrappers_greedy_tokens(name, compared, twins, vllm_side):
    """float32, every row, the checkpoint's repetition penalty applied: vLLM's greedy
    tokens are the wrapper's up to vLLM's first end token."""
    checkpoint = json.loads((twins[name] / "generation_config.json").read_text())
    equal = 0
    for (case, req, their, _our), row in zip(compared[name], vllm_side[name]["rows"], strict=True):
        assert row["key"] == req.key
        assert row["generation"]["repetition_penalty"] == checkpoint["repetition_penalty"]
        assert row["generation"]["temperature"] == 0.0
        ids = _cut(row["ids"], set(checkpoint["eos_token_id"]))
        assert len(ids) <= N
        assert their.tokens[: len(ids)] == ids, (case.name, ids, their.tokens)
        equal += their.tokens == ids
    print(
        f"{name} (vLLM): greedy tokens equal on {equal}/{len(compared[name])} rows", file=sys.stderr
    )


# --------------------------------------------------------------------------- the rule itself


def test_fit_is_qwen_vl_utils_fetch_image(tmp_path):
    """``fetch_size`` is qwen-vl-utils' ``smart_resize`` on many sizes, ``fit_image`` is
    ``fetch_image`` pixel for pixel (after the task code's ``convert("RGB")``), and the
    bounds in core/harness.py are the installed package's."""
    from qwen_vl_utils import vision_process as qvu

    from vlmrobust.clients.vlm.media import fit_image, load_fitted

    assert harness.QWEN_VL_UTILS_TOKENS == (qvu.IMAGE_MIN_TOKEN_NUM, qvu.IMAGE_MAX_TOKEN_NUM)
    assert harness.QWEN_VL_UTILS_MERGE == qvu.SPATIAL_MERGE_SIZE
    rng = np.random.default_rng(47)
    sizes = [(int(h), int(w)) for h, w in rng.integers(10, 5000, size=(400, 2))]
    sizes += [(20, 30), (28, 28), (1, 150), (4000, 4100), (2049, 2047), (100, 19_000)]
    for name in FAMILIES:
        fit = harness.wrapper_fit(name)
        bounds = (fit["factor"], fit["min_pixels"], fit["max_pixels"])
        for h, w in sizes:
            assert fetch_size(h, w, *bounds) == qvu.smart_resize(h, w, *bounds), (name, h, w)
        for size, transparent in [((180, 120), True), ((1400, 1300), False), ((57, 13), False)]:
            image = _picture(size, 3, transparent)
            theirs_ = qvu.fetch_image({"image": image.convert("RGB")}, CHAT_PATCH[name])
            assert np.array_equal(np.asarray(fit_image(image, fit)), np.asarray(theirs_))
            image.save(tmp_path / "x.png")
            assert np.array_equal(
                np.asarray(load_fitted(tmp_path / "x.png", fit)), np.asarray(theirs_)
            )


#: the ``image_patch_size`` each chat wrapper passes process_vision_info (read below)
CHAT_PATCH = {"qwen2_5_vl": 14, "qwen3_vl": 16}


def _calls(tree: Any, name: str) -> list[Any]:
    import ast

    return [
        n for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", None)) == name
    ]  # fmt: skip


def _keywords(calls: list[Any], name: str) -> list[Any]:
    """The constant values of keyword ``name`` in ``calls``."""
    return [k.value.value for c in calls for k in c.keywords if k.arg == name]


def test_the_wrapper_table_is_the_wrappers_source():
    """core/harness.py's ``CHAT_WRAPPERS`` (image patch, whether the processor resizes
    again) is what the installed chat wrappers' ``generate_until`` does: the
    ``image_patch_size`` it passes ``process_vision_info`` (the function's default
    where none) and ``do_resize=False`` in its processor call."""
    import ast
    import inspect

    from qwen_vl_utils import process_vision_info

    default = inspect.signature(process_vision_info).parameters["image_patch_size"].default
    for name, wrapper in harness.CHAT_WRAPPERS.items():
        source = textwrap.dedent(inspect.getsource(chat_wrapper(name).generate_until))
        tree = ast.parse(source)
        (call,) = _calls(tree, "process_vision_info")
        patch = _keywords([call], "image_patch_size") or [default]
        assert [wrapper.image_patch] == patch == [CHAT_PATCH[name]]
        resize = _keywords(_calls(tree, "processor"), "do_resize")
        assert wrapper.processor_resizes == (not resize), resize
        if resize:
            assert set(resize) == {False}


def test_every_harness_model_is_covered(paper, cases):
    """Each registry model run through a chat wrapper belongs to the family whose twin
    stands for it and gets the same Request as the model the comparison builds (the
    same options and pixel handling; only the weights differ)."""
    harness_models = {
        m: e["harness"]["lmms_eval"] for m, e in paper.registry.items() if e.get("harness")
    }
    assert sorted(harness_models.values()) == ["qwen2_5_vl"] * 6 + ["qwen3_vl"] * 2
    for model, name in harness_models.items():
        family, base = FAMILIES[name]
        assert paper.registry[model]["family"] == family
        assert paper.registry[model]["options"] == paper.registry[base]["options"]
        for case in cases:
            if model in paper.models_of(case.dataset):
                assert _request(paper, model, case) == _request(paper, base, case), (
                    model,
                    case.name,
                )


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_forecast_counts_the_wrappers_vision_tokens(name, compared, paper):
    """The forecast's rule (core/vision_tokens.py at the dataset's limits, fit included)
    counts the image tokens the wrapper's grid makes of every image; the processor's
    resize alone at the wrapper's limits (what ``pixels: harness`` did before the fit) is
    off on most of these rows."""
    entry = paper.registry[FAMILIES[name][1]]
    off = 0
    for case, _req, their, _our in compared[name]:
        limits = inference.pixel_limits(paper, FAMILIES[name][1], case.dataset)
        got = [image_tokens(s, processor_of(entry, limits)) for s in case.sizes]
        assert got == [t * h * w // 4 for t, h, w in their.grid], case.name
        before = harness.wrapper_pixels(name)  # what pixels: harness showed before the fit
        off += got != [image_tokens(s, processor_of(entry, before)) for s in case.sizes]
    assert off >= len(compared[name]) // 2, off


def test_exif_orientation_is_kept_an_override(tmp_path, paper, wrappers, backends):
    """A JPEG with an EXIF orientation tag: lmms-eval's task code hands the wrapper the
    stored pixels (``convert("RGB")`` ignores the tag), the project applies the tag first
    (as the variants stage does before it perturbs), so the grid comes out transposed.
    Kept on purpose (docs/prompts.md)."""
    buf = io.BytesIO()
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    _picture((640, 400), 13).save(buf, format="JPEG", exif=exif)
    row = _single("lmms-textvqa", {"image": struct(buf.getvalue())})
    write_parquet(tmp_path / "textvqa" / SINGLE["lmms-textvqa"][1], [row])
    samples, _, _ = run(tmp_path, "textvqa", spec("textvqa", tmp_path / "textvqa"))
    (sample,) = samples.values()
    sid = sample.sample_id
    variant = Variant(
        sid, sid, "textvqa", "clean", "none", sample.images, ["0" * 64], sample.question
    )
    case = Case("exif", "textvqa", "lmms-textvqa", row, sample, variant, [(640, 400)])
    their = theirs(wrappers["qwen2_5_vl"][0], "qwen2_5_vl", case)
    our = ours_hf(backends["qwen2_5_vl"], _request(paper, FAMILIES["qwen2_5_vl"][1], case))
    (t, h, w), ((t2, h2, w2),) = their.grid[0], our.grid
    assert (t2, h2, w2) == (t, w, h) and h != w
