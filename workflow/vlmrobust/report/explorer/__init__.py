"""The explorer: a static site under ``results/explorer/`` that shows, for every model x
dataset x perturbed condition (and prompt setting), which samples' answers flipped
against the clean condition (right -> wrong, ``lost``; wrong -> right, ``gained``) and,
for any one sample, the images it was shown (with the masked or distractor boxes), the
question, the answer, the model's full output and the judges' verdicts.

The site opens from the file system (``file://``: no server, no network): the page
(``assets/``) loads its data as script files, each handing one JSON payload to
``EXPLORER.put`` (:mod:`.data`). The data is built per folder by one job each:

* :mod:`.variants` — one (dataset, condition): its variants, thumbnails and boxes;
* :mod:`.cells` — one (model, dataset, condition, prompt): the scored rows with their
  flip class, the full texts and the judges;
* :mod:`.site` — the index over every cell and variants folder and the app itself;
* :mod:`.links` — the links from the study tables' cells into the explorer.

Every path in a data file is relative to ``results/explorer/``; a full image is linked
(never copied) only when it lies under ``results/``.
"""

from __future__ import annotations

from .cells import COLUMNS, FLIPS, build_cell, flip_class, judge_files, short_verdict
from .data import MAX_FILE_BYTES, PART_BYTES, js_payload, key_chunk, write_js
from .variants import THUMB_SIDE, build_variants, facets, full_image, image_boxes

__all__ = [
    "COLUMNS",
    "FLIPS",
    "MAX_FILE_BYTES",
    "PART_BYTES",
    "THUMB_SIDE",
    "build_cell",
    "build_variants",
    "facets",
    "flip_class",
    "full_image",
    "image_boxes",
    "js_payload",
    "judge_files",
    "key_chunk",
    "short_verdict",
    "write_js",
]
