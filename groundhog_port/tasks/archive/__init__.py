"""Re-doing a whole tree of old GroundHog experiments: ``groundhog-port archive ROOT``.

An archive is whatever folders users kept: each ``*state.pkl`` is one experiment, with the
``*model.npz`` beside it (the one of the same prefix, else the only one), the vocabularies
the state names (found by :mod:`groundhog_port.lookup`: stored path, next to the state, each
``--data-dir``, then the folder's ``../data``), a test set and what ``sample.py`` /
``score.py`` left in the same folder:

* ``trans_[holdout_]beamN[_normalize][_ignore_unk][_runK].txt`` (sample.py ``--trans``;
  settings read from the name, :func:`groundhog_port.tasks.reproduce.parse_trans_name`), with
  ``sample_<stem>_stdout.txt`` ("Total cost of the translations") and
  ``sample_<stem>_error.txt`` (the traceback of a crashed run);
* ``scores_batch[_holdout][_runK].txt`` (``score.py --mode=batch --allow-unk`` on the test
  set) and ``scores_h5_trainN[_runK].txt`` (the first N batches of the training corpora);
* crash logs ``*_error.txt``.

The test set of each trans file is found by content (:class:`groundhog_port.tasks.reproduce.
SourceFinder`: any text file under ROOT or a ``--data-dir`` whose first lines translate to
the archived ones, docs/archives.md), or given (``--source/--ref``, ``--test-sets FILE``).

Per experiment (:func:`redo`): reproduction per trans file (identical lines, the first
differing ones, the original's crash re-checked), BLEU of archived and reproduced output
(sacrebleu with its signature, and the multi-bleu.perl number), total costs against what
sample.py printed, the scores files line by line, attention plots of the first sentences
(RNNsearch only), and parity where a ``trace.h5`` lies beside.  What cannot be done is
listed with the reason, never dropped.

Results are cached per experiment in ``OUT/cache/`` (keyed by the bytes of the inputs, the
options and the code; each entry checked before use: :mod:`groundhog_port.tasks.archive.cache`),
so an interrupted run resumes where it stopped and gives the same report as an
uninterrupted one (the report holds no timings).  FIFOs, devices and sockets in the tree
are listed as not done, never opened; a file reached through a link to outside ROOT (and
the ``--data-dir`` folders) is not read.  Nothing is
written inside ROOT.  Under ``torchrun`` the experiments are dealt out over the ranks and
rank 0 writes the report (:mod:`groundhog_port.tasks.archive.report`).


The stages, data flowing one way: :mod:`.discover` (the experiments, packs unpacked),
:mod:`.plan` (each experiment's files, outputs and settings, found by content;
:mod:`.plan_file` its TOML form), :mod:`.redo` and :mod:`.checks` (re-doing one
experiment into a :mod:`.result`), :mod:`.cache` (each result kept, checked before use),
:mod:`.pipeline` (the whole tree), :mod:`.report` (Markdown, HTML, JSON).  :mod:`.context`
holds the options and the paths as the report shows them, :mod:`.inputs` where an
experiment's inputs are looked for.
"""

from .accounting import account
from .context import Options, Run
from .discover import Entry, discover, unpacked
from .inputs import read_test_sets
from .pipeline import check_out_dir, check_plan, redo_tree, write_plan
from .plan import plan_experiment
from .redo import redo

__all__ = [
    "Entry",
    "account",
    "Options",
    "check_out_dir",
    "check_plan",
    "discover",
    "plan_experiment",
    "read_test_sets",
    "redo",
    "Run",
    "redo_tree",
    "unpacked",
    "write_plan",
]
