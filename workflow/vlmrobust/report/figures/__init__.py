"""Figures: views of the tidy metrics as PNG and PDF (matplotlib, no pyplot state), one
module per study (:mod:`.corruption`, :mod:`.distraction`, :mod:`.masking`)."""
