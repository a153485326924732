"""A local dataset folder's images are inputs of the `samples` job (issue "No silent wrong
numbers", item 8): fixing a broken image must rerun the samples and everything after."""

from __future__ import annotations

from vlmrobust.plan import RunPlan

from .conftest import REPO


def test_local_folder_lists_rows_and_images(tmp_path):
    root = tmp_path / "mathvista"
    (root / "images" / "nested").mkdir(parents=True)
    for name in (
        "testmini.parquet",
        "rows.jsonl",
        "meta.json",
        "images/1.png",
        "images/2.JPG",
        "images/3.jpeg",
        "images/nested/4.webp",
        "README.md",
        "images/notes.txt",
    ):
        (root / name).write_bytes(b"x")
    config = {
        "model_registry": str(REPO / "config/models.yaml"),
        "datasets": {"mathvista": {"source": "local", "path": str(root)}},
    }
    sources = RunPlan.from_config(config).samples_sources("mathvista")
    assert sources == sorted(
        str(root / name)
        for name in (
            "testmini.parquet",
            "rows.jsonl",
            "meta.json",
            "images/1.png",
            "images/2.JPG",
            "images/3.jpeg",
            "images/nested/4.webp",
        )
    )
