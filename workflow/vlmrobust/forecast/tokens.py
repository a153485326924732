"""Tokens of a request: its prompt (text, vision, a first stage's answer) and what the
model generates.

- **Text**: the prompt the inference job would build (:func:`vlmrobust.core.prompts.
  build_prompt`, the system prompt included) for up to
  :data:`~vlmrobust.forecast.counts.MAX_PROMPTS` samples or variants, counted by the
  model's own tokenizer where a local checkpoint has a ``tokenizer.json`` (the
  tokenizers library; no model is loaded), else at :data:`CHARS_PER_TOKEN` characters
  per token; plus the chat template's own tokens
  (:data:`TEMPLATE_TOKENS`, :data:`IMAGE_MARKER_TOKENS` per image). Before the samples
  exist the question is ``images.yaml``'s length of filler text.
- **Vision**: every image's size under the model's processor rule and pixel limits
  (:mod:`vlmrobust.core.vision_tokens`; a dataset's ``pixels`` setting replaces the
  registry's limits where it sets any); a dataset's ``image_size`` shows every image
  at that square (a ``resize`` variant keeps its own).
- **Context**: a second-stage prompt (CRM's final answer) carries the model's own
  first-stage answer: that cell's generated tokens.
- **Generated**: a pilot run's measured mean (``--pilot``: the outputs' own
  ``completion_tokens``), else ``generation.yaml``'s rule; capped by the request's
  ``max_new_tokens``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from statistics import fmean

from ..core.benchmarks import BENCHMARKS
from ..core.io import iter_jsonl
from ..core.prompts import DEFAULT_PROMPT, PROMPTS, build_prompt, default_prompt
from ..core.records import Sample, Variant
from ..core.vision_tokens import image_tokens, processor_of
from ..plan import RunPlan, inference
from .counts import MAX_PROMPTS, ConditionFacts, DatasetFacts, spread
from .tables import MissingEntry, generated_rule

#: the common estimate of English text: about four characters per token (what OpenAI's
#: tokenizer guide states); measured against the demo run in docs/forecast.md
CHARS_PER_TOKEN = 4.0
#: a Qwen-VL chat template around one user turn (its default system turn, the role
#: markers, the assistant's opening): counted by a local tokenizer where there is one,
#: else :data:`TEMPLATE_TOKENS` (what the text is in Qwen2's tokenizer: each special
#: token and each word one token); and the vision start/end markers of each image
TEMPLATE_TEXT = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "<|im_end|>\n<|im_start|>assistant\n"
)
TEMPLATE_TOKENS = 20
IMAGE_MARKER_TOKENS = 2


# --------------------------------------------------------------------------- text


def _prompt_text(sample: Sample, variant: Variant, prompt: str, adapter: str) -> str:
    name = default_prompt(adapter, sample) if prompt == DEFAULT_PROMPT else prompt
    needs = PROMPTS[name].needs if name in PROMPTS else None
    built = build_prompt(sample, variant, name, "" if needs else None)
    return (built.system or "") + built.text


def _variant_of(sample: Sample, condition: str) -> Variant:
    return Variant(
        sample.sample_id, sample.sample_id, sample.dataset, condition, "none",
        list(sample.images), [], sample.question,
    )  # fmt: skip


#: English-like filler for a question not yet read (a tokenizer counts it as text)
FILLER = "Which value does the figure show for the second part of the question? "


def _stand_in(plan: RunPlan, dataset: str, chars: float) -> Sample:
    """A sample of ``chars`` characters of question, for a prompt before the samples."""
    adapter = plan.datasets[dataset]["adapter"]
    record = BENCHMARKS.get(adapter)
    answer_type = record.answer_types[0] if record else "text"
    choices = ["a", "b", "c", "d"] if answer_type == "letter" else []
    question = (FILLER * (int(chars) // len(FILLER) + 1))[: int(chars)]
    return Sample(f"{dataset}_0", dataset, [], question, "a", answer_type, choices)


def prompt_texts(
    plan: RunPlan, facts: DatasetFacts, cond: ConditionFacts, prompt: str
) -> tuple[list[str], str]:
    """The prompt texts (system and user text) of a condition's requests and how they
    are known: built for its variants (measured manifest), else for its samples, else
    for a stand-in of the assumed question length."""
    adapter = plan.datasets[facts.name]["adapter"]
    if cond.variants_from is not None and facts.prompts_from is not None:
        by_id = {s.sample_id: s for s in facts.prompts_from}
        pairs = [(by_id[v.sample_id], v) for v in cond.variants_from if v.sample_id in by_id]
        if pairs:
            texts = [_prompt_text(s, v, prompt, adapter) for s, v in pairs]
            return texts, "measured: built for the variants"
    if facts.prompts_from:
        texts = [
            _prompt_text(s, _variant_of(s, cond.condition), prompt, adapter)
            for s in spread(facts.prompts_from, MAX_PROMPTS)
        ]
        return texts, "measured: built for the samples"
    sample = _stand_in(plan, facts.name, facts.question_chars)
    try:
        text = _prompt_text(sample, _variant_of(sample, cond.condition), prompt, adapter)
    except (ValueError, KeyError, TypeError):
        text = sample.question
    return [text], "assumed: images.yaml question length + the prompt's instruction"


@cache
def _tokenizer(folder: str):
    """The ``tokenizer.json`` of a local checkpoint folder (the tokenizers library: no
    model is loaded), or None."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def text_tokens(plan: RunPlan, model: str, texts: list[str]) -> tuple[float, str]:
    """Mean tokens of ``texts`` and the chat template for ``model``: its own tokenizer
    where a local checkpoint has one, else :data:`CHARS_PER_TOKEN` characters per token
    and :data:`TEMPLATE_TOKENS`."""
    folder = plan.registry[model].get("local_path")
    tokenizer = _tokenizer(str(Path(folder).resolve())) if folder else None
    if tokenizer is not None:
        encoded = tokenizer.encode_batch([TEMPLATE_TEXT, *texts], add_special_tokens=False)
        template, counts = len(encoded[0].ids), [len(e.ids) for e in encoded[1:]]
        return fmean(counts) + template, f"{model}'s tokenizer (template {template})"
    chars = fmean(len(t) for t in texts)
    return chars / CHARS_PER_TOKEN + TEMPLATE_TOKENS, f"{CHARS_PER_TOKEN:g} chars per token"


# --------------------------------------------------------------------------- vision


def vision_tokens(plan: RunPlan, model: str, cond: ConditionFacts) -> float:
    """Mean vision tokens of one request of ``cond`` for ``model`` (all its images), at
    the dataset's pixel limits for the model (``pixels: harness``) where it sets any,
    else the registry's."""
    processor = processor_of(
        plan.registry[model], inference.pixel_limits(plan, model, cond.dataset)
    )
    if processor is None:
        family = plan.registry[model].get("family")
        raise MissingEntry(
            f"core/vision_tokens.py: PROCESSORS has no rule for family {family!r} (model {model})"
        )
    side = plan.datasets[cond.dataset]["image_size"]
    resized = plan.conditions[cond.condition]["perturbation"] != "resize"
    sizes = [(side, side)] if side and resized else cond.sizes
    if not sizes:
        return 0.0
    per_image = fmean(image_tokens(s, processor) for s in sizes)
    return per_image * cond.images_per_variant


# --------------------------------------------------------------------------- generated


@dataclass(frozen=True)
class Pilot:
    """Mean generated tokens measured in a pilot run's outputs, by (model, dataset,
    condition, prompt), with the coarser means a cell falls back on."""

    means: dict[tuple[str, ...], tuple[float, int]]
    folder: str

    def lookup(self, model: str, dataset: str, condition: str, prompt: str):
        """(mean, rows, level) of the most specific key measured, else None."""
        for key, level in (
            ((model, dataset, condition, prompt), "model, dataset, condition, prompt"),
            ((model, dataset, prompt), "model, dataset, prompt"),
            ((model, dataset), "model, dataset"),
        ):
            if key in self.means:
                return (*self.means[key], level)
        return None


def _prompt_setting(path: Path, root: Path) -> str | None:
    """The prompt setting an outputs file is for, from its place under ``root``
    (``<model>/<dataset>/<condition>/<prompt>.jsonl`` or its shards'
    ``<prompt>/shard<i>of<n>.jsonl``): a row names the builder it used, which for the
    ``default`` setting is the sample's own (``short``, ``mcq``, ...)."""
    parts = path.relative_to(root).parts
    if len(parts) == 4:
        return path.stem
    if len(parts) == 5 and parts[-1].startswith("shard"):
        return parts[3]
    return None


def read_pilot(folder: str | Path) -> Pilot:
    """Every answered output row under ``folder`` (``results/outputs``: gathered files
    and shards, each row counted once by model and key); error rows and rows without a
    ``completion_tokens`` are left out."""
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"--pilot: {root} is not a folder of outputs files")
    seen: set[tuple[str, str, str, str, str]] = set()
    sums: dict[tuple[str, ...], list[float]] = defaultdict(lambda: [0.0, 0])
    for path in sorted(root.rglob("*.jsonl")):
        setting = _prompt_setting(path, root)
        for _, row in iter_jsonl(path):
            tokens = row.get("completion_tokens")
            if row.get("error") or not isinstance(tokens, int):
                continue
            m, d, c = (str(row.get(k)) for k in ("model", "dataset", "condition"))
            p = setting or str(row.get("prompt"))
            if (m, d, c, p, str(row.get("key"))) in seen:
                continue
            seen.add((m, d, c, p, str(row.get("key"))))
            for key in ((m, d, c, p), (m, d, p), (m, d)):
                sums[key][0] += tokens
                sums[key][1] += 1
    if not seen:
        raise ValueError(f"--pilot: no answered output rows (with completion_tokens) under {root}")
    return Pilot({k: (s / n, int(n)) for k, (s, n) in sums.items()}, str(root))


def generated_tokens(
    plan: RunPlan, model: str, dataset: str, condition: str, prompt: str, pilot: Pilot | None
) -> tuple[float, str, str]:
    """(mean generated tokens, how, source) of one request of a cell."""
    cap = inference.stage_decoding(plan, prompt, dataset)[1]
    found = pilot.lookup(model, dataset, condition, prompt) if pilot else None
    if found is not None:
        mean, rows, level = found
        return mean, "measured", f"pilot {pilot.folder}: {rows} rows ({level})"
    entry = plan.registry[model]
    rule = generated_rule(
        {
            "benchmark": plan.datasets[dataset]["adapter"],
            "role": "reasoning" if entry.get("role") == "reasoning" else "direct",
            "family": entry.get("family"),
            "model": model,
            "prompt": prompt,
        }
    )
    if rule.tokens > cap:
        return float(cap), "assumed", f"{rule.source}; capped at max_new_tokens {cap}"
    return rule.tokens, "assumed", rule.source
