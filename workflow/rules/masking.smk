# Contrastive Region Masking (CRM): outputs of both stages on the clean and the masked
# images -> compared rows -> metrics -> Tables 2-5 and the example figures.


rule compare_masking:
    input:
        unpack(compare_input),
    output:
        "results/compared/{model}/{dataset}/{condition}.jsonl",
    log:
        "logs/compare/{model}/{dataset}/{condition}.log",
    benchmark:
        "logs/benchmarks/compare/{model}/{dataset}/{condition}.tsv"
    wildcard_constraints:
        condition=alternation(MASK_CONDITIONS),
    conda:
        "../../envs/judge.yaml"
    params:
        spec=compare_spec,
        cache_dir=config["scoring"]["cache_dir"],
    shell:
        "vlmrobust compare-masking --spec {params.spec:q}"
        " --clean-cot {input.clean_cot} --clean-answer {input.clean_answer}"
        " --masked-cot {input.masked_cot} --masked-answer {input.masked_answer}"
        " --manifest {input.manifest} --samples {input.samples}"
        " --cache-dir {params.cache_dir} --out {output} > {log} 2>&1"


rule metrics_masking:
    input:
        compared_input,
    output:
        "results/metrics/masking/{dataset}/metrics.csv",
    log:
        "logs/metrics/masking/{dataset}.log",
    conda:
        "../../envs/report.yaml"
    params:
        spec=masking_spec_json,
    shell:
        "vlmrobust metrics-masking --spec {params.spec:q} --out {output}"
        " {input} > {log} 2>&1"


rule tables_masking:
    input:
        metrics="results/metrics/masking/{dataset}/metrics.csv",
        compared=compared_input,
    output:
        report(
            "results/tables/masking/{dataset}/table2.csv",
            caption="../report/masking_tables.rst",
            category="Region-masking study",
            subcategory="Tables",
        ),
        "results/tables/masking/{dataset}/table3.csv",
        "results/tables/masking/{dataset}/table4.csv",
        "results/tables/masking/{dataset}/table5.csv",
        multiext("results/tables/masking/{dataset}/table2", ".md", ".tex"),
        multiext("results/tables/masking/{dataset}/table3", ".md", ".tex"),
        multiext("results/tables/masking/{dataset}/table4", ".md", ".tex"),
        multiext("results/tables/masking/{dataset}/table5", ".md", ".tex"),
    log:
        "logs/tables/masking/{dataset}.log",
    conda:
        "../../envs/report.yaml"
    params:
        spec=masking_spec_json,
    shell:
        "vlmrobust tables-masking --spec {params.spec:q} --metrics {input.metrics}"
        " --out-dir results/tables/masking/{wildcards.dataset}"
        " {input.compared} > {log} 2>&1"


rule figures_masking:
    input:
        compared_input,
    output:
        [
            report(
                f"figures/masking/{{dataset}}/example{i}.png",
                caption="../report/masking_figures.rst",
                category="Region-masking study",
                subcategory="Examples",
            )
            for i in range(1, config["masking"]["examples"] + 1)
        ],
        expand(
            "figures/masking/{{dataset}}/example{i}.{ext}",
            i=range(1, config["masking"]["examples"] + 1),
            ext=("pdf", "html"),
        ),
    log:
        "logs/figures/masking/{dataset}.log",
    conda:
        "../../envs/report.yaml"
    params:
        spec=masking_spec_json,
    shell:
        "vlmrobust figures-masking --spec {params.spec:q}"
        " --out-dir figures/masking/{wildcards.dataset} {input} > {log} 2>&1"
