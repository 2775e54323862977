"""AgentDojo's suites (v1.2.2), run on AgentDojo's own environments, tools, injection tasks and attacks.

``exposure`` (injected text reaching the model through a tool result), ``probing`` (the probe record of a
checker audit) and ``checker_audit`` (the published probe set on a suite's official predicates) are
shared by the family, as is ``toolkit`` (tool results as AgentDojo formats them, tool schemas, the
``important_instructions`` attack built without a model, the fixed clock); each suite keeps its own
folder. Banking, audited end to end with its corrected families, is ``banking/``; Workspace, Travel and
Slack, audited on their official predicates by the generic ``official`` suite (environment half
``official_env``), are ``workspace/``, ``travel/`` and ``slack/``.
"""
