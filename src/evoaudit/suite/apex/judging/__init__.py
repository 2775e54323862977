"""How an episode is judged: the rubric's task score, attack success on state, exposure by the paper's rule,
the recorded decisions and the LLM judge for what only meaning decides. Replay imports none of it."""
