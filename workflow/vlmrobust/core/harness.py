"""The papers' evaluation harness, lmms-eval, as the source of the prompts of the
corruption study's benchmarks (docs/prompts.md).

The papers ran lmms-eval at commit 13fd645a (:data:`LMMS_EVAL_COMMIT`) through its
transformers chat wrappers (``--model qwen2_5_vl`` / ``--model qwen3_vl``). The
pinned release (``lmms-eval==0.7.2``, :data:`VERIFIED_VERSION`) holds the same task
code, and this module calls it instead of retyping its strings:

1. Task config. The task's YAML file is read from the installed package with a loader
   that keeps ``!function`` tags as references (:class:`FunctionRef`) and merges its
   ``include`` files as lmms-eval's ``load_yaml_config`` does (the included files
   first, the task's own keys over them).
2. Missing files. The 0.7.2 wheel lacks some extension-less template files of the
   repository. :data:`MISSING_TEMPLATES` supplies the keys of those files that a
   prompt depends on, copied from the repository at 13fd645a; each is used only while
   the installed package lacks that file (a release that ships it wins).
3. Model-specific arguments. The task's ``lmms_eval_specific_kwargs`` are chosen for
   the lmms-eval model name as ``ConfigurableTask._prepare_model_specific_config``
   does (:func:`select_kwargs`): the model's own entry replaces the dict; otherwise
   the ``default`` entry is merged into it; a task without the key passes ``None``.
   The model name is the registry entry's ``harness.lmms_eval`` (config/README.md); a
   model without one (API and demo models) gets the ``default`` entry.
4. Messages. As ``ConfigurableMessagesTask.doc_to_messages``: the task's
   ``doc_to_messages`` when it has one (MMMU), else its ``doc_to_visual`` images, then
   its ``doc_to_text`` text (``ConfigurableMessagesTask._build_user_turn``).
5. System prompt. The Qwen3-VL chat wrapper inserts its ``system_prompt`` (the
   default of its ``__init__``, read from the installed class) as a system message;
   the Qwen2.5-VL chat wrapper inserts none (:data:`CHAT_WRAPPERS`).
6. Images. The chat wrappers' ``min_pixels`` / ``max_pixels`` defaults
   (:func:`wrapper_pixels`, read from the installed source) and what the wrappers do
   with an image before their processor: ``qwen_vl_utils.process_vision_info`` resizes
   it (PIL, bicubic) by qwen-vl-utils' own rule and bounds, not the wrapper's
   (:func:`wrapper_fit`); the Qwen2.5-VL wrapper's processor then resizes it again
   within the wrapper's limits, the Qwen3-VL wrapper's not at all (``do_resize=False``).
   :func:`harness_pixels` is what a dataset with ``pixels: harness`` shows a model with
   ``harness.lmms_eval`` its images at (docs/prompts.md, "Same tensors as the harness").

The lmms-eval document a task function reads is rebuilt from the sample and its
variant (``_*_doc``): the question is the variant's (a textual perturbation may have
changed it); every other field comes from the sample (its ``meta`` keeps the raw hub
fields the functions read). Images are :class:`ImageRef` stand-ins that carry the
variant's image path through the task code, so the image order and placement are the
task's own. A sample whose document cannot be built or that the task code rejects
raises :class:`HarnessPromptError`, naming the dataset and the sample.

The environment variable ``NUM_IMAGE``, which makes lmms-eval's MMMU and
HallusionBench code send each image twice, must be unset (or ``1``, the papers'
setting); any other value is an error.

Task modules are imported lazily (importing lmms-eval takes seconds) and cached;
``mathvision`` and ``mathvista`` build an OpenAI client at import and need
``OPENAI_API_KEY``: a placeholder is set for the import only, and the environment is
restored afterwards.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from PIL import Image

from .records import Sample

__all__ = [
    "CHAT_WRAPPED_PROMPTS",
    "CHAT_WRAPPERS",
    "HARNESS_JUDGED",
    "HARNESS_SCORED",
    "HARNESS_TASKS",
    "LMMS_EVAL_COMMIT",
    "MISSING_TEMPLATES",
    "FunctionRef",
    "HarnessPromptError",
    "ImageRef",
    "harness_messages",
    "harness_pixels",
    "lmms_eval_model",
    "lmms_eval_version",
    "select_kwargs",
    "vision_utils_fit",
    "wrapper_fit",
    "wrapper_pixels",
    "wrapper_system",
    "system_prompt",
    "task_config",
    "task_function",
    "task_module",
]

#: The lmms-eval commit the papers ran (2026-05-08).
LMMS_EVAL_COMMIT = "13fd645a"
#: The release whose task files (the ones used here) were checked equal to that commit.
VERIFIED_VERSION = "0.7.2"
_DIST = "lmms-eval"


class HarnessPromptError(ValueError):
    """A sample the harness cannot build a prompt for (names dataset and sample)."""


@cache
def lmms_eval_version() -> str:
    """The installed lmms-eval release (``"not installed"`` without one)."""
    try:
        return importlib.metadata.version(_DIST)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def templates_digest() -> str:
    """8 hex digits of a sha256 over :data:`MISSING_TEMPLATES`: part of the version of
    every ``lmms-*`` setting, so a change to a supplied template reruns its jobs."""
    text = "\n".join(f"{k}\n{v}" for k, v in sorted(MISSING_TEMPLATES.items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def version_note() -> str:
    """``lmms-eval 0.7.2 (= 13fd645a)``, or without the ``=`` for another release."""
    version = lmms_eval_version()
    if version == VERIFIED_VERSION:
        return f"lmms-eval {version} (= {LMMS_EVAL_COMMIT})"
    return f"lmms-eval {version} (not checked against {LMMS_EVAL_COMMIT})"


# --------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class HarnessTask:
    """One prompt setting: the lmms-eval task it reproduces (strings only: the prompt
    fingerprint hashes the repr of this table)."""

    #: the lmms-eval task name
    task: str
    #: its YAML file under ``lmms_eval/tasks``
    yaml: str
    #: the document builder (``_<doc>_doc`` of this module)
    doc: str
    #: what it reproduces (docs/prompts.md)
    description: str


#: Prompt setting -> lmms-eval task. ``lmms-mathvision`` is config/paper.yaml's
#: (``mathvision_testmini``; the paper names no task: docs/prompts.md);
#: ``lmms-mathvision-reason`` (``mathvision_reason_testmini``, no model-specific
#: arguments, hence no multiple-choice instruction) is offered beside it.
HARNESS_TASKS: dict[str, HarnessTask] = {
    "lmms-mmmu": HarnessTask(
        "mmmu_val", "mmmu/mmmu_val.yaml", "mmmu", "lmms-eval mmmu_val (interleaved images)"
    ),
    "lmms-mmstar": HarnessTask("mmstar", "mmstar/mmstar.yaml", "mmstar", "lmms-eval mmstar"),
    "lmms-mathvision": HarnessTask(
        "mathvision_testmini",
        "mathvision/mathvision_testmini.yaml",
        "mathvision",
        "lmms-eval mathvision_testmini (boxed answer, multiple-choice instruction)",
    ),
    "lmms-mathvision-reason": HarnessTask(
        "mathvision_reason_testmini",
        "mathvision/mathvision_reason_testmini.yaml",
        "mathvision",
        "lmms-eval mathvision_reason_testmini (boxed answer only)",
    ),
    "lmms-hallusionbench": HarnessTask(
        "hallusion_bench_image",
        "hallusion_bench/hallusion_bench_image.yaml",
        "single",
        "lmms-eval hallusion_bench_image (the bare question)",
    ),
    "lmms-chartqa": HarnessTask(
        "chartqa", "chartqa/chartqa.yaml", "single", "lmms-eval chartqa (a single word)"
    ),
    "lmms-textvqa": HarnessTask(
        "textvqa_val", "textvqa/textvqa_val.yaml", "textvqa", "lmms-eval textvqa_val"
    ),
    "lmms-infovqa": HarnessTask(
        "infovqa_val", "infovqa/infovqa_val.yaml", "single", "lmms-eval infovqa_val"
    ),
}


#: The benchmarks (scorer names) whose verdicts ``scoring.mode: harness`` takes from
#: lmms-eval's task code (:mod:`vlmrobust.score.harness`), and that code.
HARNESS_SCORED: dict[str, str] = {
    "mmmu": "tasks/mmmu/utils.py mmmu_process_results + evaluate_mmmu",
    "mmstar": "tasks/mmstar/utils.py mmstar_process_results",
    "mathvision": "tasks/mathvision/utils.py mathvision_process_results",
    "mathvista": "tasks/mathvista/utils.py mathvista_process_results",
    "chartqa": "tasks/chartqa/utils.py chartqa_process_results",
    "textvqa": "tasks/textvqa/utils.py textvqa_process_results",
    "infovqa": "api/metrics.py anls",
    "hallusionbench": "tasks/hallusion_bench/utils.py evaluate_by_chatgpt + assign_correctness",
}
#: of those, the ones whose harness asks an LLM (GPT-4): without scoring.harness_judge
#: they are scored by offline rules
HARNESS_JUDGED = ("hallusionbench", "mathvista")


#: Template files of lmms-eval at 13fd645a that the 0.7.2 wheel lacks (their names
#: have no extension and the wheel's package data leaves them out). Each entry is the
#: part of the file, as written in the repository at that commit
#: (``lmms_eval/tasks/<key>``), that a prompt depends on: the document functions and
#: ``lmms_eval_specific_kwargs`` the task YAMLs include, and MMMU's
#: ``metadata.interleaved_format``, which ``mmmu/utils.py`` reads when it is imported.
#: Keys that only concern scoring and generation are left out. An entry is read only
#: while the installed package lacks the file (:func:`_template_text`).
#: (``mathvision/reasoning/_default_template_yaml`` is missing too, but no setting here
#: uses the task that includes it.)
MISSING_TEMPLATES: dict[str, str] = {
    "mmmu/_default_template_yaml": """\
metadata:
  version: 0.0
  interleaved_format: false
""",
    "mmstar/_default_template_yaml": """\
lmms_eval_specific_kwargs:
  default:
    pre_prompt: ""
    post_prompt: "\\nAnswer with the option's letter from the given choices directly"
  qwen3_vl:
    pre_prompt: "Question: "
    post_prompt: "Answer with the option letter only."
""",
    "textvqa/_default_template_textvqa_yaml": """\
doc_to_visual: !function utils.textvqa_doc_to_visual
doc_to_text: !function utils.textvqa_doc_to_text
lmms_eval_specific_kwargs:
  default:
    pre_prompt: ""
    post_prompt: "\\nAnswer the question using a single word or phrase."
    ocr: false
  qwen_vl:
    pre_prompt: ""
    post_prompt: " Answer:"
  plm:
    pre_prompt: ""
    post_prompt: "\\nProvide a short and direct response."
""",
    "infovqa/_default_template_infovqa_yaml": """\
doc_to_visual: !function utils.infovqa_doc_to_visual
doc_to_text: !function utils.infovqa_doc_to_text
lmms_eval_specific_kwargs:
  default:
    pre_prompt: ""
    post_prompt: "\\nAnswer the question using a single word or phrase."
""",
}


# --------------------------------------------------------------------------- chat wrappers


@dataclass(frozen=True)
class ChatWrapper:
    """An lmms-eval chat wrapper: the ``--model`` name (the task's ``model_name``), its
    class, whether its ``generate_until`` inserts ``self.system_prompt`` as a system
    message, the ``image_patch_size`` it passes ``qwen_vl_utils.process_vision_info``
    (the package's default, 14, where it passes none) and whether its processor call
    resizes the images again (the Qwen3-VL wrapper passes ``do_resize=False``)."""

    model: str
    module: str
    cls: str
    system: bool
    image_patch: int = 14
    processor_resizes: bool = True


#: The project's own prompt settings whose text equals what the papers sent through
#: lmms-eval (MathVista's three settings, lmms-eval's ``mathvista_testmini_*`` tasks; the
#: Distract-Bench release's open-ended prompt, run as an lmms-eval task): the text is the
#: builder's, but the chat wrapper still adds its system message for the model
#: (:func:`wrapper_system`), as it did in the papers' runs.
CHAT_WRAPPED_PROMPTS = ("mathvista-cot", "mathvista-format", "mathvista-solution", "distract-open")


#: The chat wrappers the papers ran (lmms_eval/models/chat/ at 13fd645a).
CHAT_WRAPPERS: dict[str, ChatWrapper] = {
    "qwen2_5_vl": ChatWrapper(
        "qwen2_5_vl", "lmms_eval.models.chat.qwen2_5_vl", "Qwen2_5_VL", False, 14, True
    ),
    "qwen3_vl": ChatWrapper(
        "qwen3_vl", "lmms_eval.models.chat.qwen3_vl", "Qwen3_VL", True, 16, False
    ),
}

#: qwen-vl-utils (0.0.14; lmms-eval 0.7.2 requires >= 0.0.14): ``fetch_image``'s bounds in
#: vision tokens (``IMAGE_MIN_TOKEN_NUM``, ``IMAGE_MAX_TOKEN_NUM``) and the merge size
#: (``SPATIAL_MERGE_SIZE``); the chat wrappers' messages carry no ``min_pixels`` /
#: ``max_pixels`` of their own for images, so these bound the first resize
#: (tests/test_wrapper_tensors.py checks them against the package).
QWEN_VL_UTILS_TOKENS = (4, 16384)
QWEN_VL_UTILS_MERGE = 2
#: ``process_vision_info``'s default ``image_patch_size`` (a call that passes none)
QWEN_VL_UTILS_PATCH = 14


def lmms_eval_model(model: dict[str, Any] | None) -> str | None:
    """The lmms-eval model name a registry entry was run as (``harness.lmms_eval``), or
    None (no entry, or none given)."""
    harness = (model or {}).get("harness") or {}
    name = harness.get("lmms_eval")
    if name is not None and name not in CHAT_WRAPPERS:
        raise ValueError(
            f"harness.lmms_eval {name!r} is not a chat wrapper reproduced here "
            f"({', '.join(CHAT_WRAPPERS)})"
        )
    return name


def wrapper_system(model: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """The system message lmms-eval's chat wrapper adds for a registry entry, and the
    wrapper's name: (None, None) for a model without ``harness.lmms_eval``."""
    name = lmms_eval_model(model)
    return system_prompt(name), name


@cache
def system_prompt(model_name: str | None) -> str | None:
    """The system message the chat wrapper ``model_name`` sends: the default of its
    class's ``system_prompt`` argument when it inserts one, else None."""
    if model_name is None:
        return None
    wrapper = CHAT_WRAPPERS[model_name]
    if not wrapper.system:
        return None
    with _openai_placeholder():
        cls = getattr(importlib.import_module(wrapper.module), wrapper.cls)
    return inspect.signature(cls.__init__).parameters["system_prompt"].default


# --------------------------------------------------------------------------- pixel limits

#: The chat wrappers' image-size arguments (their ``__init__`` defaults).
PIXEL_ARGUMENTS = ("min_pixels", "max_pixels")


@cache
def wrapper_pixels(model_name: str) -> dict[str, int]:
    """The pixel limits the chat wrapper ``model_name`` shows images at: the defaults of
    its class's ``min_pixels`` / ``max_pixels`` arguments (``qwen2_5_vl``, ``qwen3_vl``:
    ``256*28*28`` = 200,704 and 1,605,632), which the papers' runs left as they were.

    Read from the installed source, not by importing the class (the Qwen wrappers'
    modules need decord, a video library, to import): the class in the wrapper's module,
    else the base class it imports (the chat wrappers inherit the ``simple`` ones'
    ``__init__``)."""
    wrapper = CHAT_WRAPPERS[model_name]
    found = _init_defaults(wrapper.module, wrapper.cls, PIXEL_ARGUMENTS)
    missing = [a for a in PIXEL_ARGUMENTS if a not in found]
    if missing:
        raise ValueError(
            f"lmms-eval {model_name}: {wrapper.module}.{wrapper.cls}.__init__ has no default "
            f"for {', '.join(missing)} (lmms-eval {lmms_eval_version()})"
        )
    return found


def _init_defaults(module: str, cls: str, names: tuple[str, ...], depth: int = 0) -> dict[str, int]:
    """The integer defaults of ``names`` in ``module.cls.__init__`` (or the first base
    class that defines ``__init__``), from the module's source file (found without
    importing lmms-eval's packages)."""
    path = tasks_dir().parent.joinpath(*module.split(".")[1:]).with_suffix(".py")
    if not module.startswith("lmms_eval.") or not path.is_file() or depth > 4:
        raise ValueError(f"lmms-eval: module {module} is not installed ({_DIST})")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {
        alias.asname or alias.name: (node.module, alias.name)
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if node is None:
        raise ValueError(f"lmms-eval: {module} defines no class {cls}")
    init = next(
        (f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None
    )
    if init is not None:
        args = init.args.args[len(init.args.args) - len(init.args.defaults) :]
        pairs = [
            *zip(args, init.args.defaults, strict=True),
            *zip(init.args.kwonlyargs, init.args.kw_defaults, strict=True),
        ]
        return {a.arg: _int_value(d) for a, d in pairs if a.arg in names and d is not None}
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in imported:
            found = _init_defaults(*imported[base.id], names, depth + 1)
            if found:
                return found
    return {}


def _int_value(node: ast.expr) -> int:
    """An integer default written as a literal or a product/sum of literals (``256 * 28 * 28``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return int(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Add | ast.Sub):
        left, right = _int_value(node.left), _int_value(node.right)
        if isinstance(node.op, ast.Mult):
            return left * right
        return left + right if isinstance(node.op, ast.Add) else left - right
    raise ValueError(f"lmms-eval: a default that is not a whole number ({ast.dump(node)[:80]})")


def vision_utils_fit(image_patch: int = QWEN_VL_UTILS_PATCH) -> dict[str, int]:
    """``qwen_vl_utils.process_vision_info``'s resize of an image whose message sets no
    size of its own (``fetch_image``, PIL bicubic) with ``image_patch_size`` ``image_patch``:
    sides multiples of ``factor`` (``image_patch`` x the merge size), the area within
    qwen-vl-utils' own bounds (4 to 16,384 tokens of ``factor`` pixels). The default is
    the call without arguments, as the Idis authors' ``inference/models.py`` makes it:
    factor 28, 3,136 to 12,845,056 pixels (a 512 x 512 image becomes 504 x 504)."""
    factor = image_patch * QWEN_VL_UTILS_MERGE
    low, high = QWEN_VL_UTILS_TOKENS
    return {"factor": factor, "min_pixels": low * factor**2, "max_pixels": high * factor**2}


def wrapper_fit(model_name: str) -> dict[str, int]:
    """The first resize of the chat wrapper ``model_name``'s images
    (:func:`vision_utils_fit` with its ``image_patch``: factor 28 for ``qwen2_5_vl``, 32
    for ``qwen3_vl``)."""
    return vision_utils_fit(CHAT_WRAPPERS[model_name].image_patch)


def harness_pixels(model: dict[str, Any] | None) -> dict[str, Any] | None:
    """How the papers' harness showed a registry entry's images, or None for a model
    without ``harness.lmms_eval``: ``fit``, the first resize (:func:`wrapper_fit`), then
    the processor's ``min_pixels`` / ``max_pixels``: the chat wrapper's
    (:func:`wrapper_pixels`) where its processor resizes again, else the ``fit``
    bounds, which leave the fitted image as it is (the Qwen3-VL wrapper's
    ``do_resize=False``)."""
    name = lmms_eval_model(model)
    if name is None:
        return None
    fit = wrapper_fit(name)
    if CHAT_WRAPPERS[name].processor_resizes:
        limits = dict(wrapper_pixels(name))
    else:
        limits = {"min_pixels": fit["min_pixels"], "max_pixels": fit["max_pixels"]}
    return {**limits, "fit": fit}


# --------------------------------------------------------------------------- task config


@dataclass(frozen=True)
class FunctionRef:
    """A ``!function module.name`` of a task YAML, with the folder of the file it is in."""

    name: str
    folder: str


class _Loader(yaml.SafeLoader):
    folder = ""


def _function(loader: _Loader, node: yaml.Node) -> FunctionRef:
    return FunctionRef(str(loader.construct_scalar(node)), loader.folder)  # type: ignore[arg-type]


_Loader.add_constructor("!function", _function)


def tasks_dir() -> Path:
    """The installed ``lmms_eval/tasks`` folder (located without importing lmms-eval)."""
    spec = importlib.util.find_spec("lmms_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("lmms-eval is not installed (a pinned dependency)")
    return Path(next(iter(spec.submodule_search_locations))) / "tasks"


def _template_text(relative: str) -> str:
    """The text of ``lmms_eval/tasks/<relative>``: the installed file, else its
    :data:`MISSING_TEMPLATES` entry."""
    path = tasks_dir() / relative
    if path.is_file():
        return path.read_text(encoding="utf-8")
    if relative in MISSING_TEMPLATES:
        return MISSING_TEMPLATES[relative]
    raise FileNotFoundError(f"lmms-eval task file {relative} is neither installed nor supplied")


def _load_yaml(relative: str) -> dict[str, Any]:
    loader = _Loader(_template_text(relative))
    loader.folder = str(Path(relative).parent)
    try:
        data = loader.get_single_data()
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ValueError(f"lmms-eval task file {relative} holds no mapping")
    if "include" not in data:
        return data
    # lmms_eval.utils.load_yaml_config: the included files (the last one first), then
    # the file's own keys over them
    includes = data.pop("include")
    includes = [includes] if isinstance(includes, str) else list(includes)
    merged: dict[str, Any] = {}
    for name in reversed(includes):
        merged.update(_load_yaml(str(Path(relative).parent / name)))
    merged.update(data)
    return merged


@cache
def task_config(relative: str) -> dict[str, Any]:
    """The config of the task YAML ``lmms_eval/tasks/<relative>``, includes merged."""
    return _load_yaml(relative)


def select_kwargs(kwargs: dict[str, Any] | None, model_name: str | None) -> dict[str, Any] | None:
    """The ``lmms_eval_specific_kwargs`` a task passes for ``model_name``, as
    ``ConfigurableTask._prepare_model_specific_config`` chooses them (on a copy)."""
    if kwargs is None:
        return None
    kwargs = copy.deepcopy(kwargs)
    if model_name in kwargs:
        return kwargs[model_name]
    if "default" in kwargs:
        kwargs.update(kwargs.get("default", {}))
    elif "dataset" in kwargs:
        kwargs.update(kwargs.get("dataset", {}))
    return kwargs


def kwargs_entry(kwargs: dict[str, Any] | None, model_name: str | None) -> str:
    """Which entry :func:`select_kwargs` took: the model name, ``default``, ``dataset``
    or ``none`` (the task has no model-specific arguments)."""
    if kwargs is None:
        return "none"
    if model_name in kwargs:
        return str(model_name)
    return "default" if "default" in kwargs else "dataset" if "dataset" in kwargs else "none"


# --------------------------------------------------------------------------- task modules


@contextlib.contextmanager
def _openai_placeholder() -> Iterator[None]:
    """For an import of lmms-eval code only: ``OPENAI_API_KEY`` set to a placeholder
    when unset (the judge clients some task modules build at import), and PIL's
    ``ImageFile.LOAD_TRUNCATED_IMAGES`` kept as it was (``lmms_eval.api.task`` turns it
    on at import, which would let a truncated image file load silently everywhere in
    the process instead of failing with its name). Both are restored afterwards."""
    from PIL import ImageFile

    truncated = ImageFile.LOAD_TRUNCATED_IMAGES
    before = os.environ.get("OPENAI_API_KEY")
    if not before:
        os.environ["OPENAI_API_KEY"] = "placeholder-for-import"
    try:
        yield
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = truncated
        if not before:
            if before is None:
                os.environ.pop("OPENAI_API_KEY", None)
            else:
                os.environ["OPENAI_API_KEY"] = before


@cache
def task_module(relative: str) -> Any:
    """The task module ``lmms_eval/tasks/<relative>`` (a ``.py`` file), executed fresh as
    lmms-eval's ``!function`` loader does. A module whose folder lacks a file of
    :data:`MISSING_TEMPLATES` runs with ``__file__`` in a temporary copy of the folder
    that holds the supplied file, so what it reads beside itself is the supplied text."""
    path = tasks_dir() / relative
    folder = str(Path(relative).parent)
    supplied = {
        Path(k).name: text
        for k, text in MISSING_TEMPLATES.items()
        if str(Path(k).parent) == folder and not (tasks_dir() / k).is_file()
    }
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load lmms-eval task module {relative}")
    module = importlib.util.module_from_spec(spec)
    with _openai_placeholder():
        if not supplied:
            spec.loader.exec_module(module)
            return module
        with tempfile.TemporaryDirectory(prefix="lmms-eval-task-") as tmp:
            for entry in path.parent.iterdir():
                (Path(tmp) / entry.name).symlink_to(entry)
            for name, text in supplied.items():
                (Path(tmp) / name).write_text(text, encoding="utf-8")
            module.__file__ = str(Path(tmp) / path.name)
            spec.loader.exec_module(module)
    return module


def task_function(ref: FunctionRef) -> Any:
    """The function a ``!function`` reference names: ``<module>.py`` in the YAML's
    folder, else an importable module (lmms-eval's ``import_function``)."""
    *module, name = ref.name.split(".")
    relative = str(Path(ref.folder) / f"{'.'.join(module)}.py")
    if (tasks_dir() / relative).is_file():
        return getattr(task_module(relative), name)
    with _openai_placeholder():
        return getattr(importlib.import_module(".".join(module)), name)


def _callable(config: dict[str, Any], key: str) -> Any:
    value = config.get(key)
    if isinstance(value, FunctionRef):
        return task_function(value)
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{key} {value!r} is neither a function nor a field name")
    return value


# --------------------------------------------------------------------------- messages


class ImageRef(Image.Image):
    """A stand-in image that carries a variant's image path through the task code
    (``.convert()`` returns itself; the chat message keeps it as the image)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def convert(self, *args: Any, **kwargs: Any) -> ImageRef:  # type: ignore[override]
        return self

    def __repr__(self) -> str:
        return f"ImageRef({self.path!r})"


def _doc_to_visual(config: dict[str, Any], doc: dict[str, Any], kwargs: Any) -> Any:
    # ConfigurableTask.doc_to_visual
    fn = _callable(config, "doc_to_visual")
    if isinstance(fn, str):
        return [doc[fn]]
    if callable(fn):
        if kwargs is not None and len(inspect.signature(fn).parameters) == 2:
            return fn(doc, kwargs)
        return fn(doc)
    return fn


def _doc_to_text(config: dict[str, Any], doc: dict[str, Any], kwargs: Any) -> Any:
    # ConfigurableTask.doc_to_text, for a function (the only form these tasks use)
    fn = _callable(config, "doc_to_text")
    if not callable(fn):
        raise TypeError(f"doc_to_text {fn!r} is not a function")
    return fn(doc, kwargs) if kwargs is not None else fn(doc)


def _doc_to_messages(config: dict[str, Any], doc: dict[str, Any], kwargs: Any) -> list[dict]:
    """``ConfigurableMessagesTask.doc_to_messages`` (one round)."""
    fn = _callable(config, "doc_to_messages")
    if callable(fn):
        params = inspect.signature(fn).parameters
        call: dict[str, Any] = {}
        if kwargs is not None and (
            "lmms_eval_specific_kwargs" in params
            or any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())
            or len(params) == 2
        ):
            call["lmms_eval_specific_kwargs"] = kwargs
        return fn(doc, **call)
    if fn is None and (
        config.get("doc_to_visual") is not None or config.get("doc_to_text") is not None
    ):
        from lmms_eval.api.task import ConfigurableMessagesTask

        visuals = _doc_to_visual(config, doc, kwargs) or []
        text = _doc_to_text(config, doc, kwargs)
        return ConfigurableMessagesTask._build_user_turn(visuals, text)
    raise TypeError(f"doc_to_messages {fn!r} is not a function")


def _content(messages: list[dict]) -> list[dict[str, str]]:
    """The user turn as the project's content parts (text, image path) in order."""
    if len(messages) != 1 or messages[0].get("role") != "user":
        raise ValueError(f"expected one user message, got {[m.get('role') for m in messages]}")
    parts: list[dict[str, str]] = []
    for item in messages[0]["content"]:
        kind = item.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": str(item["text"])})
        elif kind == "image" and isinstance(item.get("url"), ImageRef):
            parts.append({"type": "image", "path": item["url"].path})
        else:
            raise ValueError(f"unexpected message content {item!r:.120}")
    return parts


# --------------------------------------------------------------------------- documents


def _meta(sample: Sample, key: str) -> Any:
    if key not in (sample.meta or {}):
        raise KeyError(f"meta has no {key!r} (rebuild the samples with this version)")
    return sample.meta[key]


def _one_image(images: list[str]) -> ImageRef:
    if len(images) != 1:
        raise ValueError(f"the task takes one image, the variant has {len(images)}")
    return ImageRef(images[0])


def _mmmu_doc(sample: Sample, question: str, images: list[str]) -> dict[str, Any]:
    """MMMU's hub row: ``options`` as the hub's string, ``image_N`` by the sample's
    ``image_numbers`` (the variant's images in that order)."""
    numbers = _meta(sample, "image_numbers")
    if not isinstance(numbers, list) or len(numbers) != len(images):
        raise ValueError(f"image_numbers {numbers!r} do not match the {len(images)} image(s)")
    doc: dict[str, Any] = {
        "id": sample.meta.get("source_id"),
        "question": question,
        "options": _meta(sample, "options"),
        "question_type": _meta(sample, "question_type"),
    }
    for n in range(1, 8):
        doc[f"image_{n}"] = None
    for n, path in zip(numbers, images, strict=True):
        doc[f"image_{int(n)}"] = ImageRef(path)
    return doc


def _mmstar_doc(sample: Sample, question: str, images: list[str]) -> dict[str, Any]:
    """MMStar's question with its inline options: the variant's stem, then the part of
    the raw question after the sample's stem (``Options: A: ..., B: ...``)."""
    raw = str(_meta(sample, "raw_question"))
    if not raw.startswith(sample.question):
        raise ValueError("meta.raw_question does not start with the sample's question")
    return {"question": question + raw[len(sample.question) :], "image": _one_image(images)}


def _mathvision_doc(sample: Sample, question: str, images: list[str]) -> dict[str, Any]:
    """MathVision's row: ``options`` as released (empty where the image pictures them)."""
    options = [] if (sample.meta or {}).get("options_pictured") else list(sample.choices)
    return {"question": question, "options": options, "decoded_image": _one_image(images)}


def _textvqa_doc(sample: Sample, question: str, images: list[str]) -> dict[str, Any]:
    return {
        "question": question,
        "image": _one_image(images),
        "ocr_tokens": (sample.meta or {}).get("ocr_tokens"),
    }


def _single_doc(sample: Sample, question: str, images: list[str]) -> dict[str, Any]:
    """A question and one ``image`` (HallusionBench, ChartQA, InfoVQA)."""
    return {"question": question, "image": _one_image(images)}


def _document(kind: str, sample: Sample, question: str, images: list[str]) -> dict[str, Any]:
    if kind == "mmmu":
        return _mmmu_doc(sample, question, images)
    if kind == "mmstar":
        return _mmstar_doc(sample, question, images)
    if kind == "mathvision":
        return _mathvision_doc(sample, question, images)
    if kind == "textvqa":
        return _textvqa_doc(sample, question, images)
    if kind == "single":
        return _single_doc(sample, question, images)
    raise ValueError(f"unknown document kind {kind!r}")


def harness_messages(
    setting: str,
    sample: Sample,
    question: str,
    images: list[str],
    model: dict[str, Any] | None,
) -> tuple[list[dict[str, str]], str | None, str]:
    """The user content, system prompt and source of prompt setting ``setting`` (a key
    of :data:`HARNESS_TASKS`) for ``sample`` with the variant's ``question`` and
    ``images``, answered by the registry entry ``model`` (module docstring)."""
    task = HARNESS_TASKS[setting]
    model_name = lmms_eval_model(model)
    if os.environ.get("NUM_IMAGE", "1") != "1":
        # MMMU's and HallusionBench's task code repeat the image when it is 2
        raise RuntimeError(
            f"NUM_IMAGE={os.environ['NUM_IMAGE']!r} is set: lmms-eval's task code would "
            "repeat images; the papers' prompts have each image once (unset it)"
        )
    config = task_config(task.yaml)
    raw_kwargs = config.get("lmms_eval_specific_kwargs")
    kwargs = select_kwargs(raw_kwargs, model_name)
    try:
        doc = _document(task.doc, sample, question, images)
        content = _content(_doc_to_messages(config, doc, kwargs))
    except (KeyError, ValueError, TypeError, AttributeError, IndexError, SyntaxError) as exc:
        raise HarnessPromptError(
            f"dataset {sample.dataset!r}, sample {sample.sample_id!r}: lmms-eval task "
            f"{task.task} cannot build a prompt ({type(exc).__name__}: {exc})"
        ) from exc
    functions = config.get("doc_to_messages") or config.get("doc_to_text")
    function = functions.name if isinstance(functions, FunctionRef) else str(functions)
    wrapper = f"chat wrapper {model_name}" if model_name else "no chat wrapper"
    source = (
        f"{version_note()} tasks/{task.yaml} {function}, kwargs "
        f"{kwargs_entry(raw_kwargs, model_name)}, {wrapper}"
    )
    return content, system_prompt(model_name), source


def messages_builder(setting: str) -> Any:
    """The whole-message builder of prompt setting ``setting``
    (:class:`vlmrobust.core.prompts.PromptBuilder` ``messages``): it returns (content,
    system, source). The builder's label carries the lmms-eval release and
    :func:`templates_digest` (the prompt's fingerprint hashes this function only)."""
    if setting not in HARNESS_TASKS:
        raise KeyError(f"no lmms-eval task for prompt setting {setting!r}")

    def build(
        sample: Sample, question: str, images: list[str], model: dict[str, Any] | None
    ) -> tuple[list[dict[str, str]], str | None, str]:
        return harness_messages(setting, sample, question, images, model)

    return build
