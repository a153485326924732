# Stage 1: datasets -> samples (one sample schema for every benchmark).


rule demo_data:
    output:
        rows=expand(
            "results/raw/demo/{family}/rows.jsonl", family=config["demo"]["families"]
        ),
        summary="results/raw/demo/summary.json",
    log:
        "logs/demo_data.log",
    benchmark:
        "logs/benchmarks/demo_data.tsv"
    conda:
        "../../envs/data.yaml"
    params:
        n_per_family=config["demo"]["n_per_family"],
        image_size=config["demo"]["image_size"],
        families=config["demo"]["families"],
        seed=config["seed"],
    shell:
        "vlmrobust demo-data --out results/raw/demo"
        " --n-per-family {params.n_per_family} --image-size {params.image_size}"
        " --seed {params.seed} --families {params.families} > {log} 2>&1"


rule demo_idis:
    output:
        summary="results/raw/demo-idis/summary.json",
    log:
        "logs/demo_idis.log",
    benchmark:
        "logs/benchmarks/demo_idis.tsv"
    conda:
        "../../envs/data.yaml"
    params:
        seed=config["seed"],
    shell:
        "vlmrobust demo-idis --out results/raw/demo-idis --seed {params.seed}"
        " --n-problems 20 > {log} 2>&1"


rule samples:
    input:
        samples_input,
    output:
        samples="results/samples/{dataset}/samples.jsonl",
        report="results/samples/{dataset}/report.json",
    log:
        "logs/samples/{dataset}.log",
    benchmark:
        "logs/benchmarks/samples/{dataset}.tsv"
    conda:
        "../../envs/data.yaml"
    params:
        spec=dataset_spec,
    shell:
        "vlmrobust samples --name {wildcards.dataset} --spec {params.spec:q}"
        " --out {output.samples} --report {output.report} > {log} 2>&1"
