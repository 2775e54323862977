"""APEX-Harm's part of the operations layer: what its runs will ask of each model (``plan``)."""
