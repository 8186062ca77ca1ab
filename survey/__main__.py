import gc
import sys

from survey import replay


def main() -> None:
    replay.answer_first(sys.argv[1:])  # a replayed answer exits here, before Typer, SQLAlchemy and pandas load
    from survey import cli

    try:
        cli.main()  # closes the stores it opened (SQLite checkpoints the WAL, as it did when they were collected)
    finally:
        # The process ends here: what is left is frozen, so the interpreter's last collection
        # skips the million objects of SQLAlchemy, pydantic and Typer (0.15-0.2 s of a command).
        gc.freeze()


if __name__ == "__main__":
    main()
