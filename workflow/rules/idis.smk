# Idis analyses on files (vlmrobust.perturb.areas, vlmrobust.infer.blocking): the
# distractor area of every variant that places distractors, and the attention-blocking
# re-answers of chosen outputs (config idis).


# r_area = A_dist / (A_dist + A_target): the areas the perturbation recorded (exact),
# else the change mask between the edited and the original image.
rule idis_areas:
    input:
        manifest=paths.MANIFEST,
        samples=paths.SAMPLES,
    output:
        paths.AREAS,
    log:
        "logs/idis-areas/{dataset}/{condition}.log",
    conda:
        "../../envs/data.yaml"
    params:
        spec=wild(idis.areas_spec, as_json=True),
    shell:
        "vlmrobust idis-areas --manifest {input.manifest} --samples {input.samples}"
        " --spec {params.spec:q} --out {output} > {log} 2>&1"


# The final answer generated again after the model's own trace, with the attention from
# the answer to the distractor (or target) attribute phrases blocked; scored like the
# outputs. A local checkpoint's job: the model's GPU resources.
rule block_attention:
    input:
        unpack(wild(idis.blocking_inputs)),
    output:
        paths.BLOCKED,
    log:
        "logs/block-attention/{model}/{dataset}/{condition}/{prompt}.log",
    wildcard_constraints:
        model=alternation(inference.local_models(PLAN)),
    conda:
        "../../envs/infer.yaml"
    threads: config["threads"]["infer"]
    resources:
        gpu=wild(inference.model_resource, name="gpu"),
        mem_mb=wild(inference.model_resource, name="mem_mb"),
        runtime=wild(inference.model_resource, name="runtime"),
    params:
        spec=wild(idis.blocking_spec, as_json=True),
    shell:
        "vlmrobust block-attention --spec {params.spec:q} --outputs {input.outputs}"
        " --attributes {input.attributes} --manifest {input.manifest}"
        " --samples {input.samples} --threads {threads} --out {output} > {log} 2>&1"
