"""AgentDojo's Workspace suite (email, calendar, cloud drive), audited on its official predicates:
``audit`` fixes its published probe set (``agentdojo.checker_audit``)."""
