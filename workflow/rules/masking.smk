# Contrastive Region Masking (CRM): outputs of both stages on the clean and the masked
# images -> compared rows (the masking study's metrics read them: studies.smk).


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
