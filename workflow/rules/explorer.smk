# Stage 6: the explorer (docs/explorer.md), a static site under results/explorer/: one
# folder per variant set (thumbnails, parameters) and per cell (a model's answers to one
# dataset x condition x prompt, paired with its clean ones), then the index and the app.
# One job writes a model's cells on one dataset. Adding a model adds its cells and
# rewrites the index; nothing else reruns.


rule explorer_variants:
    input:
        unpack(wild(EXPLORER_PLAN.variants_inputs)),
    output:
        directory(paths.EXPLORER_VARIANTS),
    log:
        "logs/explorer/variants/{dataset}/{condition}.log",
    benchmark:
        "logs/benchmarks/explorer/variants/{dataset}/{condition}.tsv"
    conda:
        "../../envs/report.yaml"
    shell:
        "vlmrobust explorer-variants --manifest {input.manifest} --samples {input.samples}"
        " --out-dir {output} > {log} 2>&1"


rule explorer_cells:
    input:
        wild(EXPLORER_PLAN.group_inputs),
    output:
        directory(paths.EXPLORER_CELLS),
    log:
        "logs/explorer/cells/{model}/{dataset}.log",
    conda:
        "../../envs/report.yaml"
    params:
        spec=wild(EXPLORER_PLAN.group_cells, as_json=True),
    shell:
        "vlmrobust explorer-cells --spec {params.spec:q} --out-dir {output} > {log} 2>&1"


rule explorer_index:
    input:
        **EXPLORER_PLAN.index_inputs(PLAN),
    output:
        index=paths.EXPLORER_INDEX,
        page=paths.EXPLORER_PAGE,
    log:
        "logs/explorer/index.log",
    conda:
        "../../envs/report.yaml"
    params:
        spec=lambda w: spec_json(EXPLORER_PLAN.index_spec(PLAN)),
        # a new version of the app's files rewrites them (the rule's code is unchanged)
        assets=assets_fingerprint(),
        # every cell's folder (the inputs are the folders of their jobs)
        cells=" ".join(EXPLORER_PLAN.cell_dir(*c) for c in EXPLORER_PLAN.cells(PLAN)),
        out_dir=lambda w, output: os.path.dirname(output.index),
    shell:
        "vlmrobust explorer-index --spec {params.spec:q} --cells {params.cells}"
        " --variants {input.variants} --out-dir {params.out_dir} > {log} 2>&1"
