# Building a distraction benchmark (Distract-Bench §3): candidates -> human review.


rule construct_candidates:
    input:
        unpack(wild(data.construct_inputs)),
    output:
        paths.CANDIDATES,
    log:
        "logs/construct/{construction}.log",
    benchmark:
        "logs/benchmarks/construct/{construction}.tsv"
    conda:
        "../../envs/judge.yaml"
    params:
        spec=wild(data.construct_spec, as_json=True),
        seed=config["seed"],
        cache_dir=config["scoring"]["cache_dir"],
        out_dir=lambda w: path(paths.CONSTRUCTION, construction=w.construction),
    shell:
        "vlmrobust construct --spec {params.spec:q} --samples {input.samples}"
        " --seed {params.seed} --cache-dir {params.cache_dir}"
        " --out-dir {params.out_dir} > {log} 2>&1"


rule review_page:
    input:
        candidates=paths.CANDIDATES,
        decisions=wild(data.existing_decisions),
    output:
        report(
            paths.REVIEW_PAGE,
            caption="../report/review.rst",
            category="Semantic-distraction study",
            subcategory="Construction",
        ),
    log:
        "logs/construct/{construction}.review.log",
    conda:
        "../../envs/data.yaml"
    params:
        decisions=wild(data.review_decisions),
    shell:
        "vlmrobust review --candidates {input.candidates} --decisions {params.decisions}"
        " --page {output} > {log} 2>&1"
