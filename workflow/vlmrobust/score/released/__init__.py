"""Importers of released results (lmms-eval, VLMEvalKit) into output rows, and rescoring.

Released runs are rescored with this project's rules; a correctness label in the file
(lmms-eval's ``llm_as_judge_eval.true_false``, VLMEvalKit's ``hit``/``score``) is never
copied — the released Distract-Bench labels are demonstrably wrong in places (a
``\\boxed{B}`` for target B marked False).

The questions are samples keyed by the dataset's own id (``meta["source_id"]``): the
samples stage's samples, or a dataset's rows in its hub schema converted without images
by :func:`vlmrobust.data.released.load_questions` (the ``vlmrobust score-released``
command does that); this package reads no dataset itself.

- :func:`import_lmms_eval` reads an lmms-eval ``*_samples_*.jsonl``: the id is
  ``doc_id`` (or another field, a dotted path reaching into nested ones, e.g.
  ``llm_as_judge_eval.question_id`` — plain lmms-eval numbers ``doc_id`` by row
  position, the released Distract-Bench files by the public id), the response is ``filtered_resps`` (a string, or the
  first string of a possibly nested list), else ``resps``; ``token_counts`` gives
  the completion tokens.
- :func:`import_vlmevalkit` reads a VLMEvalKit prediction file (``xlsx`` when openpyxl
  is installed, ``tsv``, ``csv``, ``json``, ``jsonl``; columns ``index``, ``question``,
  ``answer``, ``prediction``, optionally ``thinking``): the id is ``id`` when the file
  has such a column whose values are the dataset's ids (MMMU), else ``index``.
- :func:`import_jsonl` reads any JSONL of responses (format ``jsonl``, e.g. the
  released Idis outputs: several sampled responses per question): each row holds a
  question id naming a VARIANT of the condition's manifest (or a sample, by its
  ``sample_id`` or ``meta["source_id"]``, that has exactly one variant there, as on the
  clean condition), the response text and optionally the reasoning trace, the draw, the
  condition and the reasoning length; the fields are named by the ``imports`` entry
  (:func:`import_outputs`). Its rows keep their draw (``key`` = ``<variant_id>#<draw>``).
- :func:`score_released` imports a file, scores it and writes a CSV (``sample_id`` =
  the dataset's own id, ``prediction``, ``correct`` 0/1, ``score``, ``method``,
  ``rule``, ``reason``, ...).

Imported rows have ``prompt == "released"``, ``prompt_version`` = the format,
``backend`` = the format, ``source`` = the format, ``draw == 0`` (``jsonl``: the
row's draw), no image hashes (the released files do not say which image bytes were
used) and ``finish_reason "unknown"``.

Command line: ``vlmrobust score-released --format lmms-eval --dataset distract-bench
--questions questions.jsonl --samples model.samples.jsonl --out x.csv``.

One module per release format: :mod:`.lmms_eval`, :mod:`.vlmevalkit`,
:mod:`.keyed_json` (MathVista, LogicVista) and :mod:`.jsonl`; what they share (the
question of a row, the output row it becomes) is :mod:`.common`, the format names and
reading a file of any of them :mod:`.formats`. Rescoring one file is :mod:`.rescore`,
the ``imports`` entries of a run :mod:`.imports`. The public names are importable
from this package.
"""

from .common import NO_RESPONSE, TURN_MARKERS, model_turn
from .formats import FORMATS, IMPORT_FORMATS
from .imports import import_outputs, released_labels, use_released_correctness
from .jsonl import import_jsonl
from .keyed_json import KEYED_FORMATS, import_keyed_json
from .lmms_eval import import_lmms_eval
from .rescore import ReleasedRows, format_released_summary, released_summary, score_released
from .vlmevalkit import VLMEVALKIT_FAIL, import_vlmevalkit

__all__ = [
    "FORMATS",
    "IMPORT_FORMATS",
    "KEYED_FORMATS",
    "NO_RESPONSE",
    "TURN_MARKERS",
    "VLMEVALKIT_FAIL",
    "ReleasedRows",
    "format_released_summary",
    "import_jsonl",
    "import_keyed_json",
    "import_lmms_eval",
    "import_outputs",
    "import_vlmevalkit",
    "model_turn",
    "released_labels",
    "released_summary",
    "score_released",
    "use_released_correctness",
]
