"""Configuration: JSON-schema validation with defaults, and cross-checks.

The Snakefile and the CLIs both call :func:`validate_config`, so a wrong key or type
stops a run before any job starts, with a message that names the key.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema import Draft202012Validator, validators

from .benchmarks import BENCHMARKS, REGION_META, SCORER_NAMES
from .harness import CHAT_WRAPPERS
from .llms import LLMRefError, is_engine_step, llm_settings, resolve_llm_refs
from .paths import CONSTRUCTION, DEMO_IDIS_ROOT, DEMO_ROOT, NAME
from .paths import path as fill_template
from .prompts import DEFAULT_PROMPT
from .registry import API_BACKENDS, GENERATION_CONFIGS, LOCAL_BACKENDS, model_resources

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas"


class ConfigError(ValueError):
    """A configuration problem; the message names the key and what would be right."""


def _with_defaults(validator_class):
    """A validator that fills `default` values of `properties` while it validates."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if isinstance(subschema, dict) and "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


_DefaultingValidator = _with_defaults(Draft202012Validator)


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, line: int, first: int) -> None:
        super().__init__(f"duplicate key {key!r} on line {line}")
        self.key, self.line, self.first = key, line, first


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (YAML itself
    keeps the last value silently). Merge keys (``<<: *anchor``) may still be
    overridden by the mapping's own keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise _DuplicateKey(key, line, seen[key])
                seen[key] = line
            except TypeError:  # an unhashable key: the constructor below says so
                pass
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: str | Path) -> Any:
    """Read a YAML file; a key given twice in one mapping is an error naming it."""
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.load(fh, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except FileNotFoundError as exc:
        raise ConfigError(f"file not found: {path}") from exc
    except _DuplicateKey as exc:
        raise ConfigError(
            f"{path}: line {exc.line}: key {exc.key!r} is given twice in the same mapping "
            f"(first on line {exc.first}); YAML would keep only the last value: remove one"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc


def load_schema(name: str) -> dict:
    schema = load_yaml(SCHEMA_DIR / f"{name}.schema.yaml")
    if "name" in schema.get("$defs", {}):
        # the names that fill the path templates (and the workflow's wildcards)
        schema["$defs"]["name"]["pattern"] = f"^{NAME}$"
    if name == "config":
        _fill_benchmark_enums(schema)
    if name == "models":
        # the lmms-eval model names of the chat wrappers the harness prompts reproduce
        entry = schema["properties"]["models"]["additionalProperties"]
        entry["properties"]["harness"]["properties"]["lmms_eval"]["enum"] = [*CHAT_WRAPPERS, None]
    return schema


def _fill_benchmark_enums(schema: dict) -> None:
    """The dataset keys ``adapter`` and ``scorer`` take the names of the benchmark
    registry (:mod:`vlmrobust.core.benchmarks`); the schema file lists none of them."""
    props = schema["$defs"]["dataset"]["properties"]
    props["adapter"]["enum"] = [*BENCHMARKS, None]
    props["scorer"]["enum"] = [*SCORER_NAMES, None]


def _key(path: Iterator[Any]) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


#: Keys whose value may be a secret pasted by mistake: an error about them never shows it.
SECRET_KEYS = frozenset({"api_key_env"})

#: The validators that report keys the schema does not know.
_UNKNOWN_KEY = ("additionalProperties", "unevaluatedProperties")


def _rank(error: jsonschema.ValidationError) -> tuple[bool, int, str]:
    """What is missing, mistyped or out of range comes first; unknown keys come last
    (a key is often unknown only because the key that selects its branch is wrong)."""
    return (error.validator in _UNKNOWN_KEY, len(error.absolute_path), error.message)


def _describe(error: jsonschema.ValidationError, what: str, plain: Any = None) -> str | None:
    """One line naming the key; None for an unknown-key error that is only the echo of
    another error (a key the branch selected for this object declares). ``plain`` is a
    validator of the root schema that fills no defaults (it decides the branches)."""
    base = list(error.absolute_path)
    if base and base[-1] in SECRET_KEYS:
        return (
            f"{what}: key {_key(base)!r}: not the name of an environment variable (letters, "
            "digits and _, not starting with a digit); name the variable that holds the "
            "API key, never the key itself (the value is not shown)"
        )
    if error.validator in _UNKNOWN_KEY:
        known = _known_keys(error.schema, error.instance, plain)
        extra = _unexpected(error, known)
        if not extra:
            return None
        keys = ", ".join(repr(_key([*base, k])) for k in extra)
        hint = f" (allowed here: {', '.join(known)})" if known else ""
        return f"{what}: unknown key {keys}{hint}"
    if error.validator == "required":
        instance = error.instance if isinstance(error.instance, dict) else {}
        missing = [k for k in error.validator_value if k not in instance] or [error.message]
        msg = f"{what}: key {_key(base)!r} lacks {', '.join(repr(k) for k in missing)}"
        props = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        desc = props.get(missing[0], {}).get("description") if len(missing) == 1 else None
        if desc:
            msg += f" -- expected: {' '.join(str(desc).split())}"
        return msg
    if error.validator == "propertyNames":
        return (
            f"{what}: name {error.instance!r} under {_key(base)!r} is not allowed: {error.message}"
        )
    desc = error.schema.get("description") if isinstance(error.schema, dict) else None
    if desc is None and isinstance(error.parent, jsonschema.ValidationError):
        desc = error.parent.schema.get("description")
    msg = f"{what}: key {_key(base)!r}: {error.message}"
    if desc:
        msg += f" -- expected: {' '.join(str(desc).split())}"
    return msg


def _unexpected(error: jsonschema.ValidationError, known: list[str]) -> list[str]:
    """The keys of the object that no applicable part of its schema declares."""
    instance = error.instance if isinstance(error.instance, dict) else {}
    return sorted(str(k) for k in instance if k not in known)


def _known_keys(schema: Any, instance: Any, plain: Any = None) -> list[str]:
    """The keys ``schema`` declares for ``instance``: its ``properties`` plus those of
    the ``allOf`` branches (``if``/``then``/``else``) that apply. When the keys that
    select a branch are missing or invalid (or no ``plain`` validator is given), the
    branch cannot be told: every branch's keys count."""
    if not isinstance(schema, dict):
        return []
    keys = list(schema.get("properties", {}))
    decided = (
        plain is not None and isinstance(instance, dict) and _selected(schema, instance, plain)
    )
    for sub in schema.get("allOf", []):
        cond = sub.get("if")
        for branch in ("then", "else"):
            if branch not in sub:
                continue
            if decided and cond is not None:
                applies = plain.evolve(schema=cond).is_valid(instance)
                if applies != (branch == "then"):
                    continue
            keys += [k for k in sub[branch].get("properties", {}) if k not in keys]
    return keys


def _selected(schema: dict, instance: dict, plain: Any) -> bool:
    """Whether ``instance`` has the keys that select ``schema``'s branches, each valid."""
    if any(k not in instance for k in schema.get("required", [])):
        return False
    props = schema.get("properties", {})
    selectors = {
        k
        for sub in schema.get("allOf", [])
        for k in [*sub.get("if", {}).get("properties", {}), *sub.get("if", {}).get("required", [])]
    }
    return all(
        plain.evolve(schema=props[k]).is_valid(instance[k])
        for k in selectors
        if k in props and k in instance
    )


def _resolve(schema: Any, root: dict) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            return schema
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        schema = target
    return schema


def _expects_string(schema: dict) -> bool:
    types = schema.get("type")
    if types is not None:
        return "string" in ([types] if isinstance(types, str) else types)
    if "enum" in schema:
        return any(isinstance(v, str) for v in schema["enum"])
    return True


def _coerce_choice(data: str, schema: dict, root: dict) -> Any:
    try:
        parsed = yaml.safe_load(data)
    except yaml.YAMLError:
        return data
    if isinstance(parsed, str):
        return data
    choices = [
        {**c, "$defs": root.get("$defs", {})} for c in schema.get("oneOf", schema.get("anyOf", []))
    ]
    fits = [Draft202012Validator(c).is_valid for c in choices]
    if any(f(parsed) for f in fits) and not any(f(data) for f in fits):
        return parsed
    return data


def coerce_strings(data: Any, schema: Any, root: dict | None = None) -> Any:
    """Read strings as YAML where the schema expects no string.

    ``snakemake --config 'demo={n_per_family: 3}'`` hands nested values over as
    strings ('3'); this turns them into the integer, boolean, list... they spell,
    guided by the schema, so a key declared as a string is never changed.
    """
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if not isinstance(schema, dict):
        return data
    if isinstance(data, str) and not _expects_string(schema):
        try:
            parsed = yaml.safe_load(data)
        except yaml.YAMLError:
            return data
        if not isinstance(parsed, str):
            data = parsed
    elif isinstance(data, str) and ("oneOf" in schema or "anyOf" in schema):
        # a choice of a string or something else (`classes: all-other | <integer>`): the
        # string is read as YAML when only what it spells fits one of the choices
        data = _coerce_choice(data, schema, root)
    branches = [schema] + [
        sub[b] for sub in schema.get("allOf", []) for b in ("then", "else") if b in sub
    ]
    if isinstance(data, dict):
        for key in list(data):
            for branch in branches:
                props = branch.get("properties", {})
                if key in props:
                    data[key] = coerce_strings(data[key], props[key], root)
                    break
            else:
                extra = schema.get("additionalProperties")
                if isinstance(extra, dict):
                    data[key] = coerce_strings(data[key], extra, root)
    elif isinstance(data, list) and isinstance(schema.get("items"), dict):
        data[:] = [coerce_strings(v, schema["items"], root) for v in data]
    return data


def validate(data: Any, schema: dict, what: str) -> dict:
    """Validate ``data`` (filled with defaults in place) or raise :class:`ConfigError`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{what}: expected a mapping at the top level, got {type(data).__name__}")
    data = coerce_strings(data, schema)
    validator = _DefaultingValidator(schema)
    errors = sorted(validator.iter_errors(data), key=_rank)
    if errors:
        # What is missing or out of range first; an unknown-key error that only echoes
        # another error (a failing branch's keys) is left out; a secret is never shown.
        plain = Draft202012Validator(schema)
        lines: list[str] = []
        for error in errors:
            line = _describe(error, what, plain)
            if line is not None and line not in lines:
                lines.append(line)
        lines = lines or [line for e in errors if (line := _describe(e, what)) is not None]
        raise ConfigError("\n".join(lines[:5]) or f"{what}: invalid")
    return data


@cache
def backend_options(backend: str) -> frozenset[str]:
    """The registry ``options`` a backend reads (the models schema's list for it)."""
    for rule in load_schema("models")["properties"]["models"]["additionalProperties"]["allOf"]:
        if rule["if"]["properties"]["backend"].get("const") == backend:
            return frozenset(rule["then"]["properties"]["options"]["propertyNames"]["enum"])
    raise ConfigError(f"no registry options are defined for backend {backend!r}")


def switch_backend(model_spec: dict[str, Any], backend: str) -> dict[str, Any]:
    """A job's ``model_spec`` answered with another local ``backend`` (config ``engines:
    papers``): its options those the backend reads, less ``batch_size``, whose meaning
    is the engine's own (a padded batch for hf, requests per call for vLLM: the
    backend's default applies)."""
    keep = backend_options(backend) - {"batch_size"}
    options = {k: v for k, v in (model_spec.get("options") or {}).items() if k in keep}
    return {**model_spec, "backend": backend, "options": options}


def validate_registry(registry: Any, source: str = "model registry") -> dict:
    registry = validate(registry, load_schema("models"), source)
    models = registry["models"]
    for mid, m in models.items():
        where = f"{source}: models.{mid}"
        if m["family"] is None:
            m["family"] = mid
        if m["role"] == "reasoning" and m["base"] is not None:
            base = models.get(m["base"])
            if base is None:
                raise ConfigError(f"{where}.base: unknown model id {m['base']!r}")
            if base["role"] != "base":
                raise ConfigError(
                    f"{where}.base: {m['base']!r} has role {base['role']!r}, not 'base'"
                )
        if m["role"] == "base" and m["base"] is not None:
            raise ConfigError(f"{where}.base: only reasoning models name a base model")
        if m["backend"] in ("hf", "vllm") and not (m["hf_repo"] or m["local_path"]):
            raise ConfigError(f"{where}: backend {m['backend']!r} needs hf_repo or local_path")
        if m["demo_seed"] is not None and (
            m["backend"] not in ("hf", "vllm") or not m["local_path"]
        ):
            raise ConfigError(
                f"{where}: a demo model (demo_seed) needs backend 'hf' or 'vllm' and a local_path"
            )
        if m["demo_twin"] is not None and m["demo_seed"] is None:
            raise ConfigError(
                f"{where}.demo_twin: only a demo model (demo_seed) is built as a twin"
            )
        if m["demo_sizes"] is not None and m["demo_seed"] is None:
            raise ConfigError(f"{where}.demo_sizes: only a demo model (demo_seed) has sizes")
        if m["backend"] in ("openai", "gemini") and not m["api_model"]:
            raise ConfigError(f"{where}: backend {m['backend']!r} needs api_model")
        if m["backend"] in API_BACKENDS and (m["resources"]["gpu"] or 0) > 0:
            raise ConfigError(
                f"{where}.resources.gpu: an API model (backend {m['backend']!r}) runs "
                "without a GPU; leave gpu null or 0"
            )
        choice = (m.get("options") or {}).get("generation_config")
        if choice is not None and choice not in GENERATION_CONFIGS:
            raise ConfigError(
                f"{where}.options.generation_config: {choice!r} is not one of "
                f"{', '.join(GENERATION_CONFIGS)}"
            )
        m["resources"] = model_resources(m)
    return registry


def _check_masking(config: dict) -> None:
    """A dataset under a `mask` condition is answered with both CRM stages and clean."""
    from .prompts import PROMPTS

    masking = config["masking"]
    cot, answer = masking["cot_prompt"], masking["answer_prompt"]
    for key, name in (("cot_prompt", cot), ("answer_prompt", answer)):
        if name not in PROMPTS:
            raise ConfigError(
                f"config: masking.{key}: unknown prompt {name!r} (known: {', '.join(PROMPTS)})"
            )
    if PROMPTS[answer].needs != cot:
        raise ConfigError(
            f"config: masking.answer_prompt: {answer!r} is not built on {cot!r} "
            f"(it needs {PROMPTS[answer].needs!r})"
        )
    clean = config["metrics"]["clean_condition"]
    masks = {c for c, spec in config["conditions"].items() if spec["perturbation"] == "mask"}
    for name, ds in config["datasets"].items():
        used = [c for c in ds["conditions"] if c in masks]
        if not used:
            continue
        where = f"config: datasets.{name}"
        _check_regions(config, name, used[0])
        if clean not in ds["conditions"]:
            raise ConfigError(
                f"{where}.conditions: the mask condition {used[0]!r} is compared with "
                f"{clean!r} (metrics.clean_condition); add it"
            )
        missing_prompts = [p for p in (cot, answer) if p not in ds["prompts"]]
        if missing_prompts:
            raise ConfigError(
                f"{where}.prompts: a dataset under a mask condition is answered in two "
                f"stages; add {', '.join(missing_prompts)} (masking.cot_prompt, "
                "masking.answer_prompt)"
            )


def _carries_regions(config: dict, dataset: str, seen: tuple[str, ...] = ()) -> bool:
    """Whether the samples of ``dataset`` carry annotated regions, which a mask condition
    fills: its benchmark record lists them in ``meta`` (``Benchmark.regions``); a
    constructed dataset keeps its source samples' meta, so it carries them when every
    dataset its construction edits does."""
    ds = config["datasets"][dataset]
    if ds["adapter"] != "constructed":
        return BENCHMARKS[ds["adapter"]].regions
    sources = [
        source
        for cname, cons in config["construct"].items()
        if ds["path"] == fill_template(CONSTRUCTION, construction=cname)
        for source in cons["from"]
    ]
    return bool(sources) and all(
        source in config["datasets"]
        and source not in (*seen, dataset)
        and _carries_regions(config, source, (*seen, dataset))
        for source in sources
    )


def _check_regions(config: dict, dataset: str, condition: str) -> None:
    """A mask condition applies only to a dataset whose samples carry region boxes."""
    if _carries_regions(config, dataset):
        return
    adapters = [name for name, b in BENCHMARKS.items() if b.regions]
    able = [d for d in config["datasets"] if _carries_regions(config, d)]
    run = (
        f"; of this run's datasets: {', '.join(able)}" if able else "; no dataset of this run does"
    )
    raise ConfigError(
        f"config: datasets.{dataset}.conditions: the mask condition {condition!r} fills a "
        f"sample's annotated region (meta.{' and meta.'.join(REGION_META)}), and the "
        f"samples of {dataset!r} (adapter {config['datasets'][dataset]['adapter']!r}) "
        "carry none; a mask condition applies to a dataset whose benchmark record lists "
        f"them in `meta` (adapter {', '.join(adapters)}, or a constructed dataset built "
        f"from such datasets){run}"
    )


def _check_verdicts_only(config: dict, imp: dict, where: str) -> None:
    """An ``imports`` entry without ``path``: released verdicts alone (DRR only)."""
    if not imp["references"]:
        raise ConfigError(
            f"{where}.path: no released outputs file; give `path`, or `references` (a "
            "released distractor-reference file) for a verdicts-only import"
        )
    perturbation = config["conditions"][imp["condition"]]["perturbation"]
    if perturbation != "distraction":
        raise ConfigError(
            f"{where}: a verdicts-only import (references, no path) stands for the judged "
            f"outputs of a distraction condition; {imp['condition']!r} is a "
            f"{perturbation!r} condition"
        )
    if imp["released_labels"]:
        raise ConfigError(
            f"{where}.released_labels: there is no released outputs file (path) to read "
            "the correctness from"
        )


def _check_without_images(config: dict, imported: set[tuple[str, str, str, str]]) -> None:
    """A dataset with ``images: false`` has every output imported and nothing that
    needs its images (a model run, a mask condition, a construction)."""
    masks = {c for c, spec in config["conditions"].items() if spec["perturbation"] == "mask"}
    for name, ds in config["datasets"].items():
        if ds["images"]:
            continue
        where = f"config: datasets.{name}.images"
        models = [m for m in config["models"] if ds["models"] is None or m in ds["models"]]
        for model in models:
            for cond in ds["conditions"]:
                for prompt in ds["prompts"] or [DEFAULT_PROMPT]:
                    if (model, name, cond, prompt) not in imported:
                        raise ConfigError(
                            f"{where} is false (samples without images), so no model can "
                            f"run on it, but {model} / {cond} / {prompt} is not imported: "
                            "add an `imports` entry for it, or set images: true"
                        )
        used = [c for c in ds["conditions"] if c in masks]
        if used:
            raise ConfigError(
                f"{where} is false, but the mask condition {used[0]!r} needs the images"
            )
        for cname, cons in config["construct"].items():
            if name in cons["from"]:
                raise ConfigError(f"{where} is false, but construct.{cname} edits its images")


def validate_config(config: dict, registry: dict | None = None) -> dict:
    """Validate a run configuration in place (defaults filled) and cross-check it.

    ``registry`` is the model registry; when None it is read from
    ``config["model_registry"]``.
    """
    if registry is None:
        source = (config or {}).get("model_registry", "config/models.yaml")
        registry = validate_registry(load_yaml(source), source)
    # a step's `llm: <id>` becomes the setting it stands for, then is validated as one
    try:
        if isinstance(config, dict):
            resolve_llm_refs(config, registry, config.get("model_registry", "config/models.yaml"))
    except LLMRefError as exc:
        raise ConfigError(str(exc)) from None
    config = validate(config, load_schema("config"), "config")
    _fill_and_check_datasets(config)
    _check_demo_training(config)
    _check_masking(config)
    _check_constructions(config)
    seen_imports = _check_imports(config)
    _check_without_images(config, seen_imports)
    _check_decoding(config)
    _check_models(config, registry)
    _check_engines(config, registry["models"])
    _check_blocking(config, registry["models"])
    _check_attribute_datasets(config)
    return config


def _fill_and_check_datasets(config: dict) -> None:
    """Each dataset's adapter, scorer, on_bad_row and max_pixels filled in; its
    conditions, path, demo folder and pixel settings (``fit`` or ``pixels``) checked."""
    for name, ds in config["datasets"].items():
        if ds["adapter"] is None:
            if name not in BENCHMARKS:
                raise ConfigError(
                    f"config: datasets.{name}.adapter: not given, and {name!r} is not an "
                    f"adapter name (known: {', '.join(BENCHMARKS)})"
                )
            ds["adapter"] = name
        if ds["scorer"] is None:
            ds["scorer"] = BENCHMARKS[ds["adapter"]].scorer
        if ds["on_bad_row"] is None:
            ds["on_bad_row"] = config["samples"]["on_bad_row"]
        if ds["max_pixels"] is None:
            ds["max_pixels"] = config["samples"]["max_pixels"]
        if ds.get("fit") is not None and ds.get("pixels") is not None:
            raise ConfigError(
                f"config: datasets.{name}.fit: `pixels: {ds['pixels']}` already resizes the "
                "images before the processor as its harness did; set one of the two"
            )
        for cond in ds["conditions"]:
            if cond not in config["conditions"]:
                raise ConfigError(
                    f"config: datasets.{name}.conditions: unknown condition {cond!r} "
                    f"(defined under `conditions`: {', '.join(config['conditions'])})"
                )
        if ds["source"] == "local" and not ds["path"]:
            raise ConfigError(
                f"config: datasets.{name}.path: source is 'local' but no path is given"
            )
        if ds["adapter"] == "demo":
            if ds["source"] != "local" or not ds["path"]:
                raise ConfigError(
                    f"config: datasets.{name}: adapter 'demo' reads the generated demo data: "
                    "set source: local and path: results/raw/demo/<family>"
                )
            demo_family(ds["path"])  # must be a demo family's folder
        # any adapter may read a demo family's folder (VisArgs: the premises family)
        family = demo_folder_family(ds["path"])
        if family is not None and family not in config["demo"]["families"]:
            raise ConfigError(
                f"config: datasets.{name}.path: demo family {family!r} is not generated "
                f"(demo.families: {', '.join(config['demo']['families'])})"
            )


def _check_demo_training(config: dict) -> None:
    """The demo models never train on the samples they are evaluated on."""
    train = config["demo"]["train"]
    if train["enabled"] and train["seed"] == config["seed"]:
        raise ConfigError(
            f"config: demo.train.seed ({train['seed']}) equals seed: the demo models would "
            "be trained on the very samples they are evaluated on; choose another seed"
        )
    if train["enabled"] and not any(w > 0 for w in train["weights"].values()):
        raise ConfigError("config: demo.train.weights: at least one task needs a weight > 0")


def _check_constructions(config: dict) -> None:
    """Each construction names datasets of the run."""
    for name, cons in config["construct"].items():
        if not cons["from"]:
            raise ConfigError(f"config: construct.{name}.from: name at least one source dataset")
        for source in cons["from"]:
            if source not in config["datasets"]:
                raise ConfigError(
                    f"config: construct.{name}.from: {source!r} is not a dataset of the run"
                )


def _check_imports(config: dict) -> set[tuple[str, str, str, str]]:
    """Each ``imports`` entry answers one (model, dataset, condition, prompt) of the run,
    once; returns those keys."""
    seen_imports = set()
    for i, imp in enumerate(config["imports"]):
        where = f"config: imports.{i}"
        if imp["dataset"] not in config["datasets"]:
            raise ConfigError(f"{where}.dataset: {imp['dataset']!r} is not a dataset of the run")
        ds = config["datasets"][imp["dataset"]]
        if imp["condition"] not in ds["conditions"]:
            raise ConfigError(
                f"{where}.condition: {imp['condition']!r} is not among "
                f"datasets.{imp['dataset']}.conditions ({', '.join(ds['conditions'])})"
            )
        prompts = ds["prompts"] or ["default"]
        if imp["prompt"] not in prompts:
            raise ConfigError(
                f"{where}.prompt: {imp['prompt']!r} is not among the dataset's prompt "
                f"settings ({', '.join(prompts)})"
            )
        if imp["model"] not in config["models"]:
            raise ConfigError(f"{where}.model: {imp['model']!r} is not in the run's `models`")
        key = (imp["model"], imp["dataset"], imp["condition"], imp["prompt"])
        if key in seen_imports:
            raise ConfigError(f"{where}: a second import for {'/'.join(key)}")
        seen_imports.add(key)
        if imp["path"] is None:
            _check_verdicts_only(config, imp, where)
        if imp.get("extraction_field") and imp["format"] == "jsonl":
            raise ConfigError(
                f"{where}.extraction_field: format jsonl has no released extraction to "
                "score (it is for lmms-eval, vlmevalkit, mathvista and logicvista files)"
            )
    return seen_imports


def _check_decoding(config: dict) -> None:
    """The clean condition exists; several draws need a temperature above 0."""
    clean = config["metrics"]["clean_condition"]
    if config["datasets"] and clean not in config["conditions"]:
        raise ConfigError(
            f"config: metrics.clean_condition: {clean!r} is not a condition "
            f"(defined: {', '.join(config['conditions'])})"
        )
    decoding = config["decoding"]
    if decoding["n"] > 1 and decoding["temperature"] <= 0:
        raise ConfigError(
            f"config: decoding.n is {decoding['n']} but decoding.temperature is 0: greedy "
            "draws would all be the same; set a temperature above 0"
        )
    for name, ds in config["datasets"].items():
        n = ds["n"] if ds["n"] is not None else decoding["n"]
        t = ds["temperature"] if ds["temperature"] is not None else decoding["temperature"]
        own = _check_prompt_decoding(name, ds, n, t)
        # a prompt without decoding of its own draws the dataset's n at its temperature
        if n > 1 and t <= 0 and any(p not in own for p in ds["prompts"] or ["default"]):
            raise ConfigError(
                f"config: datasets.{name}: {n} draws per question (n) at temperature 0 "
                f"would all be the same; set datasets.{name}.temperature above 0"
            )


def _check_prompt_decoding(name: str, ds: dict, n: int, t: float) -> set[str]:
    """``datasets.<name>.prompt_decoding`` names prompts of the dataset and gives none of
    them several draws at temperature 0 (over the dataset's ``n`` and temperature);
    returns the prompts it sets."""
    prompts = ds["prompts"] or ["default"]
    own = ds.get("prompt_decoding") or {}
    for prompt, settings in own.items():
        where = f"config: datasets.{name}.prompt_decoding.{prompt}"
        if prompt not in prompts:
            raise ConfigError(
                f"{where}: {prompt!r} is not among the dataset's prompt settings "
                f"({', '.join(prompts)}), so it would change nothing"
            )
        settings = {k: v for k, v in (settings or {}).items() if v is not None}
        pn, pt = settings.get("n", n), settings.get("temperature", t)
        if pn > 1 and pt <= 0:
            raise ConfigError(
                f"{where}: {pn} draws per question (n) at temperature 0 would all be "
                "the same; set its temperature above 0 or n: 1"
            )
    return set(own)


def _check_models(config: dict, registry: dict) -> None:
    """``models`` and every ``datasets.<d>.models`` name registry models of the run."""
    for mid in config["models"]:
        if mid not in registry["models"]:
            raise ConfigError(
                f"config: models: unknown model id {mid!r} (not in {config['model_registry']}; "
                f"known: {', '.join(registry['models'])})"
            )
    for name, ds in config["datasets"].items():
        for mid in ds["models"] or []:
            if mid not in registry["models"]:
                raise ConfigError(
                    f"config: datasets.{name}.models: unknown model id {mid!r} "
                    f"(not in {config['model_registry']})"
                )
            if mid not in config["models"]:
                raise ConfigError(
                    f"config: datasets.{name}.models: {mid!r} is not among the run's "
                    f"`models` ({', '.join(config['models']) or 'none'}), so no job would "
                    f"answer it; add it to `models` or remove it here"
                )


def judge_llms(config: dict) -> list[str]:
    """The local registry LLMs (backends hf, vllm) the judges of a validated ``config``
    name (``llm:`` under judge.mathverse and judge.attributes.extractors.<name>), each
    answered by LLM engines, whether or not the run gives it a file to judge."""
    return sorted(
        {
            setting["llm"]
            for where, setting in llm_settings(config["judge"], "judge")
            if is_engine_step(where) and setting.get("backend") in LOCAL_BACKENDS
        }
    )


def _check_engines(config: dict, models: dict) -> None:
    """``service.engines`` names models that have engines: the run's ``models``
    answered by a local checkpoint (backends hf, vllm) and the local LLMs its judges
    name (:func:`judge_llms`). Any other name would be ignored without a word (a typo
    leaves the model at ``default_engines``), so it is an error; so is a model of the
    run answered through an API, which has no engine for the count to change."""
    engines = config["service"]["engines"]
    local = [m for m in config["models"] if models[m]["backend"] in LOCAL_BACKENDS]
    llms = judge_llms(config)
    named = {s["llm"] for _, s in llm_settings(config)} | set(config["models"])
    for name in engines:
        if name in local or name in llms:
            continue
        where = f"config: service.engines.{name}"
        can = (
            f"The run's models with engines (its `models` answered by a local checkpoint, "
            f"backends hf and vllm): {', '.join(local) or 'none'}; the local LLMs its "
            f"judges name: {', '.join(llms) or 'none'}"
        )
        backend = (models.get(name) or {}).get("backend")
        if name in named and backend in API_BACKENDS:
            raise ConfigError(
                f"{where}: {name!r} is answered through an API (backend {backend}), which "
                f"has no engine jobs, so this count would change nothing; remove it. {can}"
            )
        registry = config["model_registry"]
        why = (
            f"it is in {registry}, but neither in `models` nor named by a judge"
            if name in models
            else f"nor of {registry}"
        )
        raise ConfigError(
            f"{where}: {name!r} is not a model of the run ({why}), so this count would be "
            f"ignored. {can}"
        )


def _check_blocking(config: dict, models: dict) -> None:
    """``idis.blocking`` names models of the run answered locally, conditions and
    datasets of the run: a name that is not there would drop the blocking step, its
    table and its figure without a word, so it is an error."""
    blocking = config["idis"]["blocking"]
    for mid in blocking["models"]:
        if mid not in models:
            raise ConfigError(
                f"config: idis.blocking.models: unknown model id {mid!r} "
                f"(not in {config['model_registry']})"
            )
        if models[mid]["backend"] not in ("hf", "vllm"):
            raise ConfigError(
                f"config: idis.blocking.models: {mid!r} has backend "
                f"{models[mid]['backend']!r}; attention blocking needs a local checkpoint "
                "(backend 'hf' or 'vllm': it loads the checkpoint through transformers)"
            )
        if mid not in config["models"]:
            raise ConfigError(
                f"config: idis.blocking.models: {mid!r} is not among the run's `models` "
                f"({', '.join(config['models']) or 'none'}), so its blocking step would "
                "vanish; add it there or remove it here ([] = no blocking)"
            )
    for name in blocking["datasets"] or []:
        if name not in config["datasets"]:
            raise ConfigError(
                f"config: idis.blocking.datasets: {name!r} is not a dataset of the run "
                f"({', '.join(config['datasets']) or 'none'}), so its blocking step, table "
                "and figure would vanish; name the run's datasets there (null = every Idis "
                "dataset), or `idis: {blocking: {models: []}}` for no blocking"
            )
    for cond in blocking["conditions"]:
        if cond not in config["conditions"]:
            raise ConfigError(
                f"config: idis.blocking.conditions: unknown condition {cond!r} "
                f"(defined under `conditions`: {', '.join(config['conditions'])})"
            )
    if blocking["models"] and not config["judge"]["attributes"]["extractors"]:
        raise ConfigError(
            "config: idis.blocking: blocking needs the attribute phrases of a trace; "
            "name at least one extractor under judge.attributes.extractors"
        )


def _check_attribute_datasets(config: dict) -> None:
    """``judge.attributes.datasets`` names datasets of the run with an attribute task: a
    name that is not there would drop the attribute analysis without a word."""
    from .idis import IDIS_TASKS

    for name in config["judge"]["attributes"]["datasets"] or []:
        spec = config["datasets"].get(name)
        if spec is None or spec["adapter"] not in IDIS_TASKS:
            raise ConfigError(
                f"config: judge.attributes.datasets: {name!r} is not a dataset of the run "
                f"with an attribute task (adapter {', '.join(IDIS_TASKS)}); name those "
                "datasets there, or null for every one"
            )


def under_demo_idis(path: str | None) -> bool:
    """Whether ``path`` lies in the folder the ``demo_idis`` job writes."""
    if not path:
        return False
    p = Path(path).as_posix()
    return p == DEMO_IDIS_ROOT or p.startswith(DEMO_IDIS_ROOT + "/")


def demo_sample_id(index: int) -> str:
    """The id of the demo generator's ``index``-th row of a family (``0007``); its image
    is ``images/<id>.png`` in the family's folder."""
    return f"{index:04d}"


def demo_image_files(family: str, n: int) -> list[str]:
    """The images the demo generator writes for a family of ``n`` rows: the outputs of
    the ``demo_data`` job and inputs of the family's samples job (an image edited in
    place rebuilds the samples)."""
    return [f"{DEMO_ROOT}/{family}/images/{demo_sample_id(i)}.png" for i in range(n)]


def demo_folder_family(path: str | None) -> str | None:
    """The demo family whose generated folder ``path`` is (``results/raw/demo/chart`` ->
    ``chart``), or None for any other path."""
    if not path:
        return None
    p = Path(path)
    return p.name if p.parent.as_posix() == DEMO_ROOT else None


def demo_family(path: str) -> str:
    """The demo family of a demo dataset's path (``results/raw/demo/chart`` -> ``chart``)."""
    family = demo_folder_family(path)
    if family is None:
        raise ConfigError(f"demo dataset path {path!r} must be {DEMO_ROOT}/<family>")
    return family


@lru_cache(maxsize=1)
def _conditions_schema() -> dict:
    """The schema of a ``conditions`` mapping alone: the config schema's ``condition``
    definition (with every ``$defs`` it refers to)."""
    root = load_schema("config")
    return {
        "$defs": root["$defs"],
        "type": "object",
        "properties": {
            "conditions": {"type": "object", "additionalProperties": {"$ref": "#/$defs/condition"}}
        },
    }


def condition_perturbations() -> list[str]:
    """The perturbation names the schema's ``condition`` definition knows."""
    return list(_conditions_schema()["$defs"]["condition"]["properties"]["perturbation"]["enum"])


def validate_condition(name: str, spec: Any) -> dict:
    """One condition's spec validated as ``conditions.<name>`` of a config (a copy,
    defaults filled): what :func:`validate_config` checks of it, with the same messages
    (``config: key 'conditions.<name>.<key>': ...``). A validated spec passes unchanged."""
    data = validate({"conditions": {name: copy.deepcopy(spec)}}, _conditions_schema(), "config")
    return data["conditions"][name]
