"""A local dataset folder's images are inputs of the `samples` job (issue "No silent wrong
numbers", item 8), through their listing: fixing a broken image must rerun the samples and
everything after."""

from __future__ import annotations

from vlmrobust.plan import RunPlan, data

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
    assert data.samples_sources(plan, "mathvista") == [*rows, "results/listings/mathvista.tsv"]
    listing, images = data.image_listing(plan, "mathvista")
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


def test_datasets_from_two_local_folders_build_one_dag(tmp_path):
    """Every listing is written before the DAG is built. Written by the input function
    instead, the second dataset's listing was missed (Snakemake had already cached what
    ``results/listings/`` holds): ``MissingInputException ... results/listings/b.tsv``."""
    import subprocess
    import sys

    import yaml

    datasets = {}
    for name in ("a", "b", "c"):
        root = tmp_path / "data" / name
        (root / "images").mkdir(parents=True)
        (root / "test.jsonl").write_text("{}\n")
        (root / "images" / "1.png").write_bytes(b"x")
        datasets[name] = {"adapter": "mathvision", "source": "local", "path": str(root),
                          "models": [], "conditions": ["clean"]}  # fmt: skip
    config = {
        "model_registry": str(REPO / "config/models.yaml"),
        "models": [],
        "conditions": {"clean": {"perturbation": "none"}},
        "datasets": datasets,
    }
    work = tmp_path / "run"
    work.mkdir()
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    targets = [f"results/samples/{name}/samples.jsonl" for name in datasets]
    snakemake = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(work)]
    proc = subprocess.run(
        [*snakemake, *targets, "-n", "--cores", "1", "--configfile", str(work / "config.yaml")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in datasets:
        listing = work / "results" / "listings" / f"{name}.tsv"
        assert listing.read_text().splitlines()[1].startswith(str(tmp_path / "data" / name))
