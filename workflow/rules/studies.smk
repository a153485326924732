# Stage 5, generic over the studies (vlmrobust.studies): stage files -> tidy metrics ->
# tables, figures and pages. {folder} is a study's folder: `corruption` (pooled over the
# datasets) or `<study>/<dataset>`; each study says what it reads and which files it has.


rule metrics:
    input:
        unpack(study_inputs),
    output:
        metrics=paths.METRICS,
        warnings=paths.WARNINGS,
    log:
        "logs/metrics/{folder}.log",
    benchmark:
        "logs/benchmarks/metrics/{folder}.tsv"
    conda:
        "../../envs/report.yaml"
    params:
        study=study_name,
        scope=study_scope,
        spec=study_spec,
        inputs=study_inputs_json,
    shell:
        "vlmrobust metrics --study {params.study} --scope={params.scope:q}"
        " --spec {params.spec:q} --inputs {params.inputs:q}"
        " --out {output.metrics} --warnings {output.warnings} > {log} 2>&1"


# Every table, figure and page of a folder, built by one process from one reading of
# its metrics (a view job of its own would spend most of its time starting Python and
# importing pandas and matplotlib); the rules below put each file in its place.
rule views:
    input:
        unpack(view_inputs),
    output:
        directory(paths.VIEWS),
    log:
        "logs/views/{folder}.log",
    benchmark:
        "logs/benchmarks/views/{folder}.tsv"
    conda:
        "../../envs/report.yaml"
    params:
        study=study_name,
        scope=study_scope,
        spec=study_spec,
        inputs=view_inputs_json,
        # the formats a table is written in: a new one (html) rewrites the views
        formats=" ".join(TABLE_EXTS),
    shell:
        "vlmrobust views --study {params.study} --scope={params.scope:q}"
        " --spec {params.spec:q} --inputs {params.inputs:q} --metrics {input.metrics}"
        " --out-dir {output} > {log} 2>&1"


rule table:
    input:
        paths.VIEWS,
    output:
        report(
            f"{paths.TABLE}.csv",
            caption="../report/view.rst",
            category=study_title,
            subcategory="Tables",
        ),
        multiext(paths.TABLE, ".md", ".tex", ".html"),
    log:
        "logs/tables/{folder}/{name}.log",
    conda:
        "../../envs/report.yaml"
    params:
        caption=study_caption("table"),
        out_dir=lambda w: path(paths.TABLES, folder=w.folder),
    shell:
        "cp {input}/tables/{wildcards.name}.csv {input}/tables/{wildcards.name}.md"
        " {input}/tables/{wildcards.name}.tex {input}/tables/{wildcards.name}.html"
        " {params.out_dir}/ > {log} 2>&1"


rule figure:
    input:
        paths.VIEWS,
    output:
        report(
            f"{paths.FIGURE}.png",
            caption="../report/view.rst",
            category=study_title,
            subcategory="Figures",
        ),
        f"{paths.FIGURE}.pdf",
    log:
        "logs/figures/{folder}/{name}.log",
    conda:
        "../../envs/report.yaml"
    params:
        caption=study_caption("figure"),
        out_dir=lambda w: path(paths.FIGURES, folder=w.folder),
    shell:
        "cp {input}/figures/{wildcards.name}.png {input}/figures/{wildcards.name}.pdf"
        " {params.out_dir}/ > {log} 2>&1"


rule page:
    input:
        paths.VIEWS,
    output:
        f"{paths.FIGURE}.html",
    log:
        "logs/pages/{folder}/{name}.log",
    conda:
        "../../envs/report.yaml"
    shell:
        "cp {input}/figures/{wildcards.name}.html {output} > {log} 2>&1"
