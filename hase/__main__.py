"""`python -m hase`: the `hase` command, for an environment whose scripts folder is not on PATH (the GPU machine's
Python ran `python -m hase host survey` this way)."""
from hase.cli import console

if __name__ == "__main__":  # pragma: no cover - `python -m hase` runs it; tests call it as a subprocess
    console()
