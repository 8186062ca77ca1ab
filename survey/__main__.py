import gc
import sys

from survey import replay


def main() -> None:
    replay.answer_first(sys.argv[1:])  # a replayed answer exits here, before Typer, SQLAlchemy and pandas load
    from survey import cli

    try:
        cli.main()
    finally:
        # The process ends here. Its stores are closed now (SQLite checkpoints the WAL, as
        # it did when they were collected at exit), and what is left is frozen: the
        # interpreter's last collection then skips the million objects of SQLAlchemy,
        # pydantic and Typer, a tenth of a second or more of every command.
        cli.close_stores()
        gc.freeze()


if __name__ == "__main__":
    main()
