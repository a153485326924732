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


rule metrics_distraction:
    input:
        unpack(distraction_inputs),
    output:
        metrics="results/metrics/distraction/{dataset}/metrics.csv",
        warnings="results/metrics/distraction/{dataset}/warnings.txt",
    log:
        "logs/metrics/distraction/{dataset}.log",
    conda:
        "../../envs/report.yaml"
    params:
        spec=distraction_spec_json,
    shell:
        "vlmrobust metrics-distraction --spec {params.spec:q} --scored {input.scored}"
        " --judged {input.judged} --out {output.metrics}"
        " --warnings {output.warnings} > {log} 2>&1"


rule tables_distraction:
    input:
        "results/metrics/distraction/{dataset}/metrics.csv",
    output:
        report(
            "results/tables/distraction/{dataset}/table3.csv",
            caption="../report/distraction_tables.rst",
            category="Semantic-distraction study",
            subcategory="Tables",
        ),
        report(
            "results/tables/distraction/{dataset}/table4.csv",
            caption="../report/distraction_tables.rst",
            category="Semantic-distraction study",
            subcategory="Tables",
        ),
        report(
            "results/tables/distraction/{dataset}/table5.csv",
            caption="../report/distraction_tables.rst",
            category="Semantic-distraction study",
            subcategory="Tables",
        ),
        multiext("results/tables/distraction/{dataset}/table3", ".md", ".tex"),
        multiext("results/tables/distraction/{dataset}/table4", ".md", ".tex"),
        multiext("results/tables/distraction/{dataset}/table5", ".md", ".tex"),
    log:
        "logs/tables/distraction/{dataset}.log",
    conda:
        "../../envs/report.yaml"
    params:
        spec=distraction_spec_json,
    shell:
        "vlmrobust tables-distraction --spec {params.spec:q} --metrics {input}"
        " --out-dir results/tables/distraction/{wildcards.dataset} > {log} 2>&1"


rule figures_distraction:
    input:
        "results/metrics/distraction/{dataset}/metrics.csv",
    output:
        report(
            "figures/distraction/{dataset}/figure5.png",
            caption="../report/distraction_figures.rst",
            category="Semantic-distraction study",
            subcategory="Figures",
        ),
        report(
            "figures/distraction/{dataset}/figure6.png",
            caption="../report/distraction_figures.rst",
            category="Semantic-distraction study",
            subcategory="Figures",
        ),
        "figures/distraction/{dataset}/figure5.pdf",
        "figures/distraction/{dataset}/figure6.pdf",
    log:
        "logs/figures/distraction/{dataset}.log",
    conda:
        "../../envs/report.yaml"
    params:
        spec=distraction_spec_json,
    shell:
        "vlmrobust figures-distraction --spec {params.spec:q} --metrics {input}"
        " --out-dir figures/distraction/{wildcards.dataset} > {log} 2>&1"
