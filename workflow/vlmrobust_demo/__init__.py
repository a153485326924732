"""The embedded demo: synthetic datasets drawn with PIL (:mod:`.data`), tiny
Qwen2-VL-architecture checkpoints (:mod:`.model`) and the demo seed distractors
(:mod:`.seeds`). A package of its own beside ``vlmrobust``: nothing in the production
stages imports it; the CLI's demo commands do, and the rules read its versions."""
