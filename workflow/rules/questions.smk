# VisArgs with an LLM question writer: the questions about each (image, visual premise),
# written once (every call cached by content in the LLM cache under the writer's
# cache_dir, default results/cache/llm) and read by the `samples` rule.


rule questions:
    input:
        wild(data.samples_sources, questions=False),
    output:
        paths.QUESTIONS,
    log:
        "logs/questions/{dataset}.log",
    benchmark:
        "logs/benchmarks/questions/{dataset}.tsv"
    conda:
        "../../envs/judge.yaml"
    params:
        spec=wild(data.samples_spec, as_json=True),
        cache_dir=lambda wildcards: (
            PLAN.datasets[wildcards.dataset]["question_writer"].get("cache_dir")
            or paths.LLM_CACHE
        ),
    shell:
        "vlmrobust write-questions --name {wildcards.dataset} --spec {params.spec:q}"
        " --cache-dir {params.cache_dir} --out {output} > {log} 2>&1"
