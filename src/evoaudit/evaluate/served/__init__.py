"""One AgentDojo instance served to an outside agent over MCP (``evoaudit serve``) and the record it writes
scored as the workflow scores its own episodes (``evoaudit score``)."""
