# Contrastive Region Masking (CRM): outputs of both stages on the clean and the masked
# images -> compared rows (step alignment, answer flips, region attribution); the
# hallucination judge (judges.smk) and the masking study (studies.smk) read them.


rule compare_masking:
    input:
        unpack(wild(judges.compare_inputs)),
    output:
        paths.COMPARED,
    log:
        "logs/compare/{model}/{dataset}/{condition}.log",
    benchmark:
        "logs/benchmarks/compare/{model}/{dataset}/{condition}.tsv"
    wildcard_constraints:
        condition=alternation(PLAN.conditions_with("mask")),
    conda:
        "../../envs/judge.yaml"
    params:
        spec=wild(judges.compare_spec, as_json=True),
    shell:
        "vlmrobust compare-masking --spec {params.spec:q}"
        " --clean-cot {input.clean_cot} --clean-answer {input.clean_answer}"
        " --masked-cot {input.masked_cot} --masked-answer {input.masked_answer}"
        " --manifest {input.manifest} --samples {input.samples}"
        " --out {output} > {log} 2>&1"
