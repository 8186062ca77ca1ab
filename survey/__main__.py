import sys

from survey import replay


def main() -> None:
    replay.answer_first(sys.argv[1:])  # a replayed answer exits here, before Typer, SQLAlchemy and pandas load
    from survey.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
