"""Training the bundled search model (``fixtures/search``) further, as the training tests do."""

from groundhog_port.cli.main import main
from parity_tests.support.cases import FIXTURES


def train_bundled_search(data_dir, prefix, *changes):
    """``groundhog-port --threads 1 train`` of ``fixtures/search`` on the corpus in ``data_dir``,
    its files written as ``<prefix>state.pkl`` ..., the state ``changes`` after it; the exit
    status."""
    fx = FIXTURES / "search"
    model = ["--state", str(fx / "search_state.pkl"), "--model", str(fx / "search_model.npz")]
    argv = ["--threads", "1", "train", *model, "--data-dir", str(data_dir)]
    return main([*argv, f"prefix='{prefix}'", *changes])
