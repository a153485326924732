"""vlmrobust: perturbation-robustness evaluation of (reasoning) vision-language models.

The package holds the logic of the Snakemake workflow in this repository; every stage
has a command-line entry point (``vlmrobust <stage> ...``) so it runs without Snakemake.

Stages (docs/architecture.md): datasets -> samples (``vlmrobust.data``) -> variants
(``vlmrobust.perturb``) -> outputs -> scored -> metrics -> tables, figures.
"""

__version__ = "0.1.0"
