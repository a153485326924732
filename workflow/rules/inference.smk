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
        demo_model_inputs,
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
        spec=demo_model_spec,
        out=lambda w: path(paths.MODEL_DIR, model=w.model),
    shell:
        "vlmrobust demo-model --out {params.out} --spec {params.spec:q} > {log} 2>&1"


rule infer:
    input:
        manifest=paths.MANIFEST,
        samples=paths.SAMPLES,
        model=model_input,
        context=infer_context,
    output:
        paths.SHARD,
    log:
        "logs/infer/{model}/{dataset}/{condition}/{prompt}/shard{shard}of{shards}.log",
    benchmark:
        "logs/benchmarks/infer/{model}/{dataset}/{condition}/{prompt}/shard{shard}of{shards}.tsv"
    wildcard_constraints:
        model=alternation(HF_MODELS),
    # On a cluster, one group job with its engine (rule engine below).
    group:
        engine_group
    conda:
        "../../envs/infer.yaml"
    threads: config["threads"]["infer"]
    # Per model, from the registry's `resources` (config/models.yaml); in a cluster's
    # group job the engine holds the GPUs and its jobs ask for none (client_gpu).
    resources:
        gpu=client_gpu,
        mem_mb=infer_resource("mem_mb"),
        runtime=infer_resource("runtime"),
    params:
        cli="vlmrobust",
        spec=infer_spec,
        context=context_arg,
        # the model's service (config `service`): not part of what the job answers
        service=SERVICE_ARGS,
    shell:
        "{params.cli} infer --spec {params.spec:q} --manifest {input.manifest}"
        " --samples {input.samples} {params.context} --threads {threads}"
        " {params.service} --service-log logs/services/{wildcards.model}.log"
        " --out {output} > {log} 2>&1"


# Models with backend vllm: the same job in the vLLM environment (vLLM pins its own
# torch and transformers): config `environments.vllm`, or envs/vllm.yaml with conda.
use rule infer as infer_vllm with:
    log:
        "logs/infer/{model}/{dataset}/{condition}/{prompt}/shard{shard}of{shards}.log",
    benchmark:
        "logs/benchmarks/infer/{model}/{dataset}/{condition}/{prompt}/shard{shard}of{shards}.tsv"
    wildcard_constraints:
        model=alternation(VLLM_MODELS),
    conda:
        "../../envs/vllm.yaml"
    params:
        cli=vllm_cli,
        spec=infer_spec,
        context=context_arg,
        service=SERVICE_ARGS,


# API models (openai, gemini) answer through the network: no GPU, one thread; memory
# and time limit from the registry.
use rule infer as infer_api with:
    log:
        "logs/infer/{model}/{dataset}/{condition}/{prompt}/shard{shard}of{shards}.log",
    benchmark:
        "logs/benchmarks/infer/{model}/{dataset}/{condition}/{prompt}/shard{shard}of{shards}.tsv"
    wildcard_constraints:
        model=alternation(API_MODELS),
    threads: 1
    resources:
        gpu=0,
        mem_mb=infer_resource("mem_mb"),
        runtime=infer_resource("runtime"),


rule gather_outputs:
    input:
        manifest=paths.MANIFEST,
        shards=shard_files,
    output:
        paths.OUTPUTS,
    log:
        "logs/gather/{model}/{dataset}/{condition}/{prompt}.log",
    conda:
        "../../envs/data.yaml"
    shell:
        "vlmrobust gather --manifest {input.manifest} --out {output}"
        " {input.shards} > {log} 2>&1"


# An engine: one model service, on the model's GPUs, for a share of the model's
# inference jobs of one phase (config `service.engines`). Its small file takes those
# jobs' outputs as input, which ties them together: on a cluster the jobs and the
# engine are one group job (one allocation, one model load; the engine job holds the
# GPUs, the jobs ask for none). Locally there are no groups: the first job that needs
# the model starts its service and every later one connects (docs/architecture.md).
rule engine:
    input:
        engine_clients,
    output:
        paths.ENGINE,
    log:
        "logs/engines/{model}/phase{phase}/engine{engine}.log",
    wildcard_constraints:
        model=alternation(LOCAL_MODELS),
        phase=r"\d+",
        engine=r"\d+",
    group:
        engine_group
    conda:
        "../../envs/data.yaml"
    resources:
        gpu=infer_resource("gpu"),
        mem_mb=infer_resource("mem_mb"),
        runtime=engine_runtime,
    params:
        info=engine_info,
    shell:
        "echo {params.info:q} > {output} 2> {log}"


# Released outputs (config `imports`) instead of a model run: reviewers rebuild every
# table and figure without a GPU. They take precedence over running the model.
ruleorder: import_outputs > gather_outputs


rule import_outputs:
    input:
        unpack(import_input),
    output:
        paths.IMPORTED_OUTPUTS,
    log:
        "logs/import/{imported}.log",
    wildcard_constraints:
        imported=alternation(IMPORTS),
    conda:
        "../../envs/data.yaml"
    params:
        spec=import_spec,
        manifest=import_manifest_arg,
    shell:
        "vlmrobust import-outputs --spec {params.spec:q} --samples {input.samples}"
        " --samples-report {input.samples_report} {params.manifest}"
        " --released {input.released} --out {output} > {log} 2>&1"
