"""The rules, one module per family (DESIGN §2 catalog):

data_pipeline (GL1xx), syncs (GL2xx), per_step (GL3xx), precision (GL4xx), distributed (GL6xx),
tensorflow (GL7xx), trainers (GL8xx).  Every `Rule` subclass with a `code` in these modules is
registered automatically (gpulint.linter.rule.all_rules).
"""
