"""What the run plan makes of the Idis settings: per-dataset sampling and image size,
the files a condition's variants job reads, the MathVerse judge's files."""

from __future__ import annotations

import copy
import os

import pytest

from vlmrobust.core import paths
from vlmrobust.core.config import ConfigError, load_yaml
from vlmrobust.plan import CellKey, RunPlan, data, inference, judges
from vlmrobust.plan import idis as plan_idis

from .conftest import REPO


@pytest.fixture(scope="module")
def config():
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        yield load_yaml("config/config.yaml")
    finally:
        os.chdir(cwd)


def _plan(config, changes=()):
    """The plan of ``config`` with ``changes``: (("datasets", "d", "n"), 3) pairs."""
    c = copy.deepcopy(config)
    for path, value in changes:
        *keys, last = path
        node = c
        for k in keys:
            node = node.setdefault(k, {})
        node[last] = value
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        return RunPlan.from_config(c)
    finally:
        os.chdir(cwd)


def test_a_dataset_samples_with_its_own_settings(config):
    plan = _plan(config)
    idis = inference.infer_spec(plan, "demo-base", "demo-idis-perception", "idis-perception")
    assert (idis["n"], idis["temperature"], idis["top_p"]) == (5, 0.7, 0.95)
    assert idis["image_size"] == 512
    other = inference.infer_spec(plan, "demo-base", "demo-chart", "default")
    assert (other["n"], other["temperature"], other["top_p"]) == (1, 0.0, 1.0)
    assert "image_size" not in other  # the field is only sent where it is set
    math = inference.infer_spec(plan, "demo-base", "demo-idis-math", "idis-math")
    assert "image_size" not in math and math["n"] == 5


def test_draws_at_temperature_zero_are_refused_naming_the_dataset(config):
    with pytest.raises(ConfigError, match=r"datasets\.demo-idis-math: 5 draws per question"):
        _plan(config, [(("datasets", "demo-idis-math", "temperature"), 0.0)])


def test_sampling_settings_do_not_rebuild_the_samples(config):
    a = data.samples_spec(_plan(config), "demo-idis-perception")
    b = data.samples_spec(
        _plan(config, [(("datasets", "demo-idis-perception", "n"), 3)]), "demo-idis-perception"
    )
    assert a == b


def test_condition_inputs_name_pools_decisions_and_demo_assets(config):
    plan = _plan(config)
    assert data.condition_inputs(plan, "idis-diagram") == [
        "results/samples/demo-idis-tables/samples.jsonl",
        "results/samples/demo-idis-figures/samples.jsonl",
    ]
    assert data.condition_inputs(plan, "idis-objects") == ["results/raw/demo-idis/summary.json"]
    # the writer's prompt file: edited in place, it reruns the condition
    assert data.condition_inputs(plan, "idis-textual") == [
        "resources/idis/textual-distractor-prompt.txt"
    ]
    assert data.condition_inputs(plan, "corrupt") == []
    verified = {"decisions": "resources/idis/d.csv", "set": "idis-perception"}
    plan = _plan(config, [(("conditions", "idis-typographic", "verification"), verified)])
    assert data.condition_inputs(plan, "idis-typographic") == ["resources/idis/d.csv"]


def test_math_judge_files_and_spec(config):
    plan = _plan(config)
    files = judges.math_judged_files(plan, "demo-idis-math")
    assert len(files) == 2 * 5  # 2 models x 5 conditions x 1 prompt
    assert files[0] == "results/judged-mathverse/demo-base/demo-idis-math/clean/idis-math.jsonl"
    assert judges.math_judged_files(plan, "demo-idis-perception") == []
    assert judges.math_judge_spec(plan) == {"backend": "offline"}
    llm = {"backend": "openai", "model": "gpt-oss-120b", "base_url": "http://h:8000/v1"}
    spec = judges.math_judge_spec(_plan(config, [(("judge", "mathverse"), llm)]))
    assert spec["cache_dir"] == "results/cache/llm"  # the run's LLM cache


def test_attribute_files_per_extractor_of_every_idis_output(config):
    plan = _plan(config, [(("judge", "attributes", "scope"), "all")])  # every output
    assert plan_idis.attribute_extractors(plan) == ["lexical", "lexical-minimal"]
    files = judges.attribute_files(plan, "demo-idis-perception")
    # 2 extractors x 2 models x 5 conditions x 2 prompts
    assert len(files) == 40
    assert files[0] == (
        "results/judged-attributes/lexical/demo-base/demo-idis-perception/clean/idis-perception.jsonl"
    )
    assert len(judges.attribute_files(plan, "demo-idis-waterbirds")) == 2 * 2 * 1 * 2
    assert judges.attribute_files(plan, "demo-chart") == []  # no attribute task
    assert plan_idis.idis_task(plan, "demo-idis-math") == "math"
    one = {"lexical": {"backend": "offline"}}
    plan2 = _plan(config, [(("judge", "attributes", "extractors"), one)])
    assert len(judges.attribute_files(plan2, "demo-idis-math")) == 2 * 5
    llm = {"backend": "openai", "model": "deepseek-chat", "prompt": "alternative"}
    plan3 = _plan(config, [(("judge", "attributes", "extractors"), {"ds": llm})])
    assert judges.attribute_spec(plan3, "ds")["cache_dir"] == "results/cache/llm"


def test_area_files_only_for_conditions_that_place_distractors(config):
    plan = _plan(config)
    assert plan_idis.area_files(plan, "demo-idis-perception") == [
        "results/areas/demo-idis-perception/idis-objects.jsonl",
        "results/areas/demo-idis-perception/idis-typographic.jsonl",
        "results/areas/demo-idis-perception/idis-size.jsonl",
    ]  # not clean, not the resolutions
    assert [f.rsplit("/", 1)[1] for f in plan_idis.area_files(plan, "demo-idis-math")] == [
        "idis-diagram.jsonl",
        "idis-handwritten.jsonl",
        "idis-mathwriting.jsonl",
    ]  # not the textual one


def test_blocked_files_and_their_checks(config):
    plan = _plan(config)
    assert plan_idis.blocked_files(plan, "demo-idis-perception") == [
        "results/blocked/demo-reasoning/demo-idis-perception/idis-objects/idis-perception.jsonl"
    ]
    assert plan_idis.blocked_files(plan, "demo-idis-math") == []  # no idis-objects there
    spec = plan_idis.blocking_spec(
        plan, "demo-reasoning", "demo-idis-perception", "idis-perception"
    )
    assert spec["infer"] == inference.infer_spec(
        plan, "demo-reasoning", "demo-idis-perception", "idis-perception", 0, 1
    )
    assert {k: v for k, v in spec.items() if k != "infer"} == {
        "settings": ["none", "distractor", "target"],
        "max_new_tokens": 24,
        "limit": None,
        "scorer": "imagenet9",
        "unparsed_choice": "wrong",
    }
    only = _plan(config, [(("idis", "blocking", "datasets"), ["demo-idis-waterbirds"])])
    assert plan_idis.blocked_files(only, "demo-idis-perception") == []
    with pytest.raises(ConfigError, match=r"idis\.blocking\.conditions: unknown condition 'nope'"):
        _plan(config, [(("idis", "blocking", "conditions"), ["nope"])])
    with pytest.raises(ConfigError, match=r"idis\.blocking\.models: unknown model id 'nope'"):
        _plan(config, [(("idis", "blocking", "models"), ["nope"])])
    with pytest.raises(ConfigError, match=r"'gpt-4o' has backend 'openai'; attention blocking"):
        _plan(config, [(("idis", "blocking", "models"), ["gpt-4o"])])
    # a registry model the run does not evaluate, a dataset it does not have: the
    # blocking step would vanish without a word, so each is an error
    with pytest.raises(ConfigError, match=r"'demo-extra' is not among the run's `models`"):
        _plan(config, [(("idis", "blocking", "models"), ["demo-extra"])])
    with pytest.raises(ConfigError, match=r"idis\.blocking\.datasets: 'x' is not a dataset"):
        _plan(config, [(("idis", "blocking", "datasets"), ["x"])])
    with pytest.raises(ConfigError, match=r"name at least one extractor"):
        _plan(config, [(("judge", "attributes", "extractors"), {})])


def test_an_extractor_setting_is_checked_by_its_schema(config):
    bad = {"lexical": {"backend": "offline", "prompt": "alternative"}}
    with pytest.raises(ConfigError, match="prompt"):
        _plan(config, [(("judge", "attributes", "extractors"), bad)])
    with pytest.raises(ConfigError, match="model"):
        _plan(config, [(("judge", "attributes", "extractors"), {"x": {"backend": "openai"}})])


# --------------------------------------------------------------------------- the paper run


@pytest.fixture(scope="module")
def paper():
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        yield RunPlan.load("config/paper.yaml")
    finally:
        os.chdir(cwd)


def _decoding(spec):
    return spec["temperature"], spec["top_p"], spec["n"], spec["max_new_tokens"]


def test_paper_idis_decoding_is_the_authors(paper):
    """run_perception.py: T 0.7, top-p 0.95, 5 outputs, 2,048 new tokens, 512 x 512;
    the attribute-guiding prompt with --greedy (one output); run_math_vllm.py: 8,192."""
    for model in ("qwen3-vl-8b-thinking", "intern-s1-mini"):
        base = inference.infer_spec(paper, model, "imagenet9", "idis-perception")
        assert _decoding(base) == (0.7, 0.95, 5, 2048) and base["image_size"] == 512
        for n in (1024, 2048, 4096):
            budget = inference.infer_spec(paper, model, "imagenet9", f"idis-perception-budget-{n}")
            assert _decoding(budget) == (0.7, 0.95, 5, 2048)
        mitigate = inference.infer_spec(paper, model, "imagenet9", "idis-perception-mitigate")
        assert (mitigate["temperature"], mitigate["n"], mitigate["image_size"]) == (0.0, 1, 512)
        wb = inference.infer_spec(paper, model, "waterbirds", "waterbirds")
        assert _decoding(wb) == (0.7, 0.95, 5, 2048) and wb["image_size"] == 512
        wb_mitigate = inference.infer_spec(paper, model, "waterbirds", "waterbirds-mitigate")
        assert (wb_mitigate["temperature"], wb_mitigate["n"], wb_mitigate["image_size"]) == (
            0.0,
            1,
            512,
        )
        math = inference.infer_spec(paper, model, "mathverse", "idis-math")
        assert _decoding(math) == (0.7, 0.95, 5, 8192) and "image_size" not in math
    # the Idis views count each prompt's own draws
    from vlmrobust.studies import STUDIES

    spec = STUDIES["idis"].spec(paper, "waterbirds")
    assert spec["prompt_draws"] == {"waterbirds": 5, "waterbirds-mitigate": 1}
    assert spec["mitigation_prompts"] == ["waterbirds-mitigate"]
    spec = STUDIES["idis"].spec(paper, "imagenet9")
    assert spec["main_prompt"] == "idis-perception"
    assert spec["prompt_draws"]["idis-perception-mitigate"] == 1
    assert spec["budget_prompts"] == {
        "idis-perception-budget-1024": 1024,
        "idis-perception-budget-2048": 2048,
        "idis-perception-budget-4096": 4096,
    }


def test_paper_intern_s1_thinks(paper):
    """inference/models.py and run_math_vllm.py: enable_thinking=True for Intern-S1."""
    spec = inference.infer_spec(paper, "intern-s1-mini", "mathverse", "idis-math")
    assert spec["model_spec"]["options"]["chat_template_kwargs"] == {"enable_thinking": True}
    other = inference.infer_spec(paper, "qwen3-vl-8b-thinking", "mathverse", "idis-math")
    assert "chat_template_kwargs" not in (other["model_spec"].get("options") or {})


def test_paper_gemini_app_g_is_planned(paper):
    """App. G: Gemini 3 Flash (low and high thinking) on Idis-perception."""
    from vlmrobust.studies import STUDIES

    models = ["gemini-3-flash-low", "gemini-3-flash-high"]
    assert paper.models_of("imagenet9-gemini") == models
    assert "imagenet9-gemini" in STUDIES["idis"].scopes(paper)
    assert paper.datasets["imagenet9-gemini"]["conditions"] == ["clean", "idis-visual"]
    for model in models:
        spec = inference.infer_spec(paper, model, "imagenet9-gemini", "idis-perception")
        assert (spec["temperature"], spec["top_p"], spec["n"]) == (0.7, 0.95, 5)
        assert spec["image_size"] == 512
        key = CellKey(model, "imagenet9-gemini", "idis-visual", "idis-perception")
        assert key.path(paths.OUTPUTS) in inference.output_files(paper, model)
    assert "imagenet9-gemini" not in paper.models_of("imagenet9")


def test_prompt_decoding_is_checked(config):
    with pytest.raises(ConfigError, match=r"prompt_decoding\.waterbirds: 'waterbirds' is not"):
        _plan(
            config,
            [(("datasets", "demo-idis-math", "prompt_decoding"), {"waterbirds": {"n": 1}})],
        )
    with pytest.raises(ConfigError, match=r"prompt_decoding\.idis-math: 5 draws per question"):
        _plan(
            config,
            [
                (
                    ("datasets", "demo-idis-math", "prompt_decoding"),
                    {"idis-math": {"temperature": 0}},
                )
            ],
        )
    with pytest.raises(ConfigError, match="prompt_decoding"):  # an unknown key
        _plan(
            config,
            [(("datasets", "demo-idis-math", "prompt_decoding"), {"idis-math": {"top_k": 20}})],
        )
    # a greedy dataset whose one prompt samples is fine, and that prompt samples
    plan = _plan(
        config,
        [
            (("datasets", "demo-idis-math", "temperature"), 0.0),
            (
                ("datasets", "demo-idis-math", "prompt_decoding"),
                {"idis-math": {"temperature": 0.7}},
            ),
        ],
    )
    spec = inference.infer_spec(plan, "demo-base", "demo-idis-math", "idis-math")
    assert (spec["temperature"], spec["n"]) == (0.7, 5)


def test_demo_mitigation_prompts_answer_greedily_once(config):
    plan = _plan(config)
    for dataset, prompt in (
        ("demo-idis-perception", "idis-perception-mitigate"),
        ("demo-idis-waterbirds", "waterbirds-mitigate"),
    ):
        spec = inference.infer_spec(plan, "demo-base", dataset, prompt)
        assert (spec["temperature"], spec["n"], spec["image_size"]) == (0.0, 1, 512)


# ------------------------------------------------- which traces are judged (judge.attributes)


def _files(plan, dataset, extractor):
    """(model, condition, prompt) of each labels file of ``extractor`` on ``dataset``."""
    return [
        tuple(f.split("/")[i] for i in (3, 5, 6))
        for f in judges.attribute_files(plan, dataset, [extractor])
    ]


def test_attribute_scope_read_is_what_the_views_read(config):
    read, every = _plan(config), _plan(config, [(("judge", "attributes", "scope"), "all")])
    assert read.config["judge"]["attributes"]["scope"] == "read"  # the default
    p, mit = "idis-perception.jsonl", "idis-perception-mitigate.jsonl"
    conds = ["clean", "idis-objects", "idis-typographic", "idis-size", "idis-res"]
    models = ["demo-base", "demo-reasoning"]
    # the main extractor: every condition of the main and of the mitigation prompt
    main = _files(read, "demo-idis-perception", "lexical")
    assert main == [(m, c, q) for c in conds for m in models for q in (p, mit)]
    # another one: the main prompt only, without the clean images (no r_attr)
    assert _files(read, "demo-idis-perception", "lexical-minimal") == [
        (m, c, p) for c in conds[1:] for m in models
    ]
    assert len(judges.attribute_files(every, "demo-idis-perception")) == 2 * 2 * 5 * 2
    # math: one prompt; its clean traces have a distractor ratio (0 or more): kept
    assert len(judges.attribute_files(read, "demo-idis-math", ["lexical-minimal"])) == 2 * 5
    # a budget prompt: no attribute view reads it, but for the sizes table
    budget = "idis-perception-budget-1024.jsonl"
    assert _files(read, "demo-idis-budget", "lexical") == [
        ("demo-reasoning", "clean", p),
        ("demo-reasoning", "idis-objects", p),
    ]
    assert len(_files(every, "demo-idis-budget", "lexical")) == 2 * 2
    sized = _plan(
        config, [(("datasets", "demo-idis-budget", "conditions"), ["clean", "idis-size"])]
    )
    assert ("demo-reasoning", "idis-size", budget) in _files(sized, "demo-idis-budget", "lexical")
    assert ("demo-reasoning", "clean", budget) not in _files(sized, "demo-idis-budget", "lexical")
    # waterbirds: base and mitigation prompt (main), the base prompt (the other)
    assert len(judges.attribute_files(read, "demo-idis-waterbirds", ["lexical"])) == 2 * 2
    assert len(judges.attribute_files(read, "demo-idis-waterbirds", ["lexical-minimal"])) == 2
    assert judges.attribute_extractors_of(read, "demo-idis-perception") == [
        "lexical",
        "lexical-minimal",
    ]
    assert judges.attribute_extractors_of(read, "demo-chart") == []


def test_attribute_datasets_and_blocking(config):
    only = _plan(config, [(("judge", "attributes", "datasets"), ["demo-idis-math"])])
    assert judges.attribute_extractors_of(only, "demo-idis-perception") == []
    assert judges.attribute_files(only, "demo-idis-perception", ["lexical-minimal"]) == []
    # the attention-blocking outputs keep their main labels wherever they are
    assert judges.attribute_files(only, "demo-idis-perception") == [
        "results/judged-attributes/lexical/demo-reasoning/demo-idis-perception/idis-objects/"
        "idis-perception.jsonl"
    ]
    assert len(judges.attribute_files(only, "demo-idis-math")) == 2 * 2 * 5
    for bad in ("x", "demo-chart"):  # not a dataset of the run; no attribute task
        with pytest.raises(ConfigError, match=rf"judge\.attributes\.datasets: '{bad}'"):
            _plan(config, [(("judge", "attributes", "datasets"), [bad])])
    with pytest.raises(ConfigError, match="scope"):
        _plan(config, [(("judge", "attributes", "scope"), "some")])
    with pytest.raises(ConfigError, match="validation_sample"):
        _plan(config, [(("judge", "attributes", "validation_sample"), 2)])
    # an alternative perception prompt labels perception traces only
    alt = {"lexical": {"backend": "offline"}, "alt": {"backend": "openai", "model": "m",
           "prompt": "alternative"}}  # fmt: skip
    plan = _plan(config, [(("judge", "attributes", "extractors"), alt)])
    assert judges.attribute_files(plan, "demo-idis-math", ["alt"]) == []
    assert len(judges.attribute_files(plan, "demo-idis-perception", ["alt"])) == 2 * 4


def test_attribute_sample_quota_by_hand(config):
    plan = _plan(config)
    assert plan.config["judge"]["attributes"]["validation_sample"] == 1250

    def sample(*names):
        return judges.attribute_sample(plan, *names)

    # perception, main prompt: 4 condition files (clean left out) -> ceil(1250 / 4)
    assert sample("lexical-minimal", "demo-idis-perception", "demo-base", "idis-objects",
                  "idis-perception") == 313  # fmt: skip
    # math: 5 condition files -> 1250 / 5; waterbirds: one file -> every 1250
    assert sample("lexical-minimal", "demo-idis-math", "demo-base", "clean", "idis-math") == 250
    assert sample("lexical-minimal", "demo-idis-waterbirds", "demo-base", "clean",
                  "waterbirds") == 1250  # fmt: skip
    # a file outside the scope counts itself: 4 + 1 files
    assert sample("lexical-minimal", "demo-idis-perception", "demo-base", "clean",
                  "idis-perception") == 250  # fmt: skip
    # the main extractor labels every trace
    assert sample("lexical", "demo-idis-perception", "demo-base", "idis-objects",
                  "idis-perception") is None  # fmt: skip
    key = ("demo-idis-perception", "demo-base", "idis-objects", "idis-perception")
    assert judges.attribute_spec(plan, "lexical", *key) == judges.attribute_spec(plan, "lexical")
    assert judges.attribute_spec(plan, "lexical-minimal", *key)["sample"] == {"n": 313, "seed": 0}
    assert "sample" not in judges.attribute_spec(plan, "lexical-minimal")  # no file named
    seven = _plan(config, [(("judge", "attributes", "validation_sample"), 10),
                           (("judge", "attributes", "validation_seed"), 7)])  # fmt: skip
    assert judges.attribute_spec(seven, "lexical-minimal", *key)["sample"] == {"n": 3, "seed": 7}
    every = _plan(config, [(("judge", "attributes", "scope"), "all")])
    assert judges.attribute_sample(every, "lexical-minimal", *key) == 250  # 5 files of that prompt
    # null: every trace, and the setting is the extractor's as before
    off = _plan(config, [(("judge", "attributes", "validation_sample"), None)])
    assert judges.attribute_sample(off, "lexical-minimal", *key) is None
    assert judges.attribute_spec(off, "lexical-minimal", *key) == judges.attribute_spec(
        off, "lexical-minimal"
    )
