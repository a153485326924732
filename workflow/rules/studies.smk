# Stage 5, generic over the studies (vlmrobust.studies): stage files -> tidy metrics ->
# tables, figures and pages. {folder} is a study's folder: `corruption` (pooled over the
# datasets) or `<study>/<dataset>`; each study says what it reads and which files it has.


rule metrics:
    input:
        unpack(by_study(lambda study, scope: study.metrics_inputs(PLAN, scope))),
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
        study=by_study(lambda study, scope: study.name),
        scope=by_study(lambda study, scope: scope),
        spec=by_study(lambda study, scope: spec_json(study.run_spec(PLAN, scope))),
        inputs=by_study(
            lambda study, scope: study.metrics_inputs(PLAN, scope), as_json=True
        ),
    shell:
        "vlmrobust metrics --study {params.study} --scope={params.scope:q}"
        " --spec {params.spec:q} --inputs {params.inputs:q}"
        " --out {output.metrics} --warnings {output.warnings} > {log} 2>&1"


# Every table, figure and page of a folder, built by one process from one reading of
# its metrics (a view job of its own would spend most of its time starting Python and
# importing pandas and matplotlib); the rules below put each file in its place.
rule views:
    input:
        unpack(
            by_study(
                lambda study, scope: {
                    "metrics": study.metrics_path(scope),
                    **study.view_inputs(PLAN, scope),
                }
            )
        ),
    output:
        directory(paths.VIEWS),
    log:
        "logs/views/{folder}.log",
    benchmark:
        "logs/benchmarks/views/{folder}.tsv"
    conda:
        "../../envs/report.yaml"
    params:
        study=by_study(lambda study, scope: study.name),
        scope=by_study(lambda study, scope: scope),
        spec=by_study(lambda study, scope: spec_json(study.run_spec(PLAN, scope))),
        inputs=by_study(
            lambda study, scope: study.view_inputs(PLAN, scope), as_json=True
        ),
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
            category=by_study(lambda study, scope: study.title),
            subcategory="Tables",
        ),
        multiext(paths.TABLE, ".md", ".tex", ".html"),
    log:
        "logs/tables/{folder}/{name}.log",
    conda:
        "../../envs/report.yaml"
    params:
        caption=lambda w: STUDY_FOLDERS[w.folder][0].view_caption("table", w.name),
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
            category=by_study(lambda study, scope: study.title),
            subcategory="Figures",
        ),
        f"{paths.FIGURE}.pdf",
    log:
        "logs/figures/{folder}/{name}.log",
    conda:
        "../../envs/report.yaml"
    params:
        caption=lambda w: STUDY_FOLDERS[w.folder][0].view_caption("figure", w.name),
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
