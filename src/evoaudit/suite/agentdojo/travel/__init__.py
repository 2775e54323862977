"""AgentDojo's Travel suite (hotels, restaurants, car rental, flights, calendar, email), audited on its
official predicates: ``audit`` fixes its published probe set (``agentdojo.checker_audit``). ``tools``
says which of its tools only look things up (the environment half, ``agentdojo.official_env``);
``adapter`` makes it a whole audit (``agentdojo.official``)."""
