"""One package per paper (tk, tkl, socialformer, choppy), each with what the study needs of it:

- ``plan.py``: which of its tables and figures a config asks for, their rows, captions, input files and
  specs, and the checks of its config section (read by ``rankstudy.study.StudyPlan``);
- ``report.py``: its tables and figures from metric, run and log files (TK's interpretability view:
  ``tk/view.py``);
- ``cli.py``: its ``python -m rankstudy`` subcommands.

``section.py``: ``Study``, what a paper's plan reads of the study plan, and what the plans of the papers whose
outputs read one dataset (TKL, Socialformer) share.

The models the papers propose live in ``rankstudy.models`` (Choppy's training in ``rankstudy.truncation``),
the study's shared stages (data, first stage, text, training, re-ranking, evaluation) in the rest of the
package.
"""
