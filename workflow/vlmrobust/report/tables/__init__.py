"""Tables: views of the tidy metrics as CSV, Markdown and LaTeX (:mod:`.render`), one
module per study (:mod:`.corruption`, :mod:`.distraction`, :mod:`.masking`)."""
