"""The study plan: a config's runs, systems and outputs as tested Python objects that the workflow reads
(issue 17; so far the neural runs and their models, ``StudyPlan``)."""

from rankstudy.study.plan import StudyPlan
from rankstudy.study.runs import Run, plan_runs, system_run

__all__ = ["Run", "StudyPlan", "plan_runs", "system_run"]
