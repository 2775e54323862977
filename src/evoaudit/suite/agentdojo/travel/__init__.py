"""AgentDojo's Travel suite (hotels, restaurants, car rental, flights, calendar, email), audited on its
official predicates: ``audit`` fixes its published probe set (``agentdojo.checker_audit``)."""
