# rankstudy: one Snakemake workflow for the whole study. See README.md and docs/architecture.md.
# The default study. A --configfile that says `standalone: true` (config/paper/*.yaml) is the whole
# config instead: Snakemake merges nested mappings key by key, so the default's synthetic datasets,
# runs and model settings would otherwise leak into it (config/README.md).
if not config.get("standalone", False):  # before PLAN: which config files PLAN is built from

    configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/index.smk"
include: "workflow/rules/candidates.smk"
include: "workflow/rules/neural.smk"
include: "workflow/rules/folds.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"
# one file per paper
include: "workflow/rules/tk.smk"
include: "workflow/rules/tkl.smk"
include: "workflow/rules/socialformer.smk"
include: "workflow/rules/choppy.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/expected.smk"
include: "workflow/rules/reproduction.smk"


rule all:
    default_target: True
    input:
        # a config of given lists only (no first stage: config/choppy-robust04.yaml) has no first-stage table
        rules.first_stage_table.output if PLAN.studied else [],
        PLAN.neural_metrics(),
        rules.learning_audit.output if PLAN.learning_audit() else [],
        rules.tk_table2.output if TK.table2_rows() else [],
        rules.tk_table3_4.output if QUERY_TABLES else [],
        rules.tk_view.output if TK_VIEW else [],
        rules.tk_tradeoff.output if TK.tradeoff else [],
        rules.tk_learning_curve.output if LEARNING_CURVE else [],
        # throughput belongs to a neural study: a local collection's BM25 config does not run it
        rules.efficiency.output if PLAN.measures_speed and PLAN.neural_systems() else [],
        TKL.outputs(),
        SOCIALFORMER.outputs(),
        CHOPPY.outputs(),
        # a scoreboard only where some claim can be evaluated (a BM25 run of a local collection has none)
        rules.claims.output if PLAN.claim_inputs() else [],
        # the papers' reported cells beside this run's; a config of other data says it is not comparable
        rules.reproduction.output if REPRODUCTION["reported"] or not REPRODUCTION["comparable"] else [],
        rules.check_expected.output if PLAN.expected else [],


# At the end of every run (not a dry run): the study's job-minutes against its goal (rankstudy.report.study_time)
onsuccess:
    report_study_time(log)
