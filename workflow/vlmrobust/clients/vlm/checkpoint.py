"""What exactly a local checkpoint is: shared by the backends that load one (hf, vllm).

A row's ``model_revision`` must change when the weights change, so a rerun never reuses
an answer of other weights: a hub commit when the registry pins or resolves one, the
build record's weights hash for a checkpoint this workflow built (the demo models), the
commit a Hugging Face cache folder is named by, or else a sha256 of the weight files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from pathlib import Path
from typing import Any

_COMMIT = re.compile(r"^[0-9a-f]{40}$")

#: A local checkpoint built by this workflow (the embedded demo models) carries this
#: build record; its ``weights_sha256`` is the checkpoint's revision.
BUILD_RECORD = "vlmrobust_demo.json"


#: transformers' classes the local backends and text engines load a checkpoint with
TRANSFORMERS_CLASSES = (
    "AutoConfig",
    "AutoModelForCausalLM",
    "AutoModelForImageTextToText",
    "AutoProcessor",
    "AutoTokenizer",
    "GenerationConfig",
)


def import_transformers() -> None:
    """Resolve transformers' lazily imported classes in this thread, before an engine's
    cell threads start. Its lazy module is not safe to import from two threads at once:
    a cell building its prompts (the harness's task code imports transformers) while
    another loads the model failed the load with "cannot import name 'AutoProcessor'"
    (the stand-in cluster run, 2026-12-06). Without transformers, nothing to do."""
    with contextlib.suppress(ImportError):
        import transformers

        for name in TRANSFORMERS_CLASSES:
            with contextlib.suppress(ImportError, AttributeError):
                getattr(transformers, name)


def release_memory() -> None:
    """Give back the memory of a model just dropped (its last reference deleted): a
    garbage collection, and CUDA's cached blocks where there is a GPU. Never raises."""
    with contextlib.suppress(Exception):
        import gc

        import torch

        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def read_build_record(model_dir: Path) -> dict[str, Any] | None:
    """The build record of a local checkpoint directory, or None when it has none."""
    path = Path(model_dir) / BUILD_RECORD
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def local_revision(model_dir: str | Path, fallback: str | None = None) -> str:
    """The revision of the checkpoint in ``model_dir`` (see the module docstring);
    ``fallback`` (or ``unknown``) when the folder holds no weight file."""
    model_dir = Path(model_dir)
    record = read_build_record(model_dir)
    if record and record.get("weights_sha256"):
        return f"sha256:{record['weights_sha256'][:16]}"
    m = re.search(r"[/\\]snapshots[/\\]([0-9a-f]{40})(?:[/\\]|$)", str(model_dir))
    if m:  # a directory inside the Hugging Face cache names its commit
        return m.group(1)
    files = sorted(model_dir.glob("*.safetensors")) or sorted(model_dir.glob("*.bin"))
    if not files:
        return str(fallback or "unknown")
    h = hashlib.sha256()
    for path in files:
        h.update(path.name.encode() + b"\0")
        with open(path, "rb") as fh:
            while block := fh.read(1 << 22):
                h.update(block)
    return f"sha256:{h.hexdigest()[:16]}"


def hub_commit(repo: str, revision: str | None, offline: bool = False) -> str | None:
    """The commit a hub ``revision`` (None = default branch) points to, when known.

    Asks the hub through transformers (which records the answer in the cache), then
    falls back to the local cache's snapshot of ``config.json``; None when neither knows.
    """
    if revision and _COMMIT.match(revision):
        return revision
    with contextlib.suppress(Exception):
        from transformers.utils.hub import resolve_revision

        resolved = getattr(
            resolve_revision(repo, revision, local_files_only=offline), "resolved", None
        )
        if resolved and _COMMIT.match(str(resolved)):
            return str(resolved)
    with contextlib.suppress(Exception):
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(repo, "config.json", revision=revision)
        if isinstance(cached, str):
            m = re.search(r"[/\\]snapshots[/\\]([0-9a-f]{40})[/\\]", cached)
            if m:
                return m.group(1)
    return None
