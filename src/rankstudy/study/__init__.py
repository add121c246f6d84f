"""The study plan: a config's runs, datasets, systems and claims as tested Python objects that the
workflow reads, checked across sections when the DAG is built (issue 17; ``StudyPlan``)."""

from rankstudy.study.plan import StudyPlan
from rankstudy.study.runs import Run, plan_runs, system_run

__all__ = ["Run", "StudyPlan", "plan_runs", "system_run"]
