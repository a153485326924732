"""Every LLM call of the run besides the VLMs' own answers: the judges', extractors' and
writers' requests, prompt and generated tokens, and, for a local LLM, its engines' time.

One :class:`Calls` per file a step makes (a judged file, an attribute-labels file, a
hallucination file, ...), counted from the step's own code (docs/forecast.md):

- **MathVerse judge** (``judge.mathverse``, :mod:`vlmrobust.judges.mathverse`): per output
  row an extraction call and a judgement call (``calls.yaml`` ``mathverse.judge_share``
  of the rows: the second call is skipped where the extracted answer is the reference);
  the prompt is the prompt file with the output's answer text (``response_tokens``,
  capped by the output's generated tokens) or the question;
- **attribute extractors** (``judge.attributes.extractors.<name>``,
  :mod:`vlmrobust.judges.attributes`): one call per trace (perception, waterbirds) or
  per sentence of the trace (math: the trace's tokens / ``sentence_tokens``), on the
  traces the plan's scoping and validation sample keep (:attr:`JudgeCell.sample`); a
  trace is as long as its VLM cell's generated tokens;
- **hallucination judge** (``masking.hallucination``): one call per compared row, its
  clean and masked chains at their cells' generated lengths;
- **distractor-reference judge** (``judge.reference``): one call per output row under a
  distraction condition; the scoring's harness judge and LLM fallback
  (``scoring.harness_judge``, ``scoring.llm_fallback``); the textual-distractor writer,
  the VisArgs question writer and the image editor where the run's datasets use them.

Text is counted as the forecast counts it (4 characters per token, 20 tokens of chat
template). A reasoning LLM adds its hidden reasoning to every answer (``calls.yaml``
``reasoning``). An offline setting makes no call and is listed with 0. The part of a
call's prompt that repeats the previous call's (the prompt file before the first thing
that changes) is ``cached``: a local engine does not prefill it again (vLLM's automatic
prefix caching) and a provider with a prompt cache bills it at its cached price
(:mod:`.money`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core import paths
from ..core.harness import HARNESS_JUDGED
from ..core.paths import path
from ..core.registry import LOCAL_BACKENDS, model_resources
from ..judges.attributes import math_prompt, perception_prompt, waterbirds_prompt
from ..judges.hallucination import HallucinationItem, build_hallucination_prompt
from ..judges.mathverse import extract_prompt, judge_prompt
from ..judges.reference import build_reference_prompt
from ..plan import JudgeCell, RunPlan, idis
from ..plan import judges as plan_judges
from .cells import Cell
from .tables import MissingEntry, Throughput, load_table, throughput_class
from .tokens import CHARS_PER_TOKEN, TEMPLATE_TOKENS

#: what stands for a value that changes from call to call when a prompt is measured
MARK = "\x00"
#: settings that make no LLM call
OFFLINE = ("offline", "template", "composite")


@dataclass
class Calls:
    """The LLM calls of one file a step makes. Tokens are means per request; ``cached``
    is the part of ``prompt`` that repeats the previous call's."""

    model: str  # a registry id, or an inline setting's "backend/model"
    role: str  # judge | extractor | writer | editor
    step: str
    where: str  # the setting's config key
    file: str
    kind: str  # local | api | offline | inline
    requests: float
    prompt: float | None = 0.0
    cached: float = 0.0
    generated: float | None = 0.0
    how: str = ""
    assumed: list[str] = field(default_factory=list)
    reads: tuple[str, str, str, str] | None = None  # the VLM cell it reads
    gpus: int = 0
    engine_s: float | None = None
    unknown: list[str] = field(default_factory=list)

    def total(self, per_request: float | None) -> float | None:
        return None if per_request is None else per_request * self.requests

    @property
    def gpu_hours(self) -> float | None:
        if self.kind != "local":
            return 0.0
        return None if self.engine_s is None else self.engine_s * self.gpus / 3600


def number(*keys: str) -> tuple[float, str]:
    """A stated number of ``calls.yaml`` (its ``tokens`` or ``value``) and its source."""
    entry: Any = load_table("calls")
    for key in keys:
        entry = entry[key]
    value = entry.get("tokens", entry.get("value"))
    return float(value), str(entry["source"])


def tokens(text: str) -> float:
    """Tokens of ``text`` at :data:`CHARS_PER_TOKEN` (a :data:`MARK` not counted)."""
    return len(text.replace(MARK, "")) / CHARS_PER_TOKEN


def prefix(filled: str) -> float:
    """Tokens of a filled prompt before the first :data:`MARK` (the part every call
    repeats), the chat template's included."""
    return tokens(filled.split(MARK)[0]) + TEMPLATE_TOKENS


def llm_of(plan: RunPlan, spec: dict[str, Any]) -> tuple[str, str]:
    """(model, kind) of an LLM setting: its registry entry (``llm``, or an inline setting
    whose backend, model and base_url are an API entry's) and whether it is ``local`` or
    ``api``; else ``backend/model`` and ``inline``; ``offline`` for no LLM."""
    backend = spec.get("backend", "offline")
    if backend in OFFLINE:
        return backend, "offline"
    mid = spec.get("llm")
    if mid is None:
        mid = next(
            (
                m
                for m, e in plan.registry.items()
                if e["backend"] == backend
                and e.get("api_model") == spec.get("model")
                and (e.get("base_url") or None) == (spec.get("base_url") or None)
            ),
            None,
        )
    if mid is None or mid not in plan.registry:
        return f"{backend}/{spec.get('model')}", "inline"
    return mid, "local" if plan.registry[mid]["backend"] in LOCAL_BACKENDS else "api"


def reasoning(plan: RunPlan, model: str, kind: str) -> tuple[float, str | None]:
    """Hidden reasoning tokens of every call of ``model`` (0 for a family not listed)."""
    if kind not in ("local", "api"):
        return 0.0, None
    family = plan.registry[model].get("family") or model
    entry = load_table("calls")["reasoning"].get(family)
    if entry is None:
        return 0.0, None
    return float(entry["tokens"]), f"{family}: {entry['source']}"


def _calls(plan: RunPlan, spec: dict[str, Any], role: str, step: str, where: str, file: str,
           requests: float) -> Calls:  # fmt: skip
    model, kind = llm_of(plan, spec)
    found = Calls(model, role, step, where, file, kind, requests if kind != "offline" else 0.0)
    if kind == "offline":
        found.prompt = found.generated = 0.0
        found.how = "offline: no LLM call"
    return found


def _rows(vlm: Cell, sample: int | None) -> tuple[float, str]:
    if sample is not None and sample < vlm.requests:
        return float(sample), f"a validation sample of {sample} of {vlm.requests:,.0f} rows"
    return vlm.requests, f"{vlm.requests:,.0f} rows"


# ------------------------------------------------------------------ judge cells


def mathverse_calls(plan: RunPlan, jc: JudgeCell, vlm: Cell, question_chars: float) -> Calls:
    """The two-stage MathVerse judge of one outputs file (module docstring)."""
    rows, rows_how = _rows(vlm, jc.sample)
    found = _calls(plan, jc.spec, "judge", "mathverse", jc.where, jc.out, rows)
    found.reads = (jc.model, jc.dataset, jc.condition, jc.prompt)
    if found.kind == "offline":
        return found
    share, _ = number("mathverse", "judge_share")
    response = number("mathverse", "response_tokens")[0]
    if vlm.generated is None:
        found.unknown.append(f"{jc.model}/{jc.dataset}/{jc.condition}: generated tokens unknown")
        found.prompt = found.generated = None
        return found
    response = min(response, vlm.generated)
    think, _ = reasoning(plan, found.model, found.kind)
    question = "q" * int(question_chars)
    extract = extract_prompt(MARK)
    judge = judge_prompt(MARK, "", "")
    p_extract = tokens(extract) + TEMPLATE_TOKENS + response
    p_judge = tokens(judge_prompt(question, "a", "a" * 20)) + TEMPLATE_TOKENS
    gen_extract = number("mathverse", "extract_answer_tokens")[0] + think
    gen_judge = number("mathverse", "judge_answer_tokens")[0] + think
    found.requests = rows * (1 + share)
    found.prompt = (p_extract + share * p_judge) / (1 + share)
    found.cached = (prefix(extract) + share * prefix(judge)) / (1 + share)
    found.generated = (gen_extract + share * gen_judge) / (1 + share)
    found.how = (f"{rows_how} x (1 extraction + {share:g} judgement); answer text "
                 f"{response:,.0f} tokens")  # fmt: skip
    found.assumed = ["answer text", "judge share", "output length"] + (["reasoning"] * bool(think))
    return found


def _attribute_prompt(task: str, spec: dict[str, Any], question_chars: float) -> str:
    if task == "perception":
        return perception_prompt(MARK, spec.get("prompt") or "standard")
    if task == "waterbirds":
        return waterbirds_prompt(MARK)
    question = "q" * int(question_chars)
    return math_prompt(MARK, "triangle", "circle; a table (an image of a data table)", question)


def attribute_calls(plan: RunPlan, jc: JudgeCell, vlm: Cell, question_chars: float) -> Calls:
    """One extractor on one outputs file (module docstring)."""
    traces, rows_how = _rows(vlm, jc.sample)
    found = _calls(plan, jc.spec, "extractor", "attributes", jc.where, jc.out, traces)
    found.reads = (jc.model, jc.dataset, jc.condition, jc.prompt)
    task = idis.idis_task(plan, jc.dataset) or "perception"
    if found.kind == "offline":
        return found
    if vlm.generated is None:
        found.unknown.append(f"{jc.model}/{jc.dataset}/{jc.condition}: trace length unknown")
        found.prompt = found.generated = None
        return found
    trace = vlm.generated
    think, _ = reasoning(plan, found.model, found.kind)
    template = _attribute_prompt(task, jc.spec, question_chars)
    answer = number("attributes", "answer_tokens", task)[0]
    found.assumed = ["trace length"] if vlm.generated_how == "assumed" else []
    found.assumed += ["output length"] + (["reasoning"] * bool(think))
    found.generated = answer + think
    if task != "math":
        found.prompt = tokens(template) + TEMPLATE_TOKENS + trace
        found.cached = prefix(template)
        found.how = f"{rows_how}, one call per trace of {trace:,.0f} tokens"
        return found
    sentence = number("attributes", "sentence_tokens")[0]
    sentences = max(1.0, trace / sentence)
    found.requests = traces * sentences
    found.prompt = tokens(template) + TEMPLATE_TOKENS + sentence
    found.cached = prefix(template) * (sentences - 1) / sentences
    found.how = (f"{rows_how} x {sentences:,.1f} sentences (a {trace:,.0f}-token trace / "
                 f"{sentence:g} tokens per sentence), one call each")  # fmt: skip
    found.assumed.insert(0, "sentences")
    return found


def judge_cell_calls(
    plan: RunPlan, judge_cells: list[JudgeCell], cells: dict[tuple, Cell], question_chars: dict
) -> list[Calls]:
    """The calls of every judged file of the MathVerse judge and the attribute
    extractors (:func:`vlmrobust.plan.judges.judge_cells`)."""
    out = []
    for jc in judge_cells:
        key = (jc.model, jc.dataset, jc.condition, jc.prompt)
        vlm = cells.get(key)
        if vlm is None:  # outputs imported from a release: no forecast of their own
            continue
        count = mathverse_calls if jc.step == "mathverse" else attribute_calls
        out.append(count(plan, jc, vlm, question_chars.get(jc.dataset, 0.0)))
    return out


# ------------------------------------------------------------------ the other steps


def hallucination_calls(plan: RunPlan, cells: dict[tuple, Cell]) -> list[Calls]:
    """One call per compared row of every (model, dataset, mask condition)."""
    spec, cot = plan_judges.hallucination_judge_spec(plan), plan.config["masking"]["cot_prompt"]
    where, out = "masking.hallucination", []
    for (m, d, c, p), masked in cells.items():
        if p != cot or plan.conditions[c]["perturbation"] != "mask":
            continue
        clean = cells.get((m, d, plan.clean, cot))
        found = _calls(plan, spec, "judge", "hallucination", where,
                       path(paths.HALLUCINATION, model=m, dataset=d, condition=c), masked.requests)  # fmt: skip
        found.reads = (m, d, c, p)
        if found.kind != "offline":
            if clean is None or masked.generated is None or clean.generated is None:
                found.prompt = found.generated = None
                found.unknown.append(f"{m}/{d}/{c}: chain lengths unknown")
            else:
                item = HallucinationItem("k", "", ["x"], "", "")
                think = reasoning(plan, found.model, found.kind)[0]
                content = number("hallucination", "content_tokens")[0]
                found.prompt = (tokens(build_hallucination_prompt(item)) + TEMPLATE_TOKENS
                                + content + masked.generated + clean.generated)  # fmt: skip
                found.generated = number("hallucination", "answer_tokens")[0] + think
                found.how = f"{masked.requests:,.0f} compared rows, both chains in the prompt"
                found.assumed = ["output length"] + (["reasoning"] * bool(think))
        out.append(found)
    return out


def reference_calls(plan: RunPlan, cells: dict[tuple, Cell]) -> list[Calls]:
    """One call per output row under a distraction condition (``judge.reference``)."""
    spec = plan_judges.reference_judge_spec(plan)
    out = []
    for (m, d, c, p), cell in cells.items():
        if plan.conditions[c]["perturbation"] != "distraction":
            continue
        found = _calls(plan, spec, "judge", "reference", "judge.reference",
                       path(paths.JUDGED, model=m, dataset=d, condition=c, prompt=p), cell.requests)  # fmt: skip
        found.reads = (m, d, c, p)
        if found.kind != "offline":
            think = reasoning(plan, found.model, found.kind)[0]
            text = build_reference_prompt("", "a" * 80, "a" * 80)
            found.prompt = None if cell.generated is None else (
                tokens(text) + TEMPLATE_TOKENS + cell.generated)  # fmt: skip
            found.generated = number("reference", "answer_tokens")[0] + think
            found.how = f"{cell.requests:,.0f} output rows"
            found.assumed = ["output length"] + (["reasoning"] * bool(think))
        out.append(found)
    return out


def scoring_calls(plan: RunPlan, cells: dict[tuple, Cell]) -> list[Calls]:
    """The harness judge (HallusionBench's and MathVista's rows) and the LLM fallback
    (a share of every row), where the configuration sets them."""
    scoring, out = plan.config["scoring"], []
    for step, where in (("harness_judge", "scoring.harness_judge"),
                        ("fallback", "scoring.llm_fallback")):  # fmt: skip
        spec = scoring[where.split(".")[1]]
        if not spec:
            continue
        for (m, d, c, p), cell in cells.items():
            judged = plan.datasets[d]["scorer"] in HARNESS_JUDGED
            if step == "harness_judge" and not judged:
                continue
            share = number("fallback", "share")[0] if step == "fallback" else 1.0
            found = _calls(plan, spec, "judge", step.replace("_", "-"), where,
                           path(paths.SCORED, model=m, dataset=d, condition=c, prompt=p), cell.requests * share)  # fmt: skip
            found.reads = (m, d, c, p)
            if found.kind != "offline":
                think = reasoning(plan, found.model, found.kind)[0]
                found.prompt = number(step, "prompt_tokens")[0] + TEMPLATE_TOKENS
                found.generated = number(step, "answer_tokens")[0] + think
                found.how = f"{cell.requests:,.0f} rows x {share:g}"
                found.assumed = ["prompt length", "output length"] + ["share"] * (share < 1)
            out.append(found)
    return out


def writer_calls(plan: RunPlan, conds: dict[tuple, Any], facts: dict[str, Any]) -> list[Calls]:
    """The textual-distractor writer (one call per variant), the image editor (one per
    edited image) and the VisArgs question writer (one per sample), where a dataset of
    the run uses them."""
    out = []
    for (d, c), cond in conds.items():
        condition = plan.conditions[c]
        if condition["perturbation"] == "textual" and condition.get("writer"):
            found = _calls(plan, condition["writer"], "writer", "textual-writer",
                           f"conditions.{c}.writer", path(paths.MANIFEST, dataset=d, condition=c),
                           cond.variants.value)  # fmt: skip
            if found.kind != "offline":
                question = question_chars(facts[d]) / CHARS_PER_TOKEN
                counts = condition.get("counts") or [1]
                found.prompt = tokens(_textual_template()) + TEMPLATE_TOKENS + question
                found.generated = question + sum(counts) / len(counts) * number(
                    "textual_writer", "sentence_tokens")[0]  # fmt: skip
                found.how = f"{cond.variants.value:,.0f} variants, one call each"
                found.assumed = ["output length"]
            out.append(found)
        editor = condition.get("editor")
        if condition["perturbation"] == "objects" and editor not in (None, "composite"):
            spec = editor if isinstance(editor, dict) else {"backend": editor}
            found = _calls(plan, spec, "editor", "image-editor", f"conditions.{c}.editor",
                           path(paths.MANIFEST, dataset=d, condition=c), cond.variants.value)  # fmt: skip
            found.prompt = found.generated = None
            found.unknown.append(f"conditions.{c}.editor: an image edit's tokens and price "
                                 "are not forecast (no registry entry)")  # fmt: skip
            out.append(found)
    for d, spec in plan.datasets.items():
        writer = spec.get("question_writer") or {}
        if spec["adapter"] == "visargs" and writer.get("backend", "template") != "template":
            found = _calls(plan, writer, "writer", "question-writer",
                           f"datasets.{d}.question_writer", path(paths.SAMPLES, dataset=d),
                           facts[d].samples.value)  # fmt: skip
            found.prompt = number("question_writer", "prompt_tokens")[0] + TEMPLATE_TOKENS
            found.generated = number("question_writer", "answer_tokens")[0]
            found.how, found.assumed = "one call per sample", ["prompt length", "output length"]
            out.append(found)
    return out


def _textual_template() -> str:
    from ..judges.attributes import RESOURCES

    return (RESOURCES / "textual-distractor-prompt.txt").read_text(encoding="utf-8")


# ------------------------------------------------------------------ engine time


def time_calls(plan: RunPlan, calls: list[Calls], gpu_type: str | None,
               rates: dict[str, Throughput]) -> None:  # fmt: skip
    """Fill in each local LLM's calls' engine time at its throughput class (its repeated
    prefix not prefilled again); a model in no class is ``unknown``."""
    for found in calls:
        if found.kind != "local":
            continue
        entry = plan.registry[found.model]
        found.gpus = int(model_resources(entry)["gpu"] or 0)
        try:
            rate = rates.get(found.model) or throughput_class(found.model, entry, gpu_type)
        except MissingEntry as exc:
            found.unknown.append(str(exc))
            continue
        rates[found.model] = rate
        if found.prompt is None or found.generated is None:
            continue
        per_request = found.generated / rate.gen_tok_s
        if rate.prompt_tok_s:
            per_request += (found.prompt - found.cached) / rate.prompt_tok_s
        found.engine_s = found.requests * per_request


def all_calls(plan: RunPlan, cells: dict[tuple, Cell], conds: dict[tuple, Any],
              facts: dict[str, Any], judge_cells: list[JudgeCell]) -> list[Calls]:  # fmt: skip
    """Every LLM call of the run (module docstring), engine times not yet filled in."""
    questions = {d: question_chars(f) for d, f in facts.items()}
    return [
        *judge_cell_calls(plan, judge_cells, cells, questions),
        *hallucination_calls(plan, cells),
        *reference_calls(plan, cells),
        *scoring_calls(plan, cells),
        *writer_calls(plan, conds, facts),
    ]


def question_chars(facts: Any) -> float:
    """A dataset's mean question length: its samples' (measured) or ``images.yaml``'s."""
    if facts.prompts_from:
        return sum(len(s.question) for s in facts.prompts_from) / len(facts.prompts_from)
    return float(facts.question_chars)
