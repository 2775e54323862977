"""AgentDojo's Banking suite with the corrected families.

``tasks`` is AgentDojo's Banking task suite as evoaudit uses it (fixture, runtime, injection tasks, the
important_instructions attack); ``families`` the corrected families and their variants; ``checks`` the
predicates; ``harm`` the state-change categories; ``probes`` and ``audit`` the checker audit and the
instance stage; ``instances`` the instance builder; ``environments`` the environment half; ``adapter``
the ``interface.AuditSuite`` the registry hands out.
"""
