"""Where the bundled data lives inside the installed package."""

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
PROFILES_DIR = DATA_DIR / "profiles"
TRACES_DIR = DATA_DIR / "traces"
