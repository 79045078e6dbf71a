"""Training the bundled search model (``fixtures/search``) further, as the training tests do."""

from groundhog_port.cli.main import main
from parity_tests.support.command_lines import MODEL, STATE


def train_bundled_search(data_dir, prefix, *changes):
    """``groundhog-port --threads 1 train`` of ``fixtures/search`` on the corpus in ``data_dir``,
    its files written as ``<prefix>state.pkl`` ..., the state ``changes`` after it; the exit
    status."""
    model = ["--state", str(STATE), "--model", str(MODEL)]
    argv = ["--threads", "1", "train", *model, "--data-dir", str(data_dir)]
    return main([*argv, f"prefix='{prefix}'", *changes])
