# Judges (vlmrobust.judges): labels on model outputs, each its own job and file. Every LLM
# call goes through the content-addressed cache under scoring.cache_dir, so a rerun makes
# no call it made before.


rule judge_reference:
    input:
        outputs=paths.OUTPUTS,
        samples=paths.SAMPLES,
    output:
        paths.JUDGED,
    log:
        "logs/judge/{model}/{dataset}/{condition}/{prompt}.log",
    conda:
        "../../envs/judge.yaml"
    params:
        spec=wild(judges.reference_judge_spec, as_json=True),
        released=wild(scoring.use_released),
        cache_dir=config["scoring"]["cache_dir"],
    shell:
        "vlmrobust judge-reference --outputs {input.outputs} --samples {input.samples}"
        " --spec {params.spec:q} --cache-dir {params.cache_dir} {params.released}"
        " --out {output} > {log} 2>&1"


# Verdicts-only imports (config `imports` with `references` and no `path`): the released
# distractor-reference verdicts are the judged file; there are no outputs to judge.
ruleorder: import_verdicts > judge_reference


rule import_verdicts:
    input:
        unpack(wild(data.verdict_inputs)),
    output:
        paths.IMPORTED_VERDICTS,
    log:
        "logs/import-verdicts/{imported}.log",
    wildcard_constraints:
        imported=alternation(PLAN.verdict_imports),
    conda:
        "../../envs/data.yaml"
    params:
        spec=wild(data.verdict_spec, as_json=True),
    shell:
        "vlmrobust import-verdicts --spec {params.spec:q} --samples {input.samples}"
        " --references {input.references} --out {output} > {log} 2>&1"


# CRM: does the chain on the masked image hallucinate the hidden content? Reads the
# compared rows (masking.smk); the masking study joins its verdicts onto them.
rule judge_hallucination:
    input:
        paths.COMPARED,
    output:
        paths.HALLUCINATION,
    log:
        "logs/judge-hallucination/{model}/{dataset}/{condition}.log",
    benchmark:
        "logs/benchmarks/judge-hallucination/{model}/{dataset}/{condition}.tsv"
    wildcard_constraints:
        condition=alternation(PLAN.conditions_with("mask")),
    conda:
        "../../envs/judge.yaml"
    params:
        spec=wild(judges.hallucination_judge_spec, as_json=True),
        cache_dir=config["scoring"]["cache_dir"],
    shell:
        "vlmrobust judge-hallucination --compared {input} --spec {params.spec:q}"
        " --cache-dir {params.cache_dir} --out {output} > {log} 2>&1"


# Idis-math: the MathVerse two-stage judge on every output of a mathverse dataset.
rule judge_mathverse:
    input:
        outputs=paths.OUTPUTS,
        samples=paths.SAMPLES,
    output:
        paths.MATH_JUDGED,
    log:
        "logs/judge-mathverse/{model}/{dataset}/{condition}/{prompt}.log",
    # an LLM engine writes these files when the judge's LLM is local (inference.smk)
    wildcard_constraints:
        dataset=alternation(engines.judge_rule_datasets(PLAN)),
    conda:
        "../../envs/judge.yaml"
    params:
        spec=wild(judges.math_judge_spec, as_json=True),
    shell:
        "vlmrobust judge-mathverse --outputs {input.outputs} --samples {input.samples}"
        " --spec {params.spec:q} --out {output} > {log} 2>&1"


# Idis: every attribute extractor reads every reasoning trace of an Idis dataset
# (adapter imagenet9, mathverse or waterbirds) and sorts its literal evidence phrases
# into the task's categories; the variant says which are the distractor's.
rule judge_attributes:
    input:
        outputs=paths.OUTPUTS,
        samples=paths.SAMPLES,
        manifest=paths.MANIFEST,
        resources=wild(judges.attribute_resources),
    output:
        paths.ATTRIBUTES,
    log:
        "logs/judge-attributes/{extractor}/{model}/{dataset}/{condition}/{prompt}.log",
    # an LLM engine writes the files of an extractor whose LLM is local (inference.smk)
    wildcard_constraints:
        extractor=alternation(engines.judge_rule_extractors(PLAN)),
    conda:
        "../../envs/judge.yaml"
    params:
        spec=wild(judges.attribute_spec, as_json=True),
        task=wild(idis.idis_task),
    shell:
        "vlmrobust judge-attributes --outputs {input.outputs} --samples {input.samples}"
        " --manifest {input.manifest} --task {params.task} --extractor {wildcards.extractor}"
        " --spec {params.spec:q} --out {output} > {log} 2>&1"
