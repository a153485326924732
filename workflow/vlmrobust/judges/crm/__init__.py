"""Contrastive Region Masking (docs/studies/masking.md).

The study compares, per (model, sample), the chain of thought (CoT) and the final
answer a model gives on the original image with those it gives on a masked image
(the premise's box filled: ``mask-specific``; a same-size box elsewhere:
``mask-random``; :mod:`vlmrobust.perturb.masking`).

Modules
    :mod:`.steps`   splitting a chain into steps, the optimal step alignment, the
                    step and answer similarities (all-MiniLM-L6-v2), region
                    attribution — pure functions, unit-tested by hand.
    :mod:`.judge`   the hallucination judges: an LLM with strict JSON, and an offline
                    one (similarity of masked-chain steps to the masked premise).
    :mod:`.stage`   the comparison stage: outputs of both stages (CoT, answer) on the
                    clean and the masked variants -> one *compared row* per sample.

A compared row (one JSON line of ``results/compared/<model>/<dataset>/<condition>.jsonl``)::

    sample_id, variant_id, dataset, condition, model
    region              "specific" | "random"
    premise_index       int: the visual premise the sample asks about
    premise             str: its text (the sample's answer)
    masked_content      [str]: the premises whose box the mask covers (>= half of the
                        premise's box); [] when it covers no annotated region
    box, target_box     [x0, y0, x1, y1] pixels: the filled box, the premise's box
    image, masked_image paths of the original and the masked image; mask = the mask file
    original_steps, masked_steps   [str]
    alignment           [{"original": i | None, "masked": j | None,
                          "similarity": float | None,
                          "status": "unchanged" | "modified" | "disappeared" | "new"}]
                        in original-step order, then the new masked steps
    n_unchanged, n_modified, n_disappeared, n_new   int
    step_similarity     mean similarity of the matched pairs (None when none matched)
    step_disrupted      bool: any step modified, disappeared or new
    original_answer, masked_answer  str
    answer_similarity   float; answer_flipped: bool (similarity < answer threshold)
    dependent_steps     [i]: original steps that use the premise (similarity to the
                        premise >= the attribution threshold)
    region_attribution  "correct" | "partial" | "incorrect"
    hallucinated        bool | None (None: the judge failed; ``hallucination_error`` says why)
    hallucination_judge, hallucination_evidence, hallucination_reason   str
                        (these five come from the hallucination judge's own file,
                        ``results/judged-hallucination/...``, joined by the metrics)
    error               str | None: why the row could not be compared (missing or
                        failed output); such rows count in no rate and are reported
"""

#: the keys of the config's ``masking`` block the comparison stage reads
SPEC_KEYS = ("step_threshold", "answer_threshold", "attribution_threshold", "model_dir")

__all__ = ["SPEC_KEYS"]
