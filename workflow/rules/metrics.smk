# Stage 5: scored -> metrics (tidy CSV) -> tables and figures of the corruption study.


rule metrics_corruption:
    input:
        unpack(lambda wildcards: corruption_study_inputs()),
    output:
        metrics="results/metrics/corruption/metrics.csv",
        warnings="results/metrics/corruption/warnings.txt",
    log:
        "logs/metrics/corruption.log",
    benchmark:
        "logs/benchmarks/metrics/corruption.tsv"
    conda:
        "../../envs/report.yaml"
    params:
        spec=corruption_metrics_spec,
    shell:
        "vlmrobust metrics-corruption --spec {params.spec:q}"
        " --scored {input.scored} --manifests {input.manifests}"
        " --out {output.metrics} --warnings {output.warnings} > {log} 2>&1"


rule tables_corruption:
    input:
        "results/metrics/corruption/metrics.csv",
    output:
        report(
            [t for t in corruption_tables() if t.endswith(".csv")],
            caption="../report/corruption_tables.rst",
            category="Vision-corruption study",
            subcategory="Tables",
        ),
        [t for t in corruption_tables() if not t.endswith(".csv")],
    log:
        "logs/tables/corruption.log",
    conda:
        "../../envs/report.yaml"
    params:
        spec=corruption_metrics_spec,
    shell:
        "vlmrobust tables-corruption --spec {params.spec:q} --metrics {input}"
        " --out-dir results/tables/corruption > {log} 2>&1"


rule figures_corruption:
    input:
        "results/metrics/corruption/metrics.csv",
    output:
        report(
            corruption_figures(ext=["png"]),
            caption="../report/corruption_figures.rst",
            category="Vision-corruption study",
            subcategory="Figures",
        ),
        corruption_figures(ext=["pdf"]),
    log:
        "logs/figures/corruption.log",
    conda:
        "../../envs/report.yaml"
    params:
        spec=corruption_metrics_spec,
    shell:
        "vlmrobust figures-corruption --spec {params.spec:q} --metrics {input}"
        " --out-dir figures/corruption > {log} 2>&1"
