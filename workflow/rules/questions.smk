# VisArgs with an LLM question writer: the questions about each (image, visual premise),
# written once (every call cached by content in the LLM cache under the writer's
# cache_dir, default results/cache/llm) and read by the `samples` rule.


rule questions:
    input:
        lambda wildcards: samples_input(wildcards, questions=False),
    output:
        paths.QUESTIONS,
    log:
        "logs/questions/{dataset}.log",
    benchmark:
        "logs/benchmarks/questions/{dataset}.tsv"
    conda:
        "../../envs/judge.yaml"
    params:
        spec=dataset_spec,
        cache_dir=lambda wildcards: (
            DATASETS[wildcards.dataset]["question_writer"].get("cache_dir")
            or paths.LLM_CACHE
        ),
    shell:
        "vlmrobust write-questions --name {wildcards.dataset} --spec {params.spec:q}"
        " --cache-dir {params.cache_dir} --out {output} > {log} 2>&1"
