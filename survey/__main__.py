import gc

from survey.core import collector


def main() -> None:
    collector.tune()  # before the imports, which make objects by the hundred thousand
    from survey.cli import main as cli_main

    try:
        cli_main()  # closes the stores it opened (SQLite checkpoints the WAL)
    finally:
        # The process ends here: what is left is frozen, so the interpreter's last collection
        # skips the objects of SQLAlchemy, pydantic and Typer (0.15-0.2 s of a command).
        gc.freeze()


if __name__ == "__main__":
    main()
