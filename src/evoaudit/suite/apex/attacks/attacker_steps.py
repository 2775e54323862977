"""How each of the attacker's steps begins its instructions: the attacker writes them (``attacker.py``) and
the simulator recognises a step by them, as a model reads them (``attacker_sim.py``). Kept apart so that
the attacker can build its simulated answers without the two modules importing each other."""

KEYWORDS_STEP = "You extract task keywords"
SOURCE_STEP = "You pick the one workspace file"
NOTE_STEP = "You write a short prerequisite note"
