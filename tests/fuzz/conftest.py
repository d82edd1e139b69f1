import pathlib
import sys

# the fuzz suite reuses the tiny real-model builders of tests/readers (readers_helpers.py)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "readers"))
