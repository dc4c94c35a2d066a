"""`python -m gpulint.runtime_check profile|verify ...`: the runtime commands on their own (the
same as `gpulint profile|verify`), independent of the other command-line extensions."""

import typer

from gpulint.runtime_check.cli import register

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]})
register(app)

if __name__ == "__main__":
    app(prog_name="gpulint")
