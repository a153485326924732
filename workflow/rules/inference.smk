# Stage 3: variants -> outputs (one job per model x dataset x condition x prompt [x shard]).


# The demo models' training split: demo data drawn with its own seed, never evaluated.
rule demo_train_data:
    output:
        summary=paths.DEMO_TRAIN_SUMMARY,
    log:
        "logs/demo_train_data.log",
    priority: 50
    conda:
        "../../envs/data.yaml"
    params:
        out=lambda w, output: str(Path(output.summary).parent),
        n_per_family=config["demo"]["train"]["n_per_family"],
        image_size=config["demo"]["image_size"],
        seed=config["demo"]["train"]["seed"],
        version=DEMO_VERSION,
    shell:
        "vlmrobust demo-data --out {params.out}"
        " --n-per-family {params.n_per_family} --image-size {params.image_size}"
        " --seed {params.seed} > {log} 2>&1"


# A demo model: built, then trained on the training split (a reasoning demo model is
# fine-tuned from its demo base's checkpoint).
rule demo_model:
    input:
        wild(inference.demo_model_inputs),
    output:
        paths.MODEL_RECORD,
    log:
        "logs/demo_model/{model}.log",
    benchmark:
        "logs/benchmarks/demo_model/{model}.tsv"
    # The trainings are the default run's critical path: before anything that can wait.
    priority: 50
    conda:
        "../../envs/infer.yaml"
    threads: config["demo"]["train"]["threads"]
    # The training split's pixels are held in memory (about 5 GB at the defaults).
    resources:
        mem_mb=8000,
        runtime=30,
    params:
        spec=wild(inference.demo_model_spec, as_json=True),
        out=lambda w: path(paths.MODEL_DIR, model=w.model),
    shell:
        "vlmrobust demo-model --out {params.out} --spec {params.spec:q} > {log} 2>&1"


# API models (openai, gemini) answer through the network: one job per cell, no GPU,
# one thread; memory and time limit from the registry.
rule infer:
    input:
        manifest=paths.MANIFEST,
        samples=paths.SAMPLES,
        model=wild(inference.model_files),
        context=wild(inference.infer_context),
    output:
        paths.SHARD,
    log:
        "logs/infer/{model}/{dataset}/{condition}/{prompt}/shard{shard}of{shards}.log",
    benchmark:
        "logs/benchmarks/infer/{model}/{dataset}/{condition}/{prompt}/shard{shard}of{shards}.tsv"
    wildcard_constraints:
        model=alternation(inference.api_models(PLAN)),
    conda:
        "../../envs/infer.yaml"
    threads: 1
    resources:
        gpu=0,
        mem_mb=wild(inference.model_resource, name="mem_mb"),
        runtime=wild(inference.model_resource, name="runtime"),
    params:
        spec=wild(inference.infer_spec, as_json=True),
        context=lambda w, input: f"--context {input.context}" if input.context else "",
    shell:
        "vlmrobust infer --spec {params.spec:q} --manifest {input.manifest}"
        " --samples {input.samples} {params.context} --threads {threads}"
        " --out {output} > {log} 2>&1"


# A local model's engine rewrites every shard it answers when it reruns for one of its
# cells (the others' rows come from their resume caches, unchanged): the shards are
# therefore `ancient` here, and what changes a cell's rows (its manifest, samples,
# model, first-stage outputs and job spec) is what reruns its gathering.
rule gather_outputs:
    input:
        manifest=paths.MANIFEST,
        shards=wild(engines.shard_files, each=ancient),
        samples=paths.SAMPLES,
        model=wild(inference.model_files),
        context=wild(inference.infer_context),
    output:
        paths.OUTPUTS,
    log:
        "logs/gather/{model}/{dataset}/{condition}/{prompt}.log",
    conda:
        "../../envs/data.yaml"
    params:
        specs=wild(engines.cell_specs, as_json=True),
    shell:
        "vlmrobust gather --manifest {input.manifest} --out {output}"
        " {input.shards} > {log} 2>&1"


# An engine: one local model (backends hf, vllm), loaded once, answers a share of the
# model's cells of one phase (config `service.engines`): its plan file names them, its
# outputs are their shard files (docs/architecture.md, "Engines"). On a cluster each
# engine is one SLURM job on the model's GPUs. The plan is rewritten when a cell's spec
# changes, which reruns the engine; every other cell's rows come from its resume cache.
rule engine_plan:
    output:
        paths.ENGINE,
    log:
        "logs/engines/{model}/phase{phase}/engine{engine}.plan.log",
    wildcard_constraints:
        model=alternation(inference.local_models(PLAN) + engines.llm_models(PLAN)),
        phase=r"\d+",
        engine=r"(hf|vllm)?\d+",
    localrule: True
    params:
        plan=wild(engines.engine_plan_text),
    run:
        hooks.write_engine_plan(output[0], log[0], params.plan)


for _model, _phase, _engine in engines.engines(PLAN):

    rule:
        name:
            engines.engine_rule_name(_model, _phase, _engine)
        input:
            plan=path(paths.ENGINE, model=_model, phase=_phase, engine=_engine),
            files=engines.engine_inputs(PLAN, _model, _phase, _engine),
        output:
            engines.engine_clients(PLAN, _model, _phase, _engine),
        log:
            f"logs/engines/{_model}/phase{_phase}/engine{_engine}.log",
        benchmark:
            f"logs/benchmarks/engines/{_model}/phase{_phase}/engine{_engine}.tsv"
        conda:
            (
                "../../envs/vllm.yaml"
                if engines.engine_backend(PLAN, _model, _engine)[0] == "vllm"
                else "../../envs/infer.yaml"
            )
        threads: config["threads"]["infer"]
        # the model's own, from the registry (config/models.yaml `resources`); its
        # cells run one after another, so their runtimes add up
        resources:
            **config["cluster"]["engine_resources"],
            gpu=inference.model_resource(PLAN, _model, "gpu"),
            mem_mb=inference.model_resource(PLAN, _model, "mem_mb"),
            runtime=engines.engine_runtime(PLAN, _model, _phase, _engine),
            # a resource, not a parameter: a change does not rerun the engine
            wait_log_s=config["service"]["wait_log_s"],
        params:
            cli=hooks.engine_cli(PLAN, _model, _engine, workflow),
        shell:
            "{params.cli} infer-engine --plan {input.plan} --threads {threads}"
            " --wait-log-s {resources.wait_log_s} > {log} 2>&1"


# An LLM engine: one local LLM of the judges (config `llm: <id>`: the MathVerse judge, an
# attribute extractor), loaded once, judges a share of that LLM's judged files (config
# `service.engines`), its calls pooled across them; its outputs are those judged files.
# On a cluster each is one SLURM job on the LLM's GPUs (registry `resources`).
for _model, _engine in engines.llm_engines(PLAN):

    rule:
        name:
            engines.llm_engine_rule_name(_model, _engine)
        input:
            plan=path(paths.ENGINE, model=_model, phase=0, engine=_engine),
            files=engines.llm_engine_inputs(PLAN, _model, _engine),
        output:
            [c.out for c in engines.llm_engine_cells(PLAN, _model, _engine)],
        log:
            f"logs/engines/{_model}/phase0/engine{_engine}.log",
        benchmark:
            f"logs/benchmarks/engines/{_model}/phase0/engine{_engine}.tsv"
        conda:
            (
                "../../envs/vllm.yaml"
                if PLAN.registry[_model]["backend"] == "vllm"
                else "../../envs/judge.yaml"
            )
        threads: config["threads"]["infer"]
        resources:
            **config["cluster"]["engine_resources"],
            gpu=inference.model_resource(PLAN, _model, "gpu"),
            mem_mb=inference.model_resource(PLAN, _model, "mem_mb"),
            runtime=engines.llm_engine_runtime(PLAN, _model, _engine),
            wait_log_s=config["service"]["wait_log_s"],
        params:
            cli=hooks.engine_cli(PLAN, _model, _engine, workflow),
        shell:
            "{params.cli} llm-engine --plan {input.plan} --threads {threads}"
            " --wait-log-s {resources.wait_log_s} > {log} 2>&1"


# Released outputs (config `imports`) instead of a model run: reviewers rebuild every
# table and figure without a GPU. They take precedence over running the model.
ruleorder: import_outputs > gather_outputs


rule import_outputs:
    input:
        unpack(wild(data.import_inputs)),
    output:
        paths.IMPORTED_OUTPUTS,
    log:
        "logs/import/{imported}.log",
    wildcard_constraints:
        imported=alternation(PLAN.output_imports),
    conda:
        "../../envs/data.yaml"
    params:
        spec=wild(data.import_spec, as_json=True),
        manifest=lambda w, input: (
            f"--manifest {input.manifest}" if "manifest" in input.keys() else ""
        ),
    shell:
        "vlmrobust import-outputs --spec {params.spec:q} --samples {input.samples}"
        " --samples-report {input.samples_report} {params.manifest}"
        " --released {input.released} --out {output} > {log} 2>&1"
