"""The five configuration prototypes of GroundHog's ``experiments/nmt/state.py``, as data.

GroundHog builds every run from one of these dicts (``train.py --proto=NAME``) and then
applies the pickled state and the command-line ``changes`` on top.  Each function here
returns a *fresh* dict with exactly the keys and values of the original, derived the same
way (``prototype_phrase_state`` and ``prototype_encdec_state`` start from
``prototype_state``; ``prototype_search_state`` from ``prototype_encdec_state``;
``prototype_phrase_lstm_state`` from ``prototype_phrase_state``).

Value types matter and are kept exactly: ``maxout_part`` is the float ``2.`` (Python 2
divides the softmax input width ``dim / maxout_part`` as a float), ``cutoff`` is ``1.``,
``minlr`` the int ``0``, ``timeStop`` the int ``24*60*31``.

``prototype_phrase_lstm_state`` is kept as data only: GroundHog cannot run it (its
``experiments/nmt/__init__.py`` does not even export it, and the LSTM state width does not
match the readout; docs/recordings.md, "What did not run").  Refusing it is the job of the model config.
"""

from __future__ import annotations

from typing import Any

#: keys holding file paths of the training data / vocabularies (machine specific)
DATA_PATH_KEYS = (
    "source",
    "target",
    "indx_word",
    "indx_word_target",
    "word_indx",
    "word_indx_trgt",
)

#: keys of the vocabularies (state.py:31-38): their sizes, end-of-sequence and UNK ids
VOCABULARY_KEYS = (
    "n_sym_source",
    "n_sym_target",
    "null_sym_source",
    "null_sym_target",
    "unk_sym_source",
    "unk_sym_target",
)


def corpus_paths(folder: str) -> dict:
    """The :data:`DATA_PATH_KEYS` of a corpus ``folder`` (ending in ``/``) holding the files
    GroundHog's preprocessing scripts write, English source and French target
    (state.py:243-248)."""
    return {
        "source": [folder + "binarized_text.shuffled.en.h5"],
        "target": [folder + "binarized_text.shuffled.fr.h5"],
        "indx_word": folder + "ivocab.en.pkl",
        "indx_word_target": folder + "ivocab.fr.pkl",
        "word_indx": folder + "vocab.en.pkl",
        "word_indx_trgt": folder + "vocab.fr.pkl",
    }


def prototype_state() -> dict:
    """Base prototype (state.py:1-214); every other prototype starts from it."""
    return {
        # -- run control --
        "seed": 1234,  # seed of numpy.random.RandomState used to build the layers
        "level": "DEBUG",  # logging level name given to logging.basicConfig
        # -- data files (None: the run must supply them) --
        "source": [None],  # source-side binarized .h5 bitext, as a one-element list
        "target": [None],  # target-side binarized .h5 bitext, as a one-element list
        "indx_word": None,  # pickled dict id -> word, source language (ivocab)
        "indx_word_target": None,  # pickled dict id -> word, target language (ivocab)
        "word_indx": None,  # pickled dict word -> id, source language (vocab)
        "word_indx_trgt": None,  # pickled dict word -> id, target language (vocab)
        # -- vocabulary conventions --
        "oov": "UNK",  # text printed for the unknown-word id
        "unk_sym_source": 1,  # id of the unknown word, source side
        "unk_sym_target": 1,  # id of the unknown word, target side
        "null_sym_source": None,  # end-of-sequence id, source side (= vocabulary size V)
        "null_sym_target": None,  # end-of-sequence id, target side
        "n_sym_source": None,  # number of source ids incl. end-of-sequence (V + 1)
        "n_sym_target": None,  # number of target ids incl. end-of-sequence
        # -- model structure --
        "last_forward": True,  # annotation includes the last forward encoder state
        "last_backward": False,  # annotation includes the last backward encoder state
        "forward": False,  # annotation includes every forward encoder state
        "backward": False,  # annotation includes every backward encoder state
        "search": False,  # attention ("search") decoder instead of a fixed context
        "bigram": True,  # readout gets a direct term from the previous target word
        "bias_code": True,  # decoder initial state computed from the annotation (else zeros)
        "decoding_inputs": True,  # context feeds the decoder's recurrent transition
        "deep_out": True,  # maxout hidden layer between decoder and softmax
        "encoder_stack": 1,  # number of stacked encoder recurrent layers (only 1 works)
        "decoder_stack": 1,  # number of stacked decoder recurrent layers (only 1 works)
        "take_top": True,  # use the top layer of a stack as annotation
        "check_first_word": True,  # mask the previous-word term where the previous id is 0
        "eps": 1e-10,  # small constant (unused by the NMT graph)
        # -- component functions (strings GroundHog eval()s; see groundhog_port.model.activations) --
        "rank_n_activ": "lambda x: x",  # applied after the low-rank word embedding
        "activ": "lambda x: TT.tanh(x)",  # recurrent candidate-state nonlinearity
        "unary_activ": "Maxout(2)",  # readout nonlinearity (deep_out)
        "enc_rec_layer": "RecurrentLayer",  # forward encoder layer class
        "enc_rec_gating": True,  # forward encoder has an update gate
        "enc_rec_reseting": True,  # forward encoder has a reset gate
        "enc_rec_gater": "lambda x: TT.nnet.sigmoid(x)",  # forward encoder update gate fn
        "enc_rec_reseter": "lambda x: TT.nnet.sigmoid(x)",  # forward encoder reset gate fn
        "dec_rec_layer": "RecurrentLayer",  # decoder layer class
        "dec_rec_gating": True,  # decoder has an update gate
        "dec_rec_reseting": True,  # decoder has a reset gate
        "dec_rec_gater": "lambda x: TT.nnet.sigmoid(x)",  # decoder update gate fn
        "dec_rec_reseter": "lambda x: TT.nnet.sigmoid(x)",  # decoder reset gate fn
        "rec_layer": "RecurrentLayer",  # fallback layer class (in practice: backward encoder)
        "rec_gating": True,  # fallback: update gate
        "rec_reseting": True,  # fallback: reset gate
        "rec_gater": "lambda x: TT.nnet.sigmoid(x)",  # fallback update gate fn
        "rec_reseter": "lambda x: TT.nnet.sigmoid(x)",  # fallback reset gate fn
        # -- sizes --
        "dim": 1000,  # recurrent hidden state width
        "rank_n_approx": 100,  # word embedding width (low-rank factor)
        "maxout_part": 2.0,  # pieces per maxout unit in the readout (float on purpose)
        # -- initialisation --
        "bias": 0.0,  # extra bias inside recurrent layers
        "rec_weight_init_fn": "sample_weights_orth",  # initialiser of recurrent matrices
        "rec_weight_scale": 1.0,  # scale of recurrent matrices
        "weight_init_fn": "sample_weights_classic",  # initialiser of other matrices
        "weight_scale": 0.01,  # scale of other matrices
        # -- regularisation (untested in GroundHog) --
        "dropout": 1.0,  # keep probability, output layers (1 = off)
        "dropout_rec": 1.0,  # keep probability, recurrent layers (1 = off)
        "weight_noise": False,  # Gaussian weight noise on feed-forward weights
        "weight_noise_rec": False,  # Gaussian weight noise on recurrent weights
        "weight_noise_amount": 0.01,  # std of that noise
        # -- gradient clipping --
        "cutoff": 1.0,  # clip the global gradient norm to this value (<= 0: no clipping)
        "cutoff_rescale_length": 0.0,  # length-dependent clipping variant (keep 0)
        # -- training algorithm --
        "use_nce": False,  # noise-contrastive estimation instead of full softmax
        "algo": "SGD_adadelta",  # trainer class name
        "adarho": 0.95,  # Adadelta decay rate
        "adaeps": 1e-6,  # Adadelta epsilon
        "patience": 1,  # early-stopping patience (not used for NMT)
        "lr": 1.0,  # learning rate (Adadelta: multiplier)
        "minlr": 0,  # learning-rate floor
        "bs": 64,  # sentence pairs per batch
        "sort_k_batches": 10,  # batches read together and length-sorted
        "seqlen": 30,  # training pairs longer than this are skipped
        "trim_batches": True,  # drop all-padding trailing rows of a batch
        "use_infinite_loop": True,  # restart the data iterator at the end of the data
        "shuffle": False,  # start reading at a random position
        # -- training process --
        "prefix": "phrase_",  # path prefix of <prefix>model.npz, state.pkl, timing.npz
        "reload": True,  # resume from <prefix>model.npz if present
        "overwrite": 1,  # 1: overwrite the saved files; 0: number each save
        "loopIters": 3000000,  # maximum number of updates
        "timeStop": 24 * 60 * 31,  # maximum training time in minutes
        "minerr": -1,  # stop when the validation error drops below this
        "reset": -1,  # reset the data iterator every this many epochs (-1: never)
        "trainFreq": 1,  # report the training cost every this many updates
        "hookFreq": 13,  # run the sample-printing hook every this many updates
        "validFreq": 500,  # validation period in updates
        "saveFreq": 10,  # save period in minutes
        "n_samples": 3,  # samples printed per example by the hook
        "n_examples": 3,  # examples shown by the hook
        "on_nan": "raise",  # reaction to a NaN cost
    }


def prototype_phrase_state() -> dict:
    """Cho et al. 2014 RNN Encoder-Decoder phrase-scoring setup (state.py:216-235)."""
    state = prototype_state()
    state.update(
        {
            "source": ["/data/lisatmp3/bahdanau/shuffled/phrase-table.en.h5"],
            "target": ["/data/lisatmp3/bahdanau/shuffled/phrase-table.fr.h5"],
            "indx_word": "/data/lisatmp3/chokyun/mt/ivocab_source.pkl",
            "indx_word_target": "/data/lisatmp3/chokyun/mt/ivocab_target.pkl",
            "word_indx": "/data/lisatmp3/chokyun/mt/vocab.en.pkl",
            "word_indx_trgt": "/data/lisatmp3/bahdanau/vocab.fr.pkl",
            "null_sym_source": 15000,  # 15000-word vocabularies on both sides
            "null_sym_target": 15000,
        }
    )
    # sizes derived from the end-of-sequence ids, as the original does
    state["n_sym_source"] = state["null_sym_source"] + 1
    state["n_sym_target"] = state["null_sym_target"] + 1
    return state


def prototype_encdec_state() -> dict:
    """RNNenc-30 of Bahdanau et al. 2015 (state.py:237-263)."""
    state = prototype_state()
    state.update(corpus_paths("/data/lisatmp3/chokyun/mt/vocab.unlimited/bitexts.selected/"))
    state.update({"null_sym_source": 30000, "null_sym_target": 30000})  # 30000-word vocabularies
    state["n_sym_source"] = state["null_sym_source"] + 1
    state["n_sym_target"] = state["null_sym_target"] + 1
    state.update(
        {
            "seqlen": 30,  # trained on sentences of at most 30 words
            "bs": 80,
            "dim": 1000,
            "rank_n_approx": 620,
            "prefix": "encdec_",
        }
    )
    return state


def prototype_search_state() -> dict:
    """RNNsearch-50 of Bahdanau et al. 2015 (state.py:265-280): encdec + attention."""
    state = prototype_encdec_state()
    state.update(
        {
            "dec_rec_layer": "RecurrentLayerWithSearch",  # attention decoder
            "search": True,
            "last_forward": False,  # annotations: every forward and backward state ...
            "forward": True,
            "backward": True,  # ... concatenated (c_dim = 2 * dim)
            "seqlen": 50,
            "sort_k_batches": 20,
            "prefix": "search_",
        }
    )
    return state


def prototype_phrase_lstm_state() -> dict:
    """phrase prototype with LSTM encoder/decoder (state.py:282-294).

    Data only: this configuration does not run in GroundHog 4d2433b (docs/recordings.md, "What did not run").
    """
    state = prototype_phrase_state()
    state.update(
        {
            "enc_rec_layer": "LSTMLayer",
            "enc_rec_gating": False,
            "enc_rec_reseting": False,
            "dec_rec_layer": "LSTMLayer",
            "dec_rec_gating": False,
            "dec_rec_reseting": False,
            "dim_mult": 4,  # LSTM layers need 4 * dim wide input projections
            "prefix": "phrase_lstm_",
        }
    )
    return state


#: prototype name (as given to ``train.py --proto``) -> function
PROTOTYPES = {
    "prototype_state": prototype_state,
    "prototype_phrase_state": prototype_phrase_state,
    "prototype_encdec_state": prototype_encdec_state,
    "prototype_search_state": prototype_search_state,
    "prototype_phrase_lstm_state": prototype_phrase_lstm_state,
}

#: keys ignored by :func:`match_prototype`: machine-specific file locations
MATCH_IGNORED_KEYS = frozenset(DATA_PATH_KEYS) | {"prefix"}

# When two prototypes differ from a state in equally many keys the more specific one wins
# (e.g. prototype_phrase_state over prototype_state once the vocabulary sizes are overridden:
# apart from data paths the two are identical then).
_TIE_PREFERENCE = (
    "prototype_search_state",
    "prototype_encdec_state",
    "prototype_phrase_lstm_state",
    "prototype_phrase_state",
    "prototype_state",
)


def same_value(a: Any, b: Any) -> bool:
    """Equality that also requires the same type (``2`` != ``2.``, ``True`` != ``1``).

    The distinction matters for GroundHog: ``maxout_part=4`` (int) and ``4.`` give different
    Python-2 divisions.  Lists and tuples are compared element by element.
    """
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return a == b


def match_prototype(state: dict) -> tuple[str, list[str]]:
    """The prototype a state most likely came from, and the keys where they differ.

    A key differs when the prototype has it and the state's value is missing or not
    :func:`same_value`.  Keys only the state has (bookkeeping GroundHog adds while training:
    ``step``, ``clr``, ``c_dim``, ``traincost``...) are not counted; data paths and
    ``prefix`` are ignored.  Fewest differing keys wins; ties go to the more specific
    prototype.  Returns ``(name, sorted differing keys)``.
    """
    best: tuple[str, list[str]] | None = None
    for name in _TIE_PREFERENCE:
        proto = PROTOTYPES[name]()
        differing = sorted(
            key
            for key, value in proto.items()
            if key not in MATCH_IGNORED_KEYS
            and (key not in state or not same_value(state[key], value))
        )
        if best is None or len(differing) < len(best[1]):
            best = (name, differing)
    assert best is not None  # there are prototypes
    return best
