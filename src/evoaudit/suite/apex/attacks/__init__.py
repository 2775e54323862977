"""The attacks: the frozen 180-instance attack set, the attacker and its simulator, where an attack's text is
placed, the build-time probes, the ablated arms and the stealth diagnostic."""
