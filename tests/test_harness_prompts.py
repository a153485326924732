"""The ``lmms-*`` prompt settings send what lmms-eval (the papers' harness) sent.

Each test writes rows in a benchmark's real hub schema (field names and types as the
hub has them: MMMU's ``options`` a list literal in a string, images as image structs),
builds the samples with the project's adapter, and compares the prompt that
``build_prompt`` makes for a clean variant with what lmms-eval's own task function
returns for the raw row (PIL images) — text, the order and place of every image, and
the system prompt — for a model without a harness entry and for the lmms-eval models
the papers ran (``qwen2_5_vl``, ``qwen3_vl``).

The kwargs a task passes are chosen here by hand (``_kwargs``: the model's entry, else
the ``default`` entry merged in), independently of :func:`harness.select_kwargs`.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from vlmrobust.core import harness
from vlmrobust.core.io import read_jsonl
from vlmrobust.core.paths import real_data
from vlmrobust.core.prompts import PROMPTS, build_prompt
from vlmrobust.core.records import Sample, Variant
from vlmrobust.plan import RunPlan

from .conftest import REPO
from .test_adapters import BLUE, GREEN, RED, img_bytes, run, spec, struct, write_parquet

pytestmark = pytest.mark.slow  # the first lmms-eval import takes seconds

MODELS = {
    "none": None,  # an API or demo model: the default arguments, no system prompt
    "qwen2_5_vl": {"backend": "hf", "harness": {"lmms_eval": "qwen2_5_vl"}},
    "qwen3_vl": {"backend": "hf", "harness": {"lmms_eval": "qwen3_vl"}},
}
QWEN3_SYSTEM = "You are a helpful assistant."  # the Qwen3-VL wrapper's default, checked below


# --------------------------------------------------------------------------- helpers


def _pil(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data))


def _raw(row: dict) -> dict:
    """The hub row as lmms-eval's task functions get it: image structs decoded."""
    out = {}
    for k, v in row.items():
        out[k] = _pil(v["bytes"]) if isinstance(v, dict) and "bytes" in v else v
    return out


def _colour(image) -> tuple:
    if isinstance(image, str):
        with Image.open(image) as im:
            return im.convert("RGB").getpixel((0, 0))
    return image.convert("RGB").getpixel((0, 0))


def _kwargs(task_yaml: str, model: str) -> dict | None:
    """The task's model-specific arguments for ``model``, chosen by hand."""
    kwargs = copy.deepcopy(harness.task_config(task_yaml).get("lmms_eval_specific_kwargs"))
    if kwargs is None:
        return None
    if model in kwargs:
        return kwargs[model]
    return {**kwargs, **kwargs["default"]}


def _clean(s: Sample) -> Variant:
    return Variant(
        s.sample_id,
        s.sample_id,
        s.dataset,
        "clean",
        "none",
        s.images,
        ["0" * 64] * len(s.images),
        s.question,
    )


def _ours(s: Sample, prompt: str, model: str, variant: Variant | None = None):
    built = build_prompt(s, variant or _clean(s), prompt, model=MODELS[model])
    parts = [
        ("text", p["text"]) if p["type"] == "text" else ("image", _colour(p["path"]))
        for p in built.content
    ]
    return parts, built


def _theirs_messages(messages: list[dict]) -> list[tuple]:
    assert [m["role"] for m in messages] == ["user"]
    return [
        ("text", c["text"]) if c["type"] == "text" else ("image", _colour(c["url"]))
        for c in messages[0]["content"]
    ]


def _theirs_visual_text(module: str, visual: str, text: str, row: dict, kwargs) -> list[tuple]:
    """What the chat path sends for a task without doc_to_messages: its images, then its
    text (ConfigurableMessagesTask._build_user_turn)."""
    mod = harness.task_module(module)
    images = getattr(mod, visual)(row)
    fn = getattr(mod, text)
    body = fn(row, kwargs) if kwargs is not None else fn(row)
    return [("image", _colour(i)) for i in images] + [("text", body)]


def _system(model: str) -> str | None:
    return QWEN3_SYSTEM if model == "qwen3_vl" else None


# --------------------------------------------------------------------------- MMMU


def _mmmu_row(id_, question, options, answer, qtype, **images):
    row = {
        "id": id_,
        "question": question,
        "options": options,
        "explanation": "",
        "img_type": "['Diagrams']",
        "answer": answer,
        "topic_difficulty": "Medium",
        "question_type": qtype,
        "subfield": "Geometry",
    }
    for n in range(1, 8):
        row[f"image_{n}"] = images.get(f"image_{n}")
    return row


MMMU_ROWS = [
    # two images; the question names image 2 before image 1
    _mmmu_row(
        "validation_Math_1",
        "Compare <image 2> with <image 1>. Which one is blue?",
        "['the first', 'the second', 'neither']",
        "B",
        "multiple-choice",
        image_1=struct(img_bytes(RED)),
        image_2=struct(img_bytes(BLUE)),
    ),
    # the images are the options
    _mmmu_row(
        "validation_Art_2",
        "Which picture is green?",
        "['<image 1>', '<image 2>']",
        "B",
        "multiple-choice",
        image_1=struct(img_bytes(RED)),
        image_2=struct(img_bytes(GREEN)),
    ),
    # an open question
    _mmmu_row(
        "validation_Math_3",
        "<image 1> What is the value of x?",
        "[]",
        "3.5",
        "open",
        image_1=struct(img_bytes(GREEN)),
    ),
]


@pytest.fixture(scope="module")
def mmmu_samples(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mmmu")
    write_parquet(tmp / "mmmu" / "validation-00000-of-00001.parquet", MMMU_ROWS)
    samples, _, _ = run(tmp, "mmmu", spec("mmmu", tmp / "mmmu"))
    return samples


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("index", range(len(MMMU_ROWS)))
def test_mmmu_equals_lmms_eval(mmmu_samples, model, index):
    row = MMMU_ROWS[index]
    s = mmmu_samples[f"mmmu-{row['id']}"]
    ours, built = _ours(s, "lmms-mmmu", model)
    fn = harness.task_module("mmmu/utils.py").mmmu_doc_to_messages
    theirs = _theirs_messages(fn(_raw(row), _kwargs("mmmu/mmmu_val.yaml", model)))
    assert ours == theirs
    assert built.system == _system(model)
    assert built.source.startswith("lmms-eval 0.7.2 (= 13fd645a) tasks/mmmu/mmmu_val.yaml")
    assert built.source.endswith(
        "kwargs qwen3_vl, chat wrapper qwen3_vl"
        if model == "qwen3_vl"
        else f"kwargs default, {'no chat wrapper' if model == 'none' else 'chat wrapper ' + model}"
    )


def test_mmmu_layouts(mmmu_samples):
    """What the harness sends, written out: the default arguments interleave the images
    where their markers stand (in marker order); Qwen3-VL's put every image first."""
    s = mmmu_samples["mmmu-validation_Math_1"]
    ours, _ = _ours(s, "lmms-mmmu", "qwen2_5_vl")
    assert ours == [
        ("text", "Compare"),
        ("image", RED),
        ("text", "with"),
        ("image", BLUE),
        (
            "text",
            ". Which one is blue?\nA. the first\nB. the second\nC. neither\n\n"
            "Answer with the option's letter from the given choices directly.",
        ),
    ]
    ours, _ = _ours(s, "lmms-mmmu", "qwen3_vl")
    assert ours == [
        ("image", RED),
        ("image", BLUE),
        (
            "text",
            "Question: Compare <image 2> with <image 1>. Which one is blue?\nOptions:\n"
            "A. the first\nB. the second\nC. neither\nAnswer with the option letter only.",
        ),
    ]
    ours, _ = _ours(mmmu_samples["mmmu-validation_Math_3"], "lmms-mmmu", "none")
    assert ours == [
        ("image", GREEN),
        ("text", "What is the value of x?\n\nAnswer the question using a single word or phrase."),
    ]


def test_a_textual_perturbation_reaches_the_harness(mmmu_samples):
    s = mmmu_samples["mmmu-validation_Math_3"]
    v = _clean(s)
    v.question = "<image 1> What is the value of y?"
    ours, _ = _ours(s, "lmms-mmmu", "qwen3_vl", v)
    assert ours[-1][1].startswith("Question: <image 1> What is the value of y?\nOptions:\n")


# --------------------------------------------------------------------------- MMStar


MMSTAR_ROWS = [
    {
        "index": i,
        "question": q,
        "image": struct(img_bytes(RED)),
        "answer": "A",
        "category": "coarse perception",
        "l2_category": "image scene",
        "meta_info": {"source": "MMBench", "split": "val", "image_path": "x.png"},
    }
    for i, q in enumerate(
        [
            "Which colour fills the image?\nOptions: A: red, B: blue, C: green, D: pink",
            "  Is the image red? Please answer yes or no.\nOptions: A: yes, B: no",
            "Pick the right letter for the scene.",  # options that do not parse
        ]
    )
]


@pytest.fixture(scope="module")
def mmstar_samples(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mmstar")
    write_parquet(tmp / "mmstar" / "val-00000-of-00001.parquet", MMSTAR_ROWS)
    samples, _, _ = run(tmp, "mmstar", spec("mmstar", tmp / "mmstar"))
    return samples


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("index", range(len(MMSTAR_ROWS)))
def test_mmstar_equals_lmms_eval(mmstar_samples, model, index):
    row = MMSTAR_ROWS[index]
    ours, built = _ours(mmstar_samples[f"mmstar-{index}"], "lmms-mmstar", model)
    kwargs = _kwargs("mmstar/mmstar.yaml", model)
    theirs = _theirs_visual_text(
        "mmstar/utils.py", "mmstar_doc_to_visual", "mmstar_doc_to_text", _raw(row), kwargs
    )
    assert ours == theirs
    assert built.system == _system(model)


def test_mmstar_keeps_the_inline_options(mmstar_samples):
    ours, _ = _ours(mmstar_samples["mmstar-0"], "lmms-mmstar", "qwen2_5_vl")
    assert ours[-1][1] == (
        "Which colour fills the image?\nOptions: A: red, B: blue, C: green, D: pink"
        "\nAnswer with the option's letter from the given choices directly"
    )
    ours, _ = _ours(mmstar_samples["mmstar-0"], "lmms-mmstar", "qwen3_vl")
    assert ours[-1][1].startswith("Question: Which colour")
    assert ours[-1][1].endswith("D: pinkAnswer with the option letter only.")


# --------------------------------------------------------------------------- MathVision


MATHVISION_ROWS = [
    {
        "id": "1",
        "question": "How many triangles are there? <image1>",
        "options": ["1", "2", "3", "4", "5"],
        "image": "images/1.jpg",
        "decoded_image": struct(img_bytes(RED)),
        "answer": "C",
        "solution": None,
        "level": 2,
        "subject": "counting",
    },
    {
        "id": "2",
        "question": "What is the sum of the numbers? <image1>",
        "options": [],
        "image": "images/2.jpg",
        "decoded_image": struct(img_bytes(GREEN)),
        "answer": "12",
        "solution": None,
        "level": 3,
        "subject": "arithmetic",
    },
    {  # the options are pictured: the release has none, the answer is a letter
        "id": "3",
        "question": "Which figure comes next? <image1>",
        "options": [],
        "image": "images/3.jpg",
        "decoded_image": struct(img_bytes(BLUE)),
        "answer": "D",
        "solution": None,
        "level": 1,
        "subject": "logic",
    },
]


@pytest.fixture(scope="module")
def mathvision_samples(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mathvision")
    write_parquet(tmp / "mv" / "data" / "testmini-00000-of-00001.parquet", MATHVISION_ROWS)
    samples, _, _ = run(tmp, "mathvision", spec("mathvision", tmp / "mv"))
    return samples


@pytest.mark.parametrize(
    ("prompt", "task_yaml"),
    [
        ("lmms-mathvision", "mathvision/mathvision_testmini.yaml"),
        ("lmms-mathvision-reason", "mathvision/mathvision_reason_testmini.yaml"),
    ],
)
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("index", range(len(MATHVISION_ROWS)))
def test_mathvision_equals_lmms_eval(mathvision_samples, prompt, task_yaml, model, index):
    row = MATHVISION_ROWS[index]
    ours, built = _ours(mathvision_samples[f"mathvision-{row['id']}"], prompt, model)
    theirs = _theirs_visual_text(
        "mathvision/utils.py",
        "mathvision_doc_to_visual",
        "mathvision_doc_to_text",
        _raw(row),
        _kwargs(task_yaml, model),
    )
    assert ours == theirs
    assert built.system == _system(model)


def test_mathvision_texts(mathvision_samples):
    boxed = 'Please solve the problem step by step and put your answer in one "\\boxed{}".'
    mc = "\nAnswer the question with the option's letter from the given choices directly."
    ours, built = _ours(mathvision_samples["mathvision-1"], "lmms-mathvision", "qwen3_vl")
    assert ours[-1][1] == (
        f"{boxed}How many triangles are there? <image1>\nChoices: A. 1\nB. 2\nC. 3\nD. 4\nE. 5{mc}"
    )
    assert "kwargs default" in built.source  # the task has no qwen3_vl entry
    ours, built = _ours(mathvision_samples["mathvision-1"], "lmms-mathvision-reason", "qwen3_vl")
    assert ours[-1][1].endswith("E. 5")
    assert "kwargs none" in built.source
    ours, _ = _ours(mathvision_samples["mathvision-3"], "lmms-mathvision", "none")
    assert ours[-1][1] == f"{boxed}Which figure comes next? <image1>"  # no pictured letters


TESTMINI = "mathvision/mathvision_testmini.yaml"
REASON_TESTMINI = "mathvision/mathvision_reason_testmini.yaml"
MATHV_TESTMINI = real_data(REPO) / "mathvision" / "data" / "testmini.jsonl"


def _task_texts(rows: list[dict], task_yaml: str) -> list[str]:
    """lmms-eval's MathVision prompt text of each row under one task (default model)."""
    to_text = harness.task_module("mathvision/utils.py").mathvision_doc_to_text
    kwargs = _kwargs(task_yaml, "none")
    return [to_text(r) if kwargs is None else to_text(r, kwargs) for r in rows]


def test_the_paper_answers_mathvision_with_mathvision_testmini():
    """config/paper.yaml's MathVision prompt is lmms-eval's mathvision_testmini, not
    mathvision_reason_testmini (docs/prompts.md says why); on the module's rows the two
    differ exactly where there are options (the multiple-choice instruction)."""
    with contextlib.chdir(REPO):
        plan = RunPlan.load("config/paper.yaml")
    tasks = [harness.HARNESS_TASKS[p] for p in plan.prompts_of("mathvision")]
    assert [(t.task, t.yaml) for t in tasks] == [("mathvision_testmini", TESTMINI)]
    differ = [
        a != b
        for a, b in zip(
            _task_texts(MATHVISION_ROWS, TESTMINI),
            _task_texts(MATHVISION_ROWS, REASON_TESTMINI),
            strict=True,
        )
    ]
    assert differ == [bool(r["options"]) for r in MATHVISION_ROWS]


@pytest.mark.skipif(
    not MATHV_TESTMINI.is_file(),
    reason=f"the released MATH-V files are not at {MATHV_TESTMINI.parent} (docs/real-data.md)",
)
def test_the_two_mathvision_testmini_tasks_differ_on_190_of_304_rows():
    rows = read_jsonl(MATHV_TESTMINI)
    pairs = zip(_task_texts(rows, TESTMINI), _task_texts(rows, REASON_TESTMINI), strict=True)
    differ = [r["id"] for r, (a, b) in zip(rows, pairs, strict=True) if a != b]
    assert (len(differ), len(rows)) == (190, 304)
    assert differ == [r["id"] for r in rows if r["options"]]


# --------------------------------------------------------------------------- single-image tasks


HB_ROW = {
    "category": "VS",
    "subcategory": "chart",
    "visual_input": "1",
    "set_id": "0",
    "figure_id": "1",
    "sample_note": "note",
    "question_id": "2",
    "question": "Is the bar for 2020 higher than the bar for 2019?",
    "gt_answer_details": "details",
    "gt_answer": "1",
    "filename": "./VS/chart/0_1.png",
    "image": struct(img_bytes(GREEN)),
}
CHARTQA_ROW = {
    "type": "human_test",
    "question": "What is the peak value?",
    "answer": "42",
    "image": struct(img_bytes(BLUE)),
}
TEXTVQA_ROW = {
    "image_id": "003a8ae2ef43b901",
    "question_id": 34602,
    "question": "what is written on the red sign?",
    "question_tokens": ["what", "is", "written"],
    "image": struct(img_bytes(RED)),
    "image_width": 8,
    "image_height": 6,
    "flickr_original_url": "",
    "flickr_300k_url": "",
    "answers": ["stop"] * 6 + ["halt"] * 4,
    "image_classes": ["Sign"],
    "set_name": "val",
    "ocr_tokens": ["STOP"],
}
INFOVQA_ROW = {
    "questionId": 98765,
    "question": "What share of users are mobile?",
    "answers": ["12%", "12 percent"],
    "answer_type": ["single span"],
    "image": struct(img_bytes(GREEN, "JPEG")),
    "image_url": "https://example.org/1.jpeg",
    "operation/reasoning": None,
    "ocr": "[]",
    "data_split": "val",
}

SINGLE = {
    # prompt: (adapter, file under the folder, row, sample id, task yaml, module, visual, text)
    "lmms-hallusionbench": (
        "hallusionbench",
        "data/image-00000-of-00001.parquet",
        HB_ROW,
        "hallusionbench-VS_chart_0_1_2",
        "hallusion_bench/hallusion_bench_image.yaml",
        "hallusion_bench/evaluate_hb.py",
        "hb_doc_to_visual",
        "hb_doc_to_text",
    ),
    "lmms-chartqa": (
        "chartqa",
        "test-00000-of-00001.parquet",
        CHARTQA_ROW,
        "chartqa-0",
        "chartqa/chartqa.yaml",
        "chartqa/utils.py",
        "chartqa_doc_to_visual",
        "chartqa_doc_to_text",
    ),
    "lmms-textvqa": (
        "textvqa",
        "data/validation-00000-of-00001.parquet",
        TEXTVQA_ROW,
        "textvqa-34602",
        "textvqa/textvqa_val.yaml",
        "textvqa/utils.py",
        "textvqa_doc_to_visual",
        "textvqa_doc_to_text",
    ),
    "lmms-infovqa": (
        "infovqa",
        "InfographicVQA/validation-00000-of-00001.parquet",
        INFOVQA_ROW,
        "infovqa-98765",
        "infovqa/infovqa_val.yaml",
        "infovqa/utils.py",
        "infovqa_doc_to_visual",
        "infovqa_doc_to_text",
    ),
}


@pytest.fixture(scope="module")
def single_samples(tmp_path_factory):
    out = {}
    for prompt, (adapter, file, row, sid, *_rest) in SINGLE.items():
        tmp = tmp_path_factory.mktemp(adapter)
        write_parquet(tmp / adapter / file, [row])
        samples, _, _ = run(tmp, adapter, spec(adapter, tmp / adapter))
        out[prompt] = samples[sid]
    return out


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("prompt", list(SINGLE))
def test_single_image_tasks_equal_lmms_eval(single_samples, prompt, model):
    _, _, row, _, task_yaml, module, visual, text = SINGLE[prompt]
    ours, built = _ours(single_samples[prompt], prompt, model)
    theirs = _theirs_visual_text(module, visual, text, _raw(row), _kwargs(task_yaml, model))
    assert ours == theirs
    assert built.system == _system(model)


def test_single_image_texts(single_samples):
    text = {p: _ours(single_samples[p], p, "qwen2_5_vl")[0] for p in SINGLE}
    assert text["lmms-hallusionbench"][-1][1] == HB_ROW["question"]
    assert text["lmms-chartqa"][-1][1] == (
        "What is the peak value?\nAnswer the question with a single word."
    )
    # TextVQA: the question capitalized (str.capitalize), then the post prompt of the
    # template the wheel lacks (supplied from 13fd645a)
    assert text["lmms-textvqa"] == [
        ("image", RED),
        (
            "text",
            "What is written on the red sign?\nAnswer the question using a single word or phrase.",
        ),
    ]
    assert text["lmms-infovqa"][-1][1] == (
        "What share of users are mobile?\nAnswer the question using a single word or phrase."
    )


# --------------------------------------------------------------------------- MathVista


@pytest.mark.parametrize(
    ("prompt", "task_yaml"),
    [
        ("mathvista-cot", "mathvista/mathvista_testmini_cot.yaml"),
        ("mathvista-format", "mathvista/mathvista_testmini_format.yaml"),
        ("mathvista-solution", "mathvista/mathvista_testmini_solution.yaml"),
    ],
)
def test_mathvista_builders_equal_lmms_eval(tmp_path, prompt, task_yaml):
    """The project's MathVista builders give lmms-eval's mathvista_doc_to_text
    (``create_one_query`` with the task's shot settings)."""
    from .test_adapters import _mv_row

    rows = [
        _mv_row(
            "1", "Which bar is tallest?", "multi_choice", "text", "green", ["red", "green", "blue"]
        ),
        _mv_row("2", "How many bars are there?", "free_form", "integer", "12"),
        _mv_row("3", "What is the ratio?", "free_form", "float", "1.5", precision=1.0),
        _mv_row("4", "What is the length?", "free_form", "float", "1.25", precision=2.0),
        _mv_row("5", "List the values.", "free_form", "list", "[1, 2]"),
    ]
    rows[1]["unit"] = "cm"
    for row in rows:
        row["decoded_image"] = struct(img_bytes(RED))
    write_parquet(tmp_path / "mv" / "data" / "testmini-00000-of-00001.parquet", rows)
    samples, _, _ = run(tmp_path, "mathvista", spec("mathvista", tmp_path / "mv"))
    fn = harness.task_module("mathvista/utils.py").mathvista_doc_to_text
    for row in rows:
        s = samples[f"mathvista-{row['pid']}"]
        theirs = fn(_raw(row), _kwargs(task_yaml, "qwen2_5_vl"))
        built = build_prompt(s, _clean(s), prompt)
        assert built.text == theirs, row["pid"]
        assert built.content[0]["type"] == "image"
        # sent through lmms-eval's chat wrapper: its system message for the model
        for model in MODELS:
            built = build_prompt(s, _clean(s), prompt, model=MODELS[model])
            assert built.text == theirs
            assert built.system == _system(model), (prompt, model)
            assert ("chat wrapper" in built.source) == (model == "qwen3_vl")


def test_distract_bench_prompt_takes_the_wrappers_system_message():
    """The Distract-Bench release ran its open-ended prompt as an lmms-eval task: the
    text is ``distract-open``'s, the Qwen3-VL wrapper adds its system message, and the
    job of such a prompt depends on the model's ``harness`` entry."""
    from vlmrobust.core.records import Sample
    from vlmrobust.core.registry import inference_fields

    s = Sample("db-1", "distract-bench", ["x.png"], "How many?", "3", "number")
    for model, system in (("none", None), ("qwen2_5_vl", None), ("qwen3_vl", QWEN3_SYSTEM)):
        built = build_prompt(s, _clean(s), "distract-open", model=MODELS[model])
        assert built.system == system
        assert built.text.startswith("Question: How many?")
    spec = MODELS["qwen3_vl"]
    assert inference_fields(spec, "distract-open")["harness"] == {"lmms_eval": "qwen3_vl"}
    assert "harness" not in inference_fields(spec, "idis-perception")
    assert build_prompt(s, _clean(s), "idis-perception", model=spec).system is None


# --------------------------------------------------------------------------- the harness itself


def test_the_qwen3_wrapper_system_prompt_is_read_from_lmms_eval():
    import inspect

    from lmms_eval.models.simple.qwen3_vl import Qwen3_VL

    default = inspect.signature(Qwen3_VL.__init__).parameters["system_prompt"].default
    assert harness.system_prompt("qwen3_vl") == default == QWEN3_SYSTEM
    assert harness.system_prompt("qwen2_5_vl") is None
    assert harness.system_prompt(None) is None


def test_which_chat_wrappers_insert_a_system_message():
    """CHAT_WRAPPERS' ``system`` flag matches the wrappers' code (read as text: the
    Qwen2.5-VL wrapper's module needs decord, a video library, to import)."""
    import importlib.util

    for name, wrapper in harness.CHAT_WRAPPERS.items():
        source = Path(importlib.util.find_spec(wrapper.module).origin).read_text()
        inserts = '{"role": "system", "content": [{"type": "text", "text": self.system_prompt}]}'
        assert (inserts in source) == wrapper.system, name


def test_kwargs_are_chosen_as_lmms_eval_does():
    kwargs = {"default": {"a": 1}, "qwen3_vl": {"b": 2}}
    assert harness.select_kwargs(kwargs, "qwen3_vl") == {"b": 2}
    assert harness.select_kwargs(kwargs, "qwen2_5_vl") == {**kwargs, "a": 1}
    assert harness.select_kwargs(kwargs, None) == {**kwargs, "a": 1}
    assert harness.select_kwargs(None, "qwen3_vl") is None
    assert kwargs == {"default": {"a": 1}, "qwen3_vl": {"b": 2}}  # not changed


def test_the_override_is_only_for_files_the_wheel_lacks():
    """MISSING_TEMPLATES fills files lmms-eval's wheel leaves out; once a release ships
    one, the entry must go (this fails) and the installed file is read."""
    tasks = harness.tasks_dir()
    for relative in harness.MISSING_TEMPLATES:
        assert not (tasks / relative).exists(), relative
        assert (tasks / relative).parent.is_dir(), relative
    # the tasks that include them see the supplied values
    assert harness.task_config("mmstar/mmstar.yaml")["lmms_eval_specific_kwargs"]["qwen3_vl"] == {
        "pre_prompt": "Question: ",
        "post_prompt": "Answer with the option letter only.",
    }
    config = harness.task_config("textvqa/textvqa_val.yaml")
    assert config["task"] == "textvqa_val"  # the task's own keys over the template's
    assert config["doc_to_text"] == harness.FunctionRef("utils.textvqa_doc_to_text", "textvqa")


def test_an_installed_file_wins_over_the_override(tmp_path, monkeypatch):
    (tmp_path / "mmstar").mkdir()
    (tmp_path / "mmstar" / "_default_template_yaml").write_text(
        "lmms_eval_specific_kwargs:\n  default:\n    post_prompt: installed\n"
    )
    monkeypatch.setattr(harness, "tasks_dir", lambda: tmp_path)
    assert "installed" in harness._template_text("mmstar/_default_template_yaml")
    monkeypatch.undo()
    assert "installed" not in harness._template_text("mmstar/_default_template_yaml")


def test_importing_task_modules_leaves_no_api_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    harness.task_module.cache_clear()
    harness.task_module("mathvision/utils.py")
    assert "OPENAI_API_KEY" not in os.environ


def test_importing_the_harness_keeps_truncated_images_an_error():
    """lmms-eval's ``api/task.py`` turns on PIL's LOAD_TRUNCATED_IMAGES at import; the
    harness restores it, so a cut image file still fails with its name afterwards (in a
    fresh process: the first import of lmms-eval is what sets it)."""
    code = (
        "from PIL import ImageFile\n"
        "from vlmrobust.core import harness\n"
        "import sys\n"
        "harness.task_module('mmmu/utils.py')\n"
        "harness.system_prompt('qwen3_vl')\n"
        "assert 'lmms_eval.api.task' in sys.modules\n"
        "print(ImageFile.LOAD_TRUNCATED_IMAGES)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_the_version_follows_the_supplied_templates(monkeypatch):
    """The version of an lmms-* setting carries a digest of the supplied template text,
    so a change to it reruns the jobs of that setting."""
    from vlmrobust.core.prompts import _lmms_builder

    before = _lmms_builder("lmms-textvqa").version
    key = next(iter(harness.MISSING_TEMPLATES))
    changed = {**harness.MISSING_TEMPLATES, key: harness.MISSING_TEMPLATES[key] + "\n# x"}
    monkeypatch.setattr(harness, "MISSING_TEMPLATES", changed)
    after = _lmms_builder("lmms-textvqa").version
    assert after != before
    assert f"-templates-{harness.templates_digest()}+" in after


def test_the_version_is_in_the_label_and_the_source():
    for name in harness.HARNESS_TASKS:
        builder = PROMPTS[name]
        assert builder.version.startswith("1-lmms-eval-0.7.2-templates-"), name
        assert builder.source.startswith("lmms-eval 0.7.2 (= 13fd645a) tasks/"), name


def test_an_unknown_harness_model_is_refused(single_samples):
    s = single_samples["lmms-chartqa"]
    with pytest.raises(ValueError, match="harness.lmms_eval 'llava'"):
        build_prompt(s, _clean(s), "lmms-chartqa", model={"harness": {"lmms_eval": "llava"}})


# --------------------------------------------------------------------------- errors


def test_an_unbuildable_row_names_dataset_and_sample(mmmu_samples, mmstar_samples):
    s = copy.deepcopy(mmmu_samples["mmmu-validation_Math_1"])
    s.meta["options"] = "['unclosed"
    with pytest.raises(harness.HarnessPromptError) as err:
        build_prompt(s, _clean(s), "lmms-mmmu", model=MODELS["qwen2_5_vl"])
    assert "dataset 'mmmu', sample 'mmmu-validation_Math_1'" in str(err.value)
    assert "mmmu_val" in str(err.value)

    del s.meta["options"]  # samples built before the adapter kept the field
    with pytest.raises(harness.HarnessPromptError, match="meta has no 'options'"):
        build_prompt(s, _clean(s), "lmms-mmmu")

    s = mmstar_samples["mmstar-0"]
    v = _clean(s)
    v.images = [*s.images, *s.images]
    with pytest.raises(
        harness.HarnessPromptError, match="dataset 'mmstar', sample 'mmstar-0'.*one image"
    ):
        build_prompt(s, v, "lmms-mmstar")
