"""A local dataset folder's images are inputs of the `samples` job (issue "No silent wrong
numbers", item 8), through their listing: fixing a broken image must rerun the samples and
everything after."""

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
    plan = RunPlan.from_config(config)
    rows = sorted(str(root / name) for name in ("testmini.parquet", "rows.jsonl", "meta.json"))
    # the images stand in one listing among the inputs (the rules keep it up to date)
    assert plan.samples_sources("mathvista") == [*rows, "results/listings/mathvista.tsv"]
    listing, images = plan.image_listing("mathvista")
    assert listing == "results/listings/mathvista.tsv"
    assert images == sorted(
        str(root / name)
        for name in ("images/1.png", "images/2.JPG", "images/3.jpeg", "images/nested/4.webp")
    )


def test_the_image_listing_changes_when_an_image_is_edited_added_or_removed(tmp_path):
    import os

    from vlmrobust.core.workflow import update_listing

    (tmp_path / "images").mkdir()
    image = tmp_path / "images" / "1.png"
    image.write_bytes(b"x")
    listing = tmp_path / "listing.tsv"
    assert update_listing(listing, [str(image)])
    text = listing.read_text()
    assert text.splitlines() == ["path\tbytes\tmtime_ns", f"{image}\t1\t{image.stat().st_mtime_ns}"]
    assert not update_listing(listing, [str(image)])  # unchanged: not rewritten
    st = image.stat()
    image.write_bytes(b"y")  # the same size, a later time
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert update_listing(listing, [str(image)])
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns))  # put back: the old text again
    assert update_listing(listing, [str(image)]) and listing.read_text() == text
    added = tmp_path / "images" / "2.png"
    added.write_bytes(b"z")
    assert update_listing(listing, [str(image), str(added)])
    assert update_listing(listing, [str(image)]) and listing.read_text() == text
