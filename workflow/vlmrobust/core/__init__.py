"""The core layer: records and their files, seeding, configuration, prompts, the run
plan. It imports nothing else of the package; every other layer may import it."""
