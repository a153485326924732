"""The core layer: records and their files (samples, outputs, review candidates and
decisions), seeding, configuration, prompts, the run plan. It imports nothing else of
the package; every other layer may import it."""
