"""APEX-Harm: professional workspaces (files, mail, calendar, chat, code execution) as a second suite.

The world and task format follows APEX-Agents (a zip with ``filesystem/`` and ``.apps_data/``; task records
with a rubric). The tasks are generated here without an LLM. Attacks and their evaluation are not built yet.
"""
