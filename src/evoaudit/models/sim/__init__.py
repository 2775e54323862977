"""The embedded deterministic simulator, one module per behaviour (``AuditSuite.simulator``).

- ``tools``: an assistant calling an AgentDojo suite's tools towards the instance's plan (``SimBackend``);
- ``apex``: APEX-Harm's simulator: the analyst in a workspace (``ApexSimBackend``, its text in
  ``apex_text``), the judge's offline verdicts and the attacker's steps served as a chat backend;
- ``roles``: the evolution methods' requests (reflection, induction, distillation, judging, ranking);
- ``server``: any of them served over HTTP as an OpenAI-compatible endpoint.

A number from the simulator is a mechanism check, not a finding about models.
"""
