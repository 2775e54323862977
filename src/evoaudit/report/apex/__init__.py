"""APEX-Harm's report: its scores (``scores``), the tables, figures and pages of the main run
(``report``), each ablation's table (``ablation``), the judge stage's decisions applied (``judged``) and the
agreement of recorded decisions with label files (``agreement``)."""
