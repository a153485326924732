"""Configuration: schemas, defaults, cross-checks and the messages that name the key."""

from __future__ import annotations

import copy
import re

import pytest

from vlmrobust.core.config import (
    ConfigError,
    load_schema,
    load_yaml,
    validate_config,
    validate_registry,
)

from .conftest import REPO


def _config(path="config/config.yaml"):
    return load_yaml(REPO / path)


def _registry():
    return validate_registry(load_yaml(REPO / "config/models.yaml"))


def _walk(schema, path=""):
    """Yield (dotted path, subschema, required) for every key a schema declares."""
    for name, sub in schema.get("properties", {}).items():
        yield f"{path}{name}", sub, name in schema.get("required", [])
        yield from _walk(sub, f"{path}{name}.")
    for sub in schema.get("allOf", []):
        for branch in ("then", "else"):
            if branch in sub:
                yield from _walk(sub[branch], path)
    add = schema.get("additionalProperties")
    if isinstance(add, dict):
        yield from _walk(add, f"{path}<name>.")
    for name, sub in schema.get("$defs", {}).items():
        yield from _walk(sub, f"<{name}>.")


@pytest.mark.parametrize("name", ["config", "models"])
def test_every_key_has_description_and_default(name):
    keys = list(_walk(load_schema(name)))
    assert len(keys) > 10
    # a required key has no default: leaving it out is an error naming it
    missing = [
        k
        for k, sub, required in keys
        if "description" not in sub or ("default" not in sub and not required)
    ]
    assert missing == []


def test_config_readme_explains_every_key():
    readme = (REPO / "config/README.md").read_text()
    leaves = {
        k.rsplit(".", 1)[-1]
        for name in ("config", "models")
        for k, _, _ in _walk(load_schema(name))
    }
    unexplained = sorted(
        k for k in leaves if not re.search(rf"`([\w.<>-]+\.)?{re.escape(k)}`", readme)
    )
    assert unexplained == []


def test_shipped_configs_are_valid_and_filled_with_defaults():
    registry = _registry()
    demo = validate_config(_config(), registry)
    assert demo["conditions"]["corrupt"]["severities"] == [1, 2, 3, 4, 5]
    assert demo["conditions"]["corrupt"]["assignment"] == "random"
    assert len(demo["conditions"]["corrupt"]["methods"]) == 20
    assert demo["datasets"]["demo-chart"]["on_bad_row"] == "skip"
    assert demo["threads"]["variants"] == 1  # the default run's own setting (default 2)
    assert demo["service"] == {
        "default_engines": 1,
        "engines": {},
        "split_cells": False,
        "wait_log_s": 600,
    }
    assert demo["engines"] == "registry"
    assert demo["models"] == ["demo-base", "demo-reasoning"]
    assert demo["datasets"]["demo-chart"]["scorer"] == "generic"
    assert demo["decoding"] == {"max_new_tokens": 64, "temperature": 0.0, "top_p": 1.0, "n": 1}
    assert demo["demo"]["train"]["seed"] == 1000 and demo["demo"]["train"]["enabled"]
    assert demo["demo"]["train"]["weights"]["objects"] == 4
    paper = validate_config(_config("config/paper.yaml"), registry)
    sizes = {n: d["expected_size"] for n, d in paper["datasets"].items()}
    assert sizes == {
        "chartqa": 2500,
        "hallusionbench": 951,
        "infovqa": 2801,
        "mmmu": 900,
        "mmstar": 1500,
        "textvqa": 5000,
        "mathvision": 304,
        "mathvista": 1000,
        "distract-bench": 506,
        "visargs": 1611,
        "imagenet9": 4050,
        "imagenet9-gemini": 4050,
        "imagenet9-sampling": 4050,
        "mathverse": 3152,
        "logicvista": None,
        "waterbirds": None,
    }
    # Table 6 of the paper: 14,956 samples in the eight benchmarks.
    corruption_sets = ("chartqa", "hallusionbench", "infovqa", "mmmu", "mmstar", "textvqa")
    corruption_sets += ("mathvision", "mathvista")
    assert sum(sizes[k] for k in corruption_sets) == 14956
    # CRM (docs/studies/masking.md): both stages, the paper's temperatures and thresholds, its models
    crm = paper["datasets"]["visargs"]
    assert crm["prompts"] == ["crm-cot", "crm-answer"]
    assert crm["conditions"] == ["clean", "mask-specific", "mask-random"]
    assert crm["models"] == ["gemini-1.5-flash", "gpt-4o", "qwen2.5-vl-7b", "llama-3.2-90b-vision"]
    assert crm["scorer"] == "generic"
    masking = paper["masking"]
    assert (masking["cot_temperature"], masking["answer_temperature"]) == (0.2, 0.0)
    assert (masking["step_threshold"], masking["answer_threshold"]) == (0.8, 0.9)
    assert paper["conditions"]["mask-random"]["min_distance"] == 0.05
    assert demo["masking"]["attribution_threshold"] == 0.5
    assert paper["datasets"]["mathvista"]["adapter"] == "mathvista"
    assert paper["datasets"]["mathvista"]["scorer"] == "mathvista"
    tokens = {
        n: d["max_new_tokens"] or paper["decoding"]["max_new_tokens"]
        for n, d in paper["datasets"].items()
    }
    assert tokens == {
        **{n: 4096 for n in sizes},
        "mathvista": 16384,
        "mathvision": 16384,
        "imagenet9": 2048,
        "imagenet9-gemini": 16384,
        "imagenet9-sampling": 2048,
        "waterbirds": 2048,
        "mathverse": 8192,
    }
    assert demo["masking"]["cot_max_new_tokens"] == 64
    assert paper["datasets"]["mathvista"]["prompts"] == [
        "mathvista-cot",
        "mathvista-format",
        "mathvista-solution",
    ]
    groups = {n: d["group"] for n, d in paper["datasets"].items()}
    assert {n for n, g in groups.items() if g == "reasoning"} == {"mathvision", "mathvista"}


def test_registry_pairs():
    models = _registry()["models"]
    reasoning_of_q25 = sorted(m for m, s in models.items() if s["base"] == "qwen2.5-vl-7b")
    assert reasoning_of_q25 == [
        "mm-eureka-qwen-7b",
        "mmr1-7b-rl",
        "openvlthinker-7b",
        "r1-onevision-7b",
        "vision-r1-7b",
    ]
    assert models["qwen3-vl-8b-thinking"]["base"] == "qwen3-vl-8b-instruct"
    assert models["gpt-5"]["backend"] == "openai" and models["gpt-5"]["api_model"] == "gpt-5"
    paper_models = set(_config("config/paper.yaml")["models"])
    # every evaluated model of the registry (the kind: llm entries are the run's judges)
    assert paper_models == {
        m for m, s in models.items() if s["family"] != "demo" and s["kind"] == "vlm"
    }
    demo = {m: s for m, s in models.items() if s["demo_seed"] is not None}
    assert sorted(demo) == ["demo-base", "demo-extra", "demo-reasoning", "demo-vllm"]
    assert demo["demo-reasoning"]["base"] == "demo-base"
    assert len({s["demo_seed"] for s in demo.values()}) == 4
    # the served demo model answers through the server of demo-vllm's checkpoint
    served = models["demo-vllm-served"]
    assert served["backend"] == "openai" and served["api_model"] == "demo-vllm"
    assert served["options"]["tokenizer"] == demo["demo-vllm"]["local_path"]
    assert demo["demo-vllm"]["backend"] == "vllm"
    assert demo["demo-vllm"]["demo_sizes"]["head_dim"] == 32


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c.update(seed="abc"), "key 'seed': 'abc' is not of type 'integer'"),
        (lambda c: c.update(sed=1), "unknown key 'sed'"),
        (
            lambda c: c["datasets"]["demo-chart"].update(limt=3),
            "unknown key 'datasets.demo-chart.limt'",
        ),
        (
            lambda c: c["conditions"]["corrupt"].update(severities=[0]),
            "key 'conditions.corrupt.severities.0': 0 is less than the minimum of 1",
        ),
        (
            lambda c: c["conditions"]["corrupt"].update(severties=[1]),
            "unknown key 'conditions.corrupt.severties'",
        ),
        (
            lambda c: c["conditions"]["corrupt"].update(methods=["fogg"]),
            "key 'conditions.corrupt.methods.0': 'fogg' is not one of",
        ),
        (
            lambda c: c["datasets"]["demo-chart"].update(conditions=["clean", "blur"]),
            "datasets.demo-chart.conditions: unknown condition 'blur'",
        ),
        (lambda c: c.update(models=["no-such-model"]), "unknown model id 'no-such-model'"),
        (
            lambda c: c["datasets"].update({"my-set": {"source": "local", "path": "x"}}),
            "datasets.my-set.adapter: not given, and 'my-set' is not an adapter name",
        ),
        (
            lambda c: c["datasets"].update({"mathvista": {"source": "local"}}),
            "datasets.mathvista.path: source is 'local' but no path is given",
        ),
        (
            lambda c: c["datasets"]["demo-chart"].update(path="results/raw/demo/charts"),
            "demo family 'charts' is not generated",
        ),
        (lambda c: c["demo"].update(n_per_family=0), "key 'demo.n_per_family'"),
        (
            lambda c: c["construct"]["demo-distract"].update(**{"from": ["demo-charts"]}),
            "construct.demo-distract.from: 'demo-charts' is not a dataset of the run",
        ),
        (
            lambda c: c["datasets"]["demo-distract"].update(decisions=5),
            "key 'datasets.demo-distract.decisions': 5 is not of type 'string', 'null'",
        ),
        (
            lambda c: c["decoding"].update(n=5),
            "decoding.n is 5 but decoding.temperature is 0",
        ),
        (
            lambda c: c["datasets"]["demo-chart"].update(prompts=["cot"]),
            "key 'datasets.demo-chart.prompts.0': 'cot' is not one of",
        ),
        (
            lambda c: c["datasets"]["demo-visargs"].update(prompts=["crm-cot"]),
            "datasets.demo-visargs.prompts: a dataset under a mask condition is answered in "
            "two stages; add crm-answer",
        ),
        (
            lambda c: c["datasets"]["demo-visargs"].update(conditions=["mask-random"]),
            "datasets.demo-visargs.conditions: the mask condition 'mask-random' is compared "
            "with 'clean'",
        ),
        (
            lambda c: c["masking"].update(answer_prompt="short"),
            "masking.answer_prompt: 'short' is not built on 'crm-cot'",
        ),
        (
            lambda c: c["masking"].update(cot_prompt="crm"),
            "masking.cot_prompt: unknown prompt 'crm'",
        ),
        (
            lambda c: c["conditions"]["mask-random"].update(region="elsewhere"),
            "key 'conditions.mask-random.region': 'elsewhere' is not one of",
        ),
        (
            lambda c: c["conditions"]["mask-random"].update(min_distance=1.5),
            "key 'conditions.mask-random.min_distance': 1.5 is greater than the maximum of 1",
        ),
        (
            lambda c: c["masking"].update(step_treshold=0.7),
            "unknown key 'masking.step_treshold'",
        ),
        (
            lambda c: c["datasets"]["demo-visargs"].update(path="results/raw/demo/premise"),
            "datasets.demo-visargs.path: demo family 'premise' is not generated",
        ),
        (
            lambda c: c.update(service={"engines": {"demo-bse": 2}}),
            "config: service.engines.demo-bse: 'demo-bse' is not a model of the run (nor of "
            "config/models.yaml), so this count would be ignored. The run's models with "
            "engines (its `models` answered by a local checkpoint, backends hf and vllm): "
            "demo-base, demo-reasoning; the local LLMs its judges name: none",
        ),
        (
            lambda c: c.update(service={"engines": {"demo-extra": 2}}),
            "config: service.engines.demo-extra: 'demo-extra' is not a model of the run (it "
            "is in config/models.yaml, but neither in `models` nor named by a judge)",
        ),
        (
            lambda c: c.update(
                models=[*c["models"], "demo-vllm-served"],
                service={"engines": {"demo-base": 2, "demo-vllm-served": 2}},
            ),
            "config: service.engines.demo-vllm-served: 'demo-vllm-served' is answered "
            "through an API (backend openai), which has no engine jobs, so this count would "
            "change nothing; remove it.",
        ),
    ],
)
def test_bad_config_names_the_key(mutate, message):
    config = copy.deepcopy(_config())
    mutate(config)
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_config(config, _registry())


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda r: r["models"]["vision-r1-7b"].update(base="qwen9"),
            "models.vision-r1-7b.base: unknown model id 'qwen9'",
        ),
        (
            lambda r: r["models"]["vision-r1-7b"].update(base="mmr1-7b-rl"),
            "has role 'reasoning', not 'base'",
        ),
        (
            lambda r: r["models"]["gpt-4o"].update(api_model=None),
            "models.gpt-4o: backend 'openai' needs api_model",
        ),
        (lambda r: r["models"]["gpt-4o"].update(backend="claude"), "key 'models.gpt-4o.backend'"),
        (
            lambda r: r["models"]["gpt-4o"].update(api_key="sk-123"),
            "unknown key 'models.gpt-4o.api_key'",
        ),
    ],
)
def test_bad_registry_names_the_key(mutate, message):
    registry = load_yaml(REPO / "config/models.yaml")
    mutate(registry)
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_registry(registry)


def test_a_mask_condition_on_a_dataset_without_region_boxes_is_refused_naming_who_can_take_it():
    """A mask condition fills a sample's annotated region: on MathVision (no region
    boxes) the check says so at config time, naming the condition, the dataset and the
    datasets that can take it, instead of the variants job failing on meta.b_box."""
    config = copy.deepcopy(_config())
    config["datasets"]["mathvision"] = {
        "conditions": ["clean", "mask-specific"],
        "prompts": ["crm-cot", "crm-answer"],
    }
    with pytest.raises(ConfigError) as err:
        validate_config(config, _registry())
    assert str(err.value) == (
        "config: datasets.mathvision.conditions: the mask condition 'mask-specific' fills "
        "a sample's annotated region (meta.b_box and meta.premise_index), and the samples "
        "of 'mathvision' (adapter 'mathvision') carry none; a mask condition applies to a "
        "dataset whose benchmark record lists them in `meta` (adapter visargs, or a "
        "constructed dataset built from such datasets); of this run's datasets: "
        "demo-visargs"
    )


def test_a_constructed_dataset_takes_a_mask_condition_when_its_sources_carry_regions():
    config = copy.deepcopy(_config())
    config["construct"]["from-premises"] = {"from": ["demo-visargs"]}
    masked = {"conditions": ["clean", "mask-random"], "prompts": ["crm-cot", "crm-answer"]}
    config["datasets"]["premises-distract"] = {
        "adapter": "constructed",
        "source": "local",
        "path": "results/construct/from-premises",
        **masked,
    }
    validate_config(copy.deepcopy(config), _registry())
    config["datasets"]["demo-distract"].update(masked)  # built from demo-diagram, ...
    with pytest.raises(ConfigError, match="the samples of 'demo-distract' .* carry none"):
        validate_config(config, _registry())


def test_the_names_a_schema_allows_are_those_the_wildcards_match():
    """The schemas take their name pattern from vlmrobust.core.paths.NAME, which the
    Snakefile's wildcard constraint of a table or figure name is too: a condition name
    the schema allows cannot make a file name the workflow refuses."""
    from vlmrobust.core.paths import NAME

    for name, keys in (
        ("config", ("datasets", "conditions", "construct")),
        ("models", ("models",)),
    ):
        schema = load_schema(name)
        assert schema["$defs"]["name"]["pattern"] == f"^{NAME}$"
        for key in keys:
            assert schema["properties"][key]["propertyNames"] == {"$ref": "#/$defs/name"}
        raw = load_yaml(REPO / "workflow" / "schemas" / f"{name}.schema.yaml")
        assert "pattern" not in raw["$defs"]["name"]  # the file gives none of its own
    assert re.search(r"^    name=paths\.NAME,$", (REPO / "Snakefile").read_text(), flags=re.M)
    for allowed in ("corrupt-s3", "corrupt.v2", "c_1"):
        assert re.fullmatch(NAME, f"table1_{allowed}")
    config = copy.deepcopy(_config())
    config["conditions"]["bad/name"] = {"perturbation": "none"}
    with pytest.raises(ConfigError, match=r"key 'conditions': 'bad/name' does not match"):
        validate_config(config, _registry())


def test_schema_enums_match_the_package_registries():
    from vlmrobust.data import ADAPTERS
    from vlmrobust.perturb import CORRUPTION_METHODS, PERTURBATIONS

    schema = load_schema("config")["$defs"]
    adapters = {a for a in schema["dataset"]["properties"]["adapter"]["enum"] if a}
    assert adapters == set(ADAPTERS)
    assert set(schema["condition"]["properties"]["perturbation"]["enum"]) == set(PERTURBATIONS)
    corruption = schema["condition"]["allOf"][0]["then"]["properties"]
    assert corruption["methods"]["default"] == list(CORRUPTION_METHODS)


def test_strings_from_the_command_line_are_read_as_yaml_where_no_string_is_expected():
    # snakemake --config 'demo={n_per_family: 3}' hands '3' over as a string.
    config = _config()
    config["demo"] = {"n_per_family": "3", "families": "[chart, text]"}
    config["conditions"]["corrupt"]["severities"] = ["1", "5"]
    config["datasets"] = {"mathvista": {"split": "2023", "limit": "7", "conditions": ["clean"]}}
    config["construct"] = {}
    config["idis"]["blocking"]["datasets"] = None  # the demo's is not in this run
    config = validate_config(config, _registry())
    assert config["demo"]["n_per_family"] == 3
    assert config["demo"]["families"] == ["chart", "text"]
    assert config["conditions"]["corrupt"]["severities"] == [1, 5]
    assert config["datasets"]["mathvista"]["limit"] == 7
    assert config["datasets"]["mathvista"]["split"] == "2023"  # declared a string: kept
    config["demo"]["n_per_family"] = "three"
    with pytest.raises(
        ConfigError, match="key 'demo.n_per_family': 'three' is not of type 'integer'"
    ):
        validate_config(config, _registry())


# --- reviewers: imports without images, verdicts-only imports ---------------------------------

DB = "tests/fixtures/distract-bench"


def _reviewer_config(**dataset):
    """Two models on Distract-Bench's distracted images; Qwen's outputs imported, R1-OneVision's
    verdicts only (the release has verdicts for 8 models, outputs for 3)."""
    return {
        "models": ["qwen2.5-vl-7b", "r1-onevision-7b"],
        "conditions": {
            "clean": {"perturbation": "none"},
            "distracted": {"perturbation": "distraction"},
        },
        "datasets": {
            "distract-bench": {
                "source": "local",
                "path": DB,
                "images": False,
                "conditions": ["distracted"],
                **dataset,
            }
        },
        "imports": [
            {
                "model": "qwen2.5-vl-7b",
                "dataset": "distract-bench",
                "condition": "distracted",
                "path": f"{DB}/model_outputs/Qwen__Qwen2.5-VL-7B-Instruct.samples.jsonl",
            },
            {
                "model": "r1-onevision-7b",
                "dataset": "distract-bench",
                "condition": "distracted",
                "references": f"{DB}/model_outputs/Fancy-MLLM__R1-Onevision-7B.reference.jsonl",
            },
        ],  # fmt: skip
    }


def test_verdicts_only_imports_in_the_run_plan(monkeypatch):
    from vlmrobust.plan import RunPlan, data, inference, judges, scoring

    monkeypatch.chdir(REPO)
    from vlmrobust.studies import STUDIES

    plan = RunPlan(validate_config(_reviewer_config(), _registry()), _registry()["models"])
    assert plan.datasets["distract-bench"]["images"] is False
    assert list(plan.output_imports) == ["qwen2.5-vl-7b/distract-bench/distracted/default"]
    assert list(plan.verdict_imports) == ["r1-onevision-7b/distract-bench/distracted/default"]
    assert inference.output_files(plan, "r1-onevision-7b") == [] and scoring.scored_files(plan) == [
        "results/scored/qwen2.5-vl-7b/distract-bench/distracted/default.csv"
    ]
    assert "results/judged/r1-onevision-7b/distract-bench/distracted/default.jsonl" in (
        judges.judged_files(plan)
    )
    study = STUDIES["distraction"]
    assert study.scopes(plan) == ["distract-bench"]  # without a clean condition too
    spec = study.spec(plan, "distract-bench")
    assert spec["verdicts_only"] == ["r1-onevision-7b"]
    inputs = study.inputs(plan, "distract-bench")
    assert inputs["scored"] == scoring.scored_files(plan)
    assert len(inputs["judged"]) == 2
    # images: false reads no image file of the folder
    assert all(
        p.endswith((".jsonl", ".json", ".parquet"))
        for p in data.samples_sources(plan, "distract-bench")
    )


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda c: c["imports"][1].update(references=None),
            "imports.1.path: no released outputs file; give `path`, or `references`",
        ),
        (
            lambda c: c["imports"][1].update(released_labels=True),
            "imports.1.released_labels: there is no released outputs file",
        ),
        (
            lambda c: (
                c["conditions"].update(corrupt={"perturbation": "corruption"}),
                c["datasets"]["distract-bench"].update(conditions=["distracted", "corrupt"]),
                c["imports"][1].update(condition="corrupt"),
            ),
            "imports.1: a verdicts-only import (references, no path) stands for the judged "
            "outputs of a distraction condition; 'corrupt' is a 'corruption' condition",
        ),
        (
            lambda c: c["models"].append("mm-eureka-qwen-7b"),
            "datasets.distract-bench.images is false (samples without images), so no model "
            "can run on it, but mm-eureka-qwen-7b / distracted / default is not imported",
        ),
        (
            lambda c: c["datasets"]["distract-bench"].update(conditions=["distracted", "clean"]),
            "but qwen2.5-vl-7b / clean / default is not imported",
        ),
        (
            lambda c: c.update(
                construct={"x": {"from": ["distract-bench"]}},
            ),
            "datasets.distract-bench.images is false, but construct.x edits its images",
        ),
    ],
)
def test_bad_reviewer_config_names_the_key(mutate, message):
    config = _reviewer_config()
    mutate(config)
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_config(config, _registry())
