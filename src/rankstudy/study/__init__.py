"""The study plan: a config's runs, systems and outputs as tested Python objects that the workflow reads
(issue 17; so far the neural runs, ``rankstudy.study.runs``)."""

from rankstudy.study.runs import Run, plan_runs, system_run

__all__ = ["Run", "plan_runs", "system_run"]
