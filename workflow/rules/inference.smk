# Stage 3: variants -> outputs (one job per model x dataset x condition x prompt [x shard]).


rule demo_model:
    output:
        "results/models/{model}/vlmrobust_demo.json",
    log:
        "logs/demo_model/{model}.log",
    conda:
        "../../envs/infer.yaml"
    params:
        seed=demo_seed,
    shell:
        "vlmrobust demo-model --out results/models/{wildcards.model}"
        " --seed {params.seed} > {log} 2>&1"


rule infer:
    input:
        manifest="results/variants/{dataset}/{condition}/manifest.jsonl",
        samples="results/samples/{dataset}/samples.jsonl",
        model=model_input,
        context=infer_context,
    output:
        "results/outputs/{model}/{dataset}/{condition}/{prompt}/shard{shard}of{shards}.jsonl",
    log:
        "logs/infer/{model}/{dataset}/{condition}/{prompt}/shard{shard}of{shards}.log",
    benchmark:
        "logs/benchmarks/infer/{model}/{dataset}/{condition}/{prompt}/shard{shard}of{shards}.tsv"
    wildcard_constraints:
        model=alternation(LOCAL_MODELS),
    conda:
        "../../envs/infer.yaml"
    threads: config["threads"]["infer"]
    # Per model, from the registry's `resources` (config/models.yaml).
    resources:
        gpu=infer_resource("gpu"),
        mem_mb=infer_resource("mem_mb"),
        runtime=infer_resource("runtime"),
    params:
        spec=infer_spec,
        context=context_arg,
    shell:
        "vlmrobust infer --spec {params.spec:q} --manifest {input.manifest}"
        " --samples {input.samples} {params.context} --threads {threads}"
        " --out {output} > {log} 2>&1"


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
        manifest="results/variants/{dataset}/{condition}/manifest.jsonl",
        shards=shard_files,
    output:
        "results/outputs/{model}/{dataset}/{condition}/{prompt}.jsonl",
    log:
        "logs/gather/{model}/{dataset}/{condition}/{prompt}.log",
    conda:
        "../../envs/data.yaml"
    shell:
        "vlmrobust gather --manifest {input.manifest} --out {output}"
        " {input.shards} > {log} 2>&1"


# Released outputs (config `imports`) instead of a model run: reviewers rebuild every
# table and figure without a GPU. They take precedence over running the model.
ruleorder: import_outputs > gather_outputs


rule import_outputs:
    input:
        unpack(import_input),
    output:
        "results/outputs/{imported}.jsonl",
    log:
        "logs/import/{imported}.log",
    wildcard_constraints:
        imported=alternation(IMPORTS),
    conda:
        "../../envs/data.yaml"
    params:
        spec=import_spec,
    shell:
        "vlmrobust import-outputs --spec {params.spec:q} --samples {input.samples}"
        " --released {input.released} --out {output} > {log} 2>&1"
