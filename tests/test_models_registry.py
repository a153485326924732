"""The model registry as the inference jobs use it: a job's params hold only what
changes its outputs (a display name, family, role, pair or study list reruns nothing),
and its resources (gpu, mem_mb, runtime) come from the registry."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from vlmrobust.core.config import ConfigError, load_yaml, validate_registry
from vlmrobust.core.prompts import PROMPTS, prompt_versions
from vlmrobust.core.records import Sample, Variant
from vlmrobust.core.registry import INFERENCE_KEYS, inference_fields, model_resources
from vlmrobust.infer.run import Job, plan_requests

from .conftest import BIN, REPO, copy_repo, run, tiny_config

DISPLAY_KEYS = {"name", "family", "role", "base", "studies", "resources"}


def _models() -> dict:
    return validate_registry(load_yaml(REPO / "config/models.yaml"))["models"]


def _shipped() -> dict:
    return yaml.safe_load((REPO / "config/models.yaml").read_text())["models"]


# --- the fields of an inference job --------------------------------------------------


def test_inference_fields_keep_only_what_changes_outputs():
    models = _models()
    assert inference_fields(models["demo-base"]) == {
        "backend": "hf",
        "local_path": "results/models/demo-base",
        "demo_seed": 1,
        "options": {"batch_size": 8, "min_pixels": 3136, "max_pixels": 50176},
    }
    assert inference_fields(models["gpt-4o"]) == {
        "backend": "openai",
        "api_model": "gpt-4o",
        "api_key_env": "OPENAI_API_KEY",
        "options": {},
    }
    for spec in models.values():
        fields = inference_fields(spec)
        assert set(fields) <= set(INFERENCE_KEYS)
        assert not DISPLAY_KEYS & set(fields)


def test_backends_read_only_inference_fields():
    """Every registry key the runner and the VLM backends read is an inference field, so
    the job's reduced `model_spec` is all they need."""
    pkg = REPO / "workflow" / "vlmrobust"
    files = [*sorted((pkg / "clients" / "vlm").glob("*.py")), pkg / "infer" / "run.py"]
    files.append(pkg / "clients" / "apicall.py")
    read = set()
    for path in files:
        read |= set(re.findall(r"spec(?:\.get\(|\[)\s*[\"'](\w+)[\"']", path.read_text()))
    assert read, "no registry key read found: the pattern is out of date"
    # `kind` is read for a `kind: llm` entry alone (engine_kwargs: no image inputs), whose
    # LLM engine plan carries it (plan.engines.llm_engine_plan); absent, a VLM's is `vlm`
    assert read <= {*INFERENCE_KEYS, "kind"}, read - set(INFERENCE_KEYS)


def test_prompt_versions_of_a_job():
    assert prompt_versions("crm-answer", "visargs") == {"crm-answer": PROMPTS["crm-answer"].version}
    versions = prompt_versions("default", "mathvista")
    assert list(versions) == ["mathvista-solution"]
    assert re.fullmatch(r"1\+[0-9a-f]{8}", versions["mathvista-solution"])
    assert set(prompt_versions("default", "demo")) == {"label", "mcq", "short", "yesno"}


def test_a_job_planned_with_another_prompt_version_stops():
    sample = Sample("s-1", "demo-chart", ["img.png"], "What is 1?", "1", "number")
    variant = Variant(
        "s-1", "s-1", "demo-chart", "clean", "none", ["img.png"], ["0" * 64], "What is 1?"
    )
    base = dict(model="m", model_spec={"options": {}}, prompt="short", max_new_tokens=8)
    current = prompt_versions("short", "demo")
    assert len(plan_requests(Job(**base, prompt_versions=current), [variant], {"s-1": sample})) == 1
    with pytest.raises(ValueError, match="planned with version '0'"):
        plan_requests(Job(**base, prompt_versions={"short": "0"}), [variant], {"s-1": sample})


# --- resources ------------------------------------------------------------------------


def test_resources_default_by_kind_and_from_the_registry():
    models = _models()
    assert models["demo-base"]["resources"] == {"gpu": 0, "mem_mb": 4000, "runtime": 60}
    assert models["qwen2.5-vl-7b"]["resources"] == {"gpu": 1, "mem_mb": 64000, "runtime": 720}
    assert models["gpt-4o"]["resources"] == {"gpu": 0, "mem_mb": 4000, "runtime": 720}
    assert models["llama-3.2-90b-vision"]["resources"] == {
        "gpu": 4,
        "mem_mb": 400000,
        "runtime": 1440,
    }
    # a partial entry keeps its kind's defaults for the rest
    spec = {"backend": "vllm", "hf_repo": "x/y", "resources": {"gpu": 2}}
    assert model_resources(spec) == {"gpu": 2, "mem_mb": 64000, "runtime": 720}


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({"gpu": 1}, "models.api.resources.gpu: an API model"),
        ({"gpus": 1}, "unknown key 'models.api.resources.gpus'"),
        ({"runtime": 0}, "key 'models.api.resources.runtime': 0 is less than the minimum"),
    ],
)
def test_bad_resources_name_the_key(resources, message):
    entry = {"backend": "openai", "api_model": "x", "resources": resources}
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_registry({"models": {"api": entry}})


# --- the workflow: params and resources of the infer jobs -----------------------------


def _write_run(workdir: Path, models: dict, run_models: list[str], **extra) -> str:
    """A registry with ``models`` and a run of them on two demo charts, clean
    (config/test/chart.yaml)."""
    (workdir / "config" / "test-models.yaml").write_text(yaml.safe_dump({"models": models}))
    config = {
        **tiny_config("chart"),
        "model_registry": "config/test-models.yaml",
        "models": run_models,
        **extra,
    }
    (workdir / "config" / "test-run.yaml").write_text(yaml.safe_dump(config))
    return "config/test-run.yaml"


def _snakemake(workdir: Path, *args: str, check: bool = True):
    cmd = [str(BIN / "snakemake"), "--cores", "2", "--configfile", "config/test-run.yaml"]
    return run([*cmd, *args], workdir, check=check)


def _infer_jobs(out: str, workdir: Path) -> dict[str, dict]:
    """model -> {rule, spec (the job spec of its demo-chart clean cell, parsed),
    resources, command} of a dry run's inference jobs: rule infer (an API model's cell,
    its spec in the command) and the engines (a local model's cells, their specs in the
    engine's plan, which a dry run does not write: read from the run plan that writes
    it)."""
    from vlmrobust.plan import RunPlan, engines

    with contextlib.chdir(workdir):
        plan = RunPlan.load("config/test-run.yaml")
    jobs = {}
    for block in re.split(r"\n(?=rule \w+:)", out):
        rule = re.match(r"rule (\w+):", block)
        name = rule.group(1) if rule else ""
        if name != "infer" and (not name.startswith("engine_") or name == "engine_plan"):
            continue
        command = re.search(r"^Shell command: (.*)$", block, flags=re.M).group(1)
        args = shlex.split(command)
        if rule.group(1) == "infer":
            spec, cli = json.loads(args[args.index("--spec") + 1]), args[: args.index("infer")]
        else:
            m = re.search(r"results/engines/([^/]+)/phase(\d+)/engine(\d+)\.json", command)
            cells = engines.engine_plan(plan, m.group(1), int(m.group(2)), int(m.group(3)))["cells"]
            spec = next(c for c in cells if "/demo-chart/clean/" in c["out"])["spec"]
            cli = args[: args.index("infer-engine")]
        resources = dict(
            kv.split("=", 1)
            for kv in re.search(r"^\s*resources: (.*)$", block, flags=re.M).group(1).split(", ")
        )
        jobs[spec["model"]] = {
            "rule": "engine" if rule.group(1).startswith("engine_") else rule.group(1),
            "spec": spec,
            "resources": resources,
            "command": cli,
        }
    return jobs


def test_infer_params_change_with_the_checkpoint_only(tmp_path):
    """(a) name/family/role/base/studies/resources leave a job's params as they are;
    revision, options and hf_repo change them. (c) resources come from the registry."""
    workdir = copy_repo(tmp_path / "repo")
    shipped = _shipped()["qwen2.5-vl-7b"]  # answered by vLLM: here as an hf checkpoint
    options = {k: v for k, v in shipped["options"].items() if k != "max_model_len"}
    ref = {**shipped, "backend": "hf", "options": options}
    models = {
        "m-ref": ref,
        "m-display": {
            **ref,
            "name": "Another display name",
            "family": "another-family",
            "role": "reasoning",
            "base": "m-ref",
            "studies": ["idis"],
            "resources": {"gpu": 2, "mem_mb": 1234, "runtime": 5},
        },
        "m-revision": {**ref, "revision": "0123456789abcdef"},
        "m-options": {**ref, "options": {"min_pixels": 3136}},
        "m-repo": {**ref, "hf_repo": "someone/another-7b"},
        "m-api": {
            "backend": "openai",
            "api_model": "fake-vlm",
            "api_key_env": "SOME_KEY",
            "resources": {"mem_mb": 2000, "runtime": 30},
        },
    }
    _write_run(workdir, models, list(models))
    targets = [f"results/outputs/{m}/demo-chart/clean/default/shard0of1.jsonl" for m in models]
    jobs = _infer_jobs(_snakemake(workdir, "-n", "-p", *targets).stdout, workdir)
    assert sorted(jobs) == sorted(models)

    def params(model):
        return {k: v for k, v in jobs[model]["spec"].items() if k != "model"}

    assert params("m-display") == params("m-ref")
    assert params("m-ref")["model_spec"] == {
        "backend": "hf",
        "hf_repo": "Qwen/Qwen2.5-VL-7B-Instruct",
        # the model card's 256-1280 vision tokens (docs/large-images.md); decoded with
        # the checkpoint's generation defaults, as lmms-eval's transformers wrapper does
        "options": {
            "batch_size": 256,
            "min_pixels": 256 * 28 * 28,
            "max_pixels": 1280 * 28 * 28,
            "generation_config": "checkpoint",
        },
    }
    assert params("m-ref")["prompt_versions"] == prompt_versions("default", "demo")
    for model, key in [("m-revision", "revision"), ("m-options", "options"), ("m-repo", "hf_repo")]:
        changed = params(model)
        assert changed != params("m-ref")
        assert changed["model_spec"][key] == models[model][key]
        assert {**changed, "model_spec": params("m-ref")["model_spec"]} == params("m-ref")
    # The job's CLI builds its Job from exactly this JSON.
    for job in jobs.values():
        Job(**job["spec"])

    def resources(model):
        r = jobs[model]["resources"]
        return jobs[model]["rule"], int(r["gpu"]), int(r["mem_mb"]), int(r["runtime"])

    # an engine asks for its model's GPUs and memory, and its cells' runtimes added up
    # (one cell here); an API model's cell for no GPU
    assert resources("m-ref") == ("engine", 1, 64000, 720)
    assert resources("m-display") == ("engine", 2, 1234, 5)
    assert resources("m-api") == ("infer", 0, 2000, 30)


@pytest.mark.workflow  # a whole run of two models
def test_editing_a_display_name_reruns_no_inference(tmp_path):
    """(b) A finished tiny run, then the registry's display keys (and resources) edited:
    only the explorer's index, which shows the display names, is written again; a changed
    option reruns the model's inference for its params.

    (`--list-changes params` is no help here: Snakemake 9.27 lists every output whose
    params it recorded, changed or not.)"""
    workdir = copy_repo(tmp_path / "repo")
    entry = _shipped()["demo-base"]
    _write_run(workdir, {"demo-base": entry}, ["demo-base"])
    _snakemake(workdir)
    shard = "results/outputs/demo-base/demo-chart/clean/default/shard0of1.jsonl"
    assert (workdir / shard).exists()

    # (not `role`: for a demo model it decides what the model is trained to write,
    # so editing it rebuilds the checkpoint; a downloaded model's role is display-only)
    edited = {
        **entry,
        "name": "Demo-Renamed",
        "family": "renamed",
        "studies": ["corruption"],
        "resources": {"mem_mb": 2000, "runtime": 10},
    }
    _write_run(workdir, {"demo-base": edited}, ["demo-base"])
    dry = _snakemake(workdir, "-n")
    out = dry.stdout + dry.stderr
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M))
    assert jobs == {"explorer_index": "1", "all": "1", "total": "2"}, out[-3000:]
    assert '"name": "Demo-Renamed"' in out  # the index's parameter: the names it shows

    optioned = {**edited, "options": {**entry["options"], "batch_size": 4}}
    _write_run(workdir, {"demo-base": optioned}, ["demo-base"])
    dry = _snakemake(workdir, "-n")
    out = dry.stdout + dry.stderr
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M))
    # the engine's plan records the cells' specs: it is written again, and the engine
    # answers again (the cell's rows asked anew: its spec changed)
    assert jobs["engine_plan"] == "1" and jobs["engine_demo_base_phase0_0"] == "1"
    blocks = re.split(r"\n(?=rule \w+:)", out)
    planned = next(b for b in blocks if b.startswith("rule engine_plan:"))
    assert "reason: Params have changed since last execution" in planned
    engine = next(b for b in blocks if b.startswith("rule engine_demo_base_phase0_0:"))
    assert shard in engine


def test_vllm_models_run_in_the_vllm_environment(tmp_path):
    """A backend-vllm model's engine runs this repository's package with the Python of
    `environments.vllm`; an hf model's in the workflow's own environment.
    A missing environment does not stop a dry run (it lists the engine); a run that
    must start the engine stops before any job, naming the model and the key."""
    workdir = copy_repo(tmp_path / "repo")
    fake_env = tmp_path / "some-vllm-env"
    (fake_env / "bin").mkdir(parents=True)
    (fake_env / "bin" / "python").write_text("#!/bin/sh\n")
    shipped = _shipped()
    models = {"demo-base": shipped["demo-base"], "demo-vllm": shipped["demo-vllm"]}
    _write_run(workdir, models, list(models), environments={"vllm": str(fake_env)})
    targets = [f"results/outputs/{m}/demo-chart/clean/default/shard0of1.jsonl" for m in models]
    jobs = _infer_jobs(_snakemake(workdir, "-n", "-p", *targets).stdout, workdir)
    assert jobs["demo-base"]["rule"] == "engine" and jobs["demo-base"]["command"] == ["vlmrobust"]
    assert jobs["demo-vllm"]["rule"] == "engine"
    assert jobs["demo-vllm"]["command"] == [
        "env",
        f"PYTHONPATH={workdir}/workflow${{PYTHONPATH:+:$PYTHONPATH}}",
        str(fake_env / "bin" / "python"),
        "-m",
        "vlmrobust",
    ]
    assert jobs["demo-vllm"]["spec"]["model_spec"]["backend"] == "vllm"
    assert int(jobs["demo-vllm"]["resources"]["gpu"]) == 0  # a demo model

    missing = tmp_path / "none"
    _write_run(workdir, models, list(models), environments={"vllm": str(missing)})
    jobs = _infer_jobs(_snakemake(workdir, "-n", "-p", *targets).stdout, workdir)
    assert jobs["demo-vllm"]["command"][2] == str(missing / "bin" / "python")
    proc = _snakemake(workdir, "-p", *targets, check=False)  # a run: no -n
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert (
        f"models.demo-vllm (backend vllm): its jobs run in the environment environments.vllm = "
        f"'{missing}', and {missing / 'bin' / 'python'} does not exist: make it with "
        "`bash envs/vllm-env.sh"
    ) in out
    assert not (workdir / "results" / "raw").exists()  # stopped before any job ran


#: a stand-in for conda answering what Snakemake asks of it while it builds a DAG
FAKE_CONDA = """#!/bin/sh
case "$*" in
  "info --json") echo '{"conda_prefix": "/nonexistent", "platform": "linux-64"}' ;;
  "--version") echo "conda 24.11.3" ;;
  "config --get channel_priority --json") echo '{"get": {"channel_priority": "strict"}}' ;;
  *) exit 1 ;;
esac
"""


def test_with_conda_the_vllm_engines_run_in_their_rules_environment(tmp_path):
    """--software-deployment-method conda: envs/vllm.yaml is the vLLM environment, so an
    engine runs the python on PATH there and `environments.vllm` (here a missing
    folder) is neither used nor checked."""
    workdir = copy_repo(tmp_path / "repo")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "conda").write_text(FAKE_CONDA)
    (tmp_path / "bin" / "conda").chmod(0o755)
    shipped = _shipped()
    models = {"demo-vllm": shipped["demo-vllm"]}
    _write_run(workdir, models, list(models), environments={"vllm": str(tmp_path / "none")})
    target = "results/outputs/demo-vllm/demo-chart/clean/default/shard0of1.jsonl"
    cmd = [str(BIN / "snakemake"), "--cores", "2", "--configfile", "config/test-run.yaml"]
    cmd += ["--software-deployment-method", "conda", "-n", "-p", target]
    proc = run(cmd, workdir, env={"PATH": f"{tmp_path / 'bin'}:{BIN}:/usr/bin:/bin"})
    jobs = _infer_jobs(proc.stdout, workdir)
    assert jobs["demo-vllm"]["command"][2] == "python"


def test_the_harness_key_is_a_job_field_of_harness_prompts_only():
    """`harness` (the lmms-eval model a model was run as) is read by the `lmms-*` prompt
    settings only: naming it reruns no job of another prompt."""
    models = _models()
    assert models["qwen3-vl-8b-thinking"]["harness"] == {"lmms_eval": "qwen3_vl"}
    assert models["qwen2.5-vl-7b"]["harness"] == {"lmms_eval": "qwen2_5_vl"}
    assert models["gpt-4o"]["harness"] is None
    spec = models["qwen3-vl-8b-thinking"]
    assert "harness" not in inference_fields(spec)
    assert "harness" not in inference_fields(spec, "idis-math")
    # the prompts the papers sent through lmms-eval's chat wrapper take its system message
    assert inference_fields(spec, "distract-open")["harness"] == {"lmms_eval": "qwen3_vl"}
    assert inference_fields(spec, "lmms-mmmu")["harness"] == {"lmms_eval": "qwen3_vl"}
    assert "harness" not in inference_fields(models["gpt-4o"], "lmms-mmmu")
    with pytest.raises(ConfigError, match="harness.lmms_eval"):
        validate_registry({"models": {"m": {"hf_repo": "x/y", "harness": {"lmms_eval": "llava"}}}})


# --- the checkpoints and decoding of the papers ------------------------------------------


def test_openvlthinker_is_the_distract_bench_release_checkpoint():
    """The release's files are named after the hub repository (``org__name``)."""
    spec = _models()["openvlthinker-7b"]
    assert spec["hf_repo"] == "ydeng9/OpenVLThinker-7B-v1.2"
    assert spec["hf_repo"].replace("/", "__") == "ydeng9__OpenVLThinker-7B-v1.2"
    assert spec["name"] == "OpenVLThinker-7B-v1.2"


@pytest.mark.parametrize(
    ("model", "dataset", "prompt", "choice", "in_spec"),
    [
        # lmms-eval's transformers wrappers (corruption, Distract-Bench): the checkpoint's
        ("qwen2.5-vl-7b", "chartqa", "default", "checkpoint", None),
        ("openvlthinker-7b", "distract-bench", "distract-open", "checkpoint", None),
        # Idis perception and Waterbirds (transformers): the checkpoint's
        ("qwen3-vl-8b-thinking", "imagenet9", "idis-perception", "checkpoint", None),
        ("glm-4.1v-9b-thinking", "waterbirds", "waterbirds", "checkpoint", None),
        # Idis math (vLLM SamplingParams passed explicitly): the same model, explicit
        ("qwen3-vl-8b-thinking", "mathverse", "idis-math", "explicit", "explicit"),
        # CRM states none: unchanged
        ("qwen2.5-vl-7b", "visargs", "crm-cot", "explicit", "explicit"),
        # an API model sends what it sends
        ("gpt-5", "distract-bench", "distract-open", "explicit", None),
    ],
)
def test_paper_generation_config_per_model_and_dataset(model, dataset, prompt, choice, in_spec):
    from vlmrobust.plan import RunPlan, inference

    spec = inference.infer_spec(
        RunPlan.load(str(REPO / "config/paper.yaml")), model, dataset, prompt
    )
    assert spec.get("generation_config") == in_spec
    assert Job(**spec).generation == choice


def test_the_demo_run_decodes_explicitly_with_unchanged_job_specs():
    from vlmrobust.plan import RunPlan, inference

    plan = RunPlan.load(str(REPO / "config/config.yaml"))
    for model in plan.models:
        for dataset in plan.datasets:
            spec = inference.infer_spec(plan, model, dataset, "default")
            assert "generation_config" not in spec
            assert "generation_config" not in spec["model_spec"].get("options", {})
            assert Job(**spec).generation == "explicit"


def test_a_bad_generation_config_names_the_key():
    registry = load_yaml(REPO / "config/models.yaml")
    registry["models"]["qwen2.5-vl-7b"]["options"]["generation_config"] = "auto"
    with pytest.raises(
        ConfigError,
        match=r"models.qwen2.5-vl-7b.options.generation_config: "
        r"'auto' is not one of explicit, checkpoint",
    ):
        validate_registry(registry)
    # an API model reads no such option: an error, never silently ignored
    registry = load_yaml(REPO / "config/models.yaml")
    registry["models"]["gpt-4o"]["options"] = {"generation_config": "checkpoint"}
    with pytest.raises(ConfigError, match="generation_config"):
        validate_registry(registry)


# --- prices (the forecast's money) ------------------------------------------------------


def test_every_api_model_of_the_papers_has_prices_with_a_source_and_a_date():
    models = _models()
    for mid in ("gpt-4o", "gpt-5", "gemini-1.5-flash", "gemini-3-flash-low",
                "gemini-3-flash-high", "deepseek-v3.2", "claude-sonnet-4.5"):  # fmt: skip
        prices = models[mid]["prices"]
        assert prices["input"] > 0 and prices["output"] > 0, mid
        assert prices["source"].startswith("https://"), mid
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", prices["date"]), mid


@pytest.mark.parametrize("missing", ["source", "date"])
def test_a_price_without_its_source_or_date_is_an_error_naming_the_key(missing):
    registry = yaml.safe_load((REPO / "config/models.yaml").read_text())
    del registry["models"]["gpt-4o"]["prices"][missing]
    with pytest.raises(ConfigError, match=rf"'models\.gpt-4o\.prices' lacks '{missing}'"):
        validate_registry(registry, "config/models.yaml")
