"""The inference stage: one model on one variant manifest, resumable
(:mod:`vlmrobust.infer.run`); the backends themselves are clients
(:mod:`vlmrobust.clients.vlm`)."""
