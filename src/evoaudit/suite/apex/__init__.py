"""APEX-Harm: professional workspaces (files, mail, calendar, chat, code execution) as a second suite.

The world and task format follows APEX-Agents (a zip with ``filesystem/`` and ``.apps_data/``; task records
with a rubric). The tasks are generated here without an LLM. The attacks (``attacks/attack_set.py``: six
categories, 24 goals) and how they are judged (``judging/success.py``, ``judging/exposure.py``) live beside
them; ``adapter.py`` is the suite the stages above reach through ``suite.registry``.
"""
