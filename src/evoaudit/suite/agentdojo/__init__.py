"""AgentDojo's suites (v1.2.2), run on AgentDojo's own environments, tools, injection tasks and attacks.

``exposure`` is shared by the family (injected text reaching the model through a tool result); each
suite keeps its own folder with its families, variants, corrections and adapter. Banking is the first:
``banking/``.
"""
