"""AgentDojo's Slack suite (channels, direct messages, web pages), audited on its official predicates:
``audit`` fixes its published probe set (``agentdojo.checker_audit``)."""
