# Stage 6: the explorer (docs/explorer.md), a static site under results/explorer/: one
# folder per variant set (thumbnails, parameters) and per cell (a model's answers to one
# dataset x condition x prompt, paired with its clean ones), then the index and the app.
# Adding a model adds its cells and rewrites the index; nothing else reruns.


rule explorer_variants:
    input:
        unpack(explorer_variants_inputs),
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


rule explorer_cell:
    input:
        unpack(explorer_cell_inputs),
    output:
        directory(paths.EXPLORER_CELL),
    log:
        "logs/explorer/cells/{model}/{dataset}/{condition}/{prompt}.log",
    conda:
        "../../envs/report.yaml"
    params:
        args=explorer_cell_args,
    shell:
        "vlmrobust explorer-cell --scored {input.scored} --outputs {input.outputs}"
        " {params.args} --out-dir {output} > {log} 2>&1"


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
        out_dir=lambda w, output: os.path.dirname(output.index),
    shell:
        "vlmrobust explorer-index --spec {params.spec:q} --cells {input.cells}"
        " --variants {input.variants} --out-dir {params.out_dir} > {log} 2>&1"
