# Stage 2: samples -> variants (one manifest per dataset x condition).


rule variants:
    input:
        samples=paths.SAMPLES,
        extra=wild(data.condition_inputs),
    output:
        manifest=paths.MANIFEST,
    log:
        "logs/variants/{dataset}/{condition}.log",
    benchmark:
        "logs/benchmarks/variants/{dataset}/{condition}.tsv"
    conda:
        "../../envs/perturb.yaml"
    threads: config["threads"]["variants"]
    params:
        spec=wild(data.condition_spec, as_json=True),
        seed=config["seed"],
        max_pixels=lambda w: PLAN.datasets[w.dataset]["max_pixels"],
        image_format=config["variants"]["format"],
    shell:
        "vlmrobust variants --samples {input.samples} --condition {wildcards.condition}"
        " --spec {params.spec:q} --seed {params.seed} --threads {threads}"
        " --max-pixels {params.max_pixels} --image-format {params.image_format}"
        " --out {output.manifest} > {log} 2>&1"
