"""What every APEX-Harm room shares: the typed workspace, its limits, the office formats and the world
format, what a file reads as, and the threat model as frozen data. Imports nothing else of the suite."""
