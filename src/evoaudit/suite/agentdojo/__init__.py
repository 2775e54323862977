"""AgentDojo's suites (v1.2.2), run on AgentDojo's own environments, tools, injection tasks and attacks.

``exposure`` (injected text reaching the model through a tool result), ``probing`` (the probe record of a
checker audit) and ``checker_audit`` (the published probe set on a suite's official predicates) are
shared by the family; each suite keeps its own folder. Banking, audited end to end with its corrected
families, is ``banking/``; Workspace, Travel and Slack, audited on their official predicates only, are
``workspace/``, ``travel/`` and ``slack/``.
"""
