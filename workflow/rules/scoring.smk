# Stage 4: outputs -> scored (the benchmark's rules on every answer), and a summary.


rule score:
    input:
        outputs=paths.OUTPUTS,
        samples=paths.SAMPLES,
    output:
        paths.SCORED,
    log:
        "logs/score/{model}/{dataset}/{condition}/{prompt}.log",
    conda:
        "../../envs/data.yaml"
    params:
        scorer=wild(scoring.score_param, name="scorer"),
        released=wild(scoring.use_released),
        fallback=wild(scoring.score_param, name="fallback"),
        unparsed_choice=wild(scoring.score_param, name="unparsed_choice"),
        cache_dir=wild(scoring.score_param, name="cache_dir"),
        mode=wild(scoring.score_param, name="mode"),
        compare=wild(scoring.score_param, name="compare_modes"),
        seed=wild(scoring.score_param, name="seed"),
        judge=wild(scoring.score_param, name="judge"),
    shell:
        "vlmrobust score --outputs {input.outputs} --samples {input.samples}"
        " --scorer {params.scorer} --fallback {params.fallback:q} {params.released}"
        " --unparsed-choice {params.unparsed_choice}"
        " --mode {params.mode} {params.compare} --seed {params.seed} --judge {params.judge:q}"
        " --cache-dir {params.cache_dir} --out {output} > {log} 2>&1"


rule score_summary:
    input:
        scoring.scored_files(PLAN),
    output:
        paths.SCORE_SUMMARY,
    log:
        "logs/score/summary.log",
    conda:
        "../../envs/data.yaml"
    shell:
        "vlmrobust score-summary --out {output} {input} > {log} 2>&1"


# The run's last check: a request that failed after every retry is no answer (excluded
# from the metrics and counted); with scoring.on_request_error: fail the run fails here,
# after every table is written, and the next run asks only those requests again.
rule check_requests:
    input:
        outputs=[
            f for model in PLAN.models for f in inference.output_files(PLAN, model)
        ],
        after=lambda wildcards: [paths.SCORE_SUMMARY] + study_targets(),
    output:
        paths.REQUESTS,
    log:
        "logs/check_requests.log",
    conda:
        "../../envs/data.yaml"
    params:
        mode=config["scoring"]["on_request_error"],
    shell:
        "vlmrobust check-requests --on-error {params.mode} --out {output}"
        " --log {log} {input.outputs}"
