"""No silent wrong numbers in the configuration: the backend settings (judges, writers,
the editor, the scoring fallback) have schemas of their own, `api_key_env` holds a
variable's name and never shows a pasted key, the first error says what is missing or
out of range, and a YAML key given twice is an error."""

from __future__ import annotations

import copy
import re

import pytest

from vlmrobust.clients.apicall import api_key_from_env
from vlmrobust.core.config import ConfigError, load_yaml, validate_config, validate_registry
from vlmrobust.plan import RunPlan, judges

from .conftest import BIN, REPO, run

#: a value pasted where a variable name belongs (a made-up sentinel, not a key format)
SECRET = "pasted-value.not-a-variable-name"
LLM = {"backend": "openai", "model": "gpt-4o", "api_key_env": "OPENAI_API_KEY"}


def _registry():
    return validate_registry(load_yaml(REPO / "config/models.yaml"))


def _config():
    return copy.deepcopy(load_yaml(REPO / "config/config.yaml"))


def _set(config, path, value):
    """Set the dotted ``path`` (``datasets.demo-visargs.question_writer``) of ``config``."""
    *parents, last = path.split(".")
    node = config
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return config


def _error(config):
    with pytest.raises(ConfigError) as info:
        validate_config(config, _registry())
    return str(info.value)


# --- one schema per backend setting -------------------------------------------------------------

SPECS = {
    "masking.hallucination": ("offline", ["backend", "threshold", "model_dir"]),
    "judge.reference": ("offline", ["backend", "threshold", "model_dir"]),
    "datasets.demo-visargs.question_writer": ("template", ["backend"]),
    "construct.demo-distract.writer": ("offline", ["backend"]),
    "construct.demo-distract.editor": ("composite", ["backend"]),
}


@pytest.mark.parametrize("path", SPECS)
def test_a_misspelt_key_of_an_offline_backend_is_an_error_naming_its_path(path):
    backend, known = SPECS[path]
    message = _error(_set(_config(), path, {"backend": backend, "treshold": 0.99}))
    assert message.splitlines()[0] == (
        f"config: unknown key '{path}.treshold' (allowed here: {', '.join(known)})"
    )


LLM_KEYS = {
    "masking.hallucination": "backend, llm, model, base_url, api_key_env, options, max_tokens, "
    "temperature, seed",
    "judge.reference": "backend, llm, model, base_url, api_key_env, options, max_tokens, "
    "temperature",
    "scoring.llm_fallback": "backend, model, base_url, api_key_env, options",
    "datasets.demo-visargs.question_writer": "backend, llm, model, base_url, api_key_env, "
    "options, temperature, max_tokens, cache_dir",
    "construct.demo-distract.writer": "backend, llm, model, base_url, api_key_env, options",
    "construct.demo-distract.editor": "backend, model, base_url, api_key_env, options",
}


@pytest.mark.parametrize("path", LLM_KEYS)
def test_a_misspelt_key_of_an_llm_backend_is_an_error_naming_its_path(path):
    message = _error(_set(_config(), path, {**LLM, "max_token": 64}))
    assert message == f"config: unknown key '{path}.max_token' (allowed here: {LLM_KEYS[path]})"


def test_a_key_of_another_backend_is_an_error():
    # an offline judge has no model; an LLM judge no threshold (it would be ignored)
    message = _error(_set(_config(), "judge.reference", {"backend": "offline", "model": "m"}))
    assert "unknown key 'judge.reference.model' (allowed here: backend, threshold, model_dir)" in (
        message
    )
    message = _error(_set(_config(), "masking.hallucination", {**LLM, "threshold": 0.7}))
    assert "unknown key 'masking.hallucination.threshold'" in message


@pytest.mark.parametrize(
    "path, spec, message",
    [
        (
            "masking.hallucination",
            {"backend": "offline", "threshold": 1.5},
            "key 'masking.hallucination.threshold': 1.5 is greater than or equal to the maximum",
        ),
        (
            "judge.reference",
            {"backend": "openai", "api_key_env": "OPENAI_API_KEY"},
            "key 'judge.reference' lacks 'model'",
        ),
        ("scoring.llm_fallback", {"model": "gpt-4o"}, "key 'scoring.llm_fallback' lacks 'backend'"),
        (
            "construct.demo-distract.editor",
            {"backend": "dall-e"},
            "key 'construct.demo-distract.editor.backend': 'dall-e' is not one of",
        ),
        (
            "datasets.demo-visargs.question_writer",
            {**LLM, "max_tokens": 0},
            "key 'datasets.demo-visargs.question_writer.max_tokens': 0 is less than the minimum",
        ),
    ],
)
def test_a_wrong_value_in_a_backend_spec_names_the_key(path, spec, message):
    first = _error(_set(_config(), path, spec)).splitlines()[0]
    assert message in first
    assert "unknown key" not in first


def test_backend_specs_take_their_keys_and_the_code_defaults():
    config = _config()
    _set(config, "masking.hallucination", {"threshold": 0.7})
    _set(config, "judge.reference", {**LLM, "temperature": 0.2, "options": {"concurrency": 2}})
    _set(config, "scoring.llm_fallback", {"backend": "gemini", "model": "gemini-2.0-flash"})
    _set(config, "datasets.demo-visargs.question_writer", {**LLM, "cache_dir": "cache"})
    _set(config, "construct.demo-distract.writer", dict(LLM))
    _set(config, "construct.demo-distract.editor", {"backend": "gemini"})
    config = validate_config(config, _registry())
    # the defaults filled in are those the judges and writers use when a key is absent
    assert config["masking"]["hallucination"] == {
        "backend": "offline",
        "threshold": 0.7,
        "model_dir": None,
    }
    assert config["judge"]["reference"] == {
        **LLM,
        "temperature": 0.2,
        "options": {"concurrency": 2},
        "base_url": None,
        "max_tokens": 1024,
        "llm": None,  # an inline setting: no registry model
    }
    assert config["datasets"]["demo-visargs"]["question_writer"]["max_tokens"] == 256
    assert config["construct"]["demo-distract"]["editor"]["model"] is None
    assert config["scoring"]["llm_fallback"]["api_key_env"] is None
    # the shipped configurations stay valid
    validate_config(load_yaml(REPO / "config/paper.yaml"), _registry())


def test_the_offline_hallucination_judge_uses_masking_model_dir_unless_it_names_its_own():
    config = _config()
    config["masking"]["model_dir"] = "models/minilm"
    plan = RunPlan.from_config(config)
    assert judges.hallucination_judge_spec(plan)["model_dir"] == "models/minilm"
    config = _set(_config(), "masking.hallucination", {"model_dir": "models/other"})
    config["masking"]["model_dir"] = "models/minilm"
    assert (
        judges.hallucination_judge_spec(RunPlan.from_config(config))["model_dir"] == "models/other"
    )


# --- api_key_env: a variable's name, never the key ----------------------------------------------


@pytest.mark.parametrize("path", LLM_KEYS)
def test_a_key_pasted_into_api_key_env_is_rejected_and_not_shown(path):
    message = _error(_set(_config(), path, {**LLM, "api_key_env": SECRET}))
    assert message.startswith(f"config: key '{path}.api_key_env': not the name of an environment")
    assert SECRET not in message and "pasted-value" not in message


@pytest.mark.parametrize("value", [SECRET, "OPENAI API KEY", "1KEY", 12345])
def test_the_registry_rejects_a_pasted_key_without_showing_it(value):
    registry = load_yaml(REPO / "config/models.yaml")
    registry["models"]["gpt-4o"]["api_key_env"] = value
    with pytest.raises(ConfigError) as info:
        validate_registry(registry)
    message = str(info.value)
    assert "key 'models.gpt-4o.api_key_env': not the name of an environment variable" in message
    assert str(value) not in message


def test_an_api_call_refuses_a_key_in_api_key_env_without_showing_it(monkeypatch):
    with pytest.raises(ValueError, match="api_key_env is not the name") as info:
        api_key_from_env({"api_key_env": SECRET}, who="LLM 'gpt-4o'")
    assert SECRET not in str(info.value)
    monkeypatch.setenv("VLMROBUST_TEST_KEY", "k")
    assert api_key_from_env({"api_key_env": "VLMROBUST_TEST_KEY"}, who="x") == "k"


# --- the first error is what is missing or out of range -----------------------------------------


def test_a_value_out_of_range_comes_without_a_false_unknown_key():
    config = _config()
    config["conditions"]["corrupt"]["severities"] = [-1]
    message = _error(config)
    assert message == (
        "config: key 'conditions.corrupt.severities.0': -1 is less than the minimum of 1"
    )


def test_a_condition_without_perturbation_says_so_first():
    config = _config()
    del config["conditions"]["corrupt"]["perturbation"]
    config["conditions"]["corrupt"]["severties"] = [1]  # a real unknown key: reported after
    lines = _error(config).splitlines()
    assert lines[0].startswith("config: key 'conditions.corrupt' lacks 'perturbation'")
    # without a perturbation every perturbation's keys are allowed: all are listed
    assert len(lines) == 2
    assert lines[1].startswith(
        "config: unknown key 'conditions.corrupt.severties' (allowed here: perturbation, "
        "expected_variants, verification, assignment, methods, severities, blank_fill, "
        "source, root, task, kind,"
    )
    for key in ("region", "min_distance", "writer", "segments", "resolutions"):
        assert f" {key}," in lines[1] or f" {key})" in lines[1]


def test_a_key_of_another_perturbation_lists_the_keys_of_this_one():
    config = _config()
    config["conditions"]["corrupt"]["fill"] = "black"  # a mask key
    assert _error(config) == (
        "config: unknown key 'conditions.corrupt.fill' (allowed here: perturbation, "
        "expected_variants, verification, assignment, methods, severities, blank_fill)"
    )


# --- a YAML key given twice ---------------------------------------------------------------------


def test_a_yaml_key_given_twice_is_an_error_naming_key_and_line(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("seed: 0\nmasking:\n  step_threshold: 0.8\n  step_threshold: 0.5\n")
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert str(info.value) == (
        f"{path}: line 4: key 'step_threshold' is given twice in the same mapping (first on "
        "line 3); YAML would keep only the last value: remove one"
    )
    path.write_text("a: {x: 1, x: 2}\n")
    with pytest.raises(ConfigError, match=r"line 1: key 'x' is given twice"):
        load_yaml(path)
    # the same key in different mappings, and a merge key overridden, are fine
    path.write_text("a: &base {x: 1, y: 2}\nb:\n  <<: *base\n  x: 3\nc: {x: 1}\n")
    assert load_yaml(path) == {"a": {"x": 1, "y": 2}, "b": {"x": 3, "y": 2}, "c": {"x": 1}}


def test_the_registry_and_the_run_plan_refuse_a_key_given_twice(tmp_path):
    text = (REPO / "config/config.yaml").read_text()
    assert "\nseed: 0\n" in text
    path = tmp_path / "run.yaml"
    path.write_text(text.replace("\nseed: 0\n", "\nseed: 0\nseed: 1\n"))
    with pytest.raises(ConfigError, match=r"key 'seed' is given twice"):
        RunPlan.load(path)
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  a: {backend: hf, hf_repo: x/a}\n  a: {backend: hf}\n")
    with pytest.raises(ConfigError, match=rf"{re.escape(str(models))}: line 3: key 'a'"):
        load_yaml(models)


@pytest.mark.parametrize("case", ["duplicate", "secret"])
def test_snakemake_refuses_the_configuration_before_printing_a_command(tmp_path, case):
    text = (REPO / "config/config.yaml").read_text()
    if case == "duplicate":
        text = text.replace("\nseed: 0\n", "\nseed: 0\nseed: 1\n")
        expected = "key 'seed' is given twice"
    else:
        reference = f"  reference: {{backend: openai, model: m, api_key_env: {SECRET}}}\n"
        assert "\njudge:\n" in text  # the demo's judges: add one beside them
        text = text.replace("\njudge:\n", "\njudge:\n" + reference, 1)
        expected = "key 'judge.reference.api_key_env': not the name of an environment variable"
    path = tmp_path / "run.yaml"
    path.write_text(text)
    cmd = [str(BIN / "snakemake"), "-n", "--cores", "1", "--configfile", str(path)]
    proc = run(cmd, REPO, check=False, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert expected in out
    assert SECRET not in out


def test_command_line_strings_become_the_choice_they_spell():
    # snakemake --config hands nested values over as strings ('1'); a key that takes a
    # string or an integer (`classes: all-other | N`) gets the integer, not the string
    from vlmrobust.core.config import validate_config

    config = _config()
    config["conditions"]["idis-typographic"]["classes"] = "1"
    assert validate_config(config)["conditions"]["idis-typographic"]["classes"] == 1
    config = _config()
    config["conditions"]["idis-typographic"]["classes"] = "all-other"
    assert validate_config(config)["conditions"]["idis-typographic"]["classes"] == "all-other"
    config["conditions"]["idis-typographic"]["classes"] = "0"  # fits no choice: an error
    with pytest.raises(ConfigError, match="conditions.idis-typographic.classes"):
        validate_config(config)
