"""One module per user-facing command. Each reads top to bottom as its recipe: check the
inputs, compute through library functions, commit the outputs (:mod:`tensorpose.io.atomic`);
each returns a report and has a ``summary(report)`` giving the lines the CLI prints.

Imports point one way: ``apps`` -> (tasks, models, io, viz, layouts) -> ops; nothing below
imports an app.
"""
