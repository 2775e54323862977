"""Rollout records in the formats other tools read: Inspect AI eval logs (``inspect_logs``, needs the
``inspect`` extra, imported only when asked for) and AgentDojo's results layout (``agentdojo_runs``).
``shards`` finds a results directory's evaluation shards and groups their rollouts."""
