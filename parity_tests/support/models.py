"""Models for the tests: a case folder's legacy experiment and its exports, and small models
with random parameters for tests of the searches and the sampler on shapes and vocabularies the
recordings do not cover."""

import functools

import torch

from groundhog_port.legacy.loading import open_experiment
from groundhog_port.model.config import ModelConfig
from groundhog_port.model.encdec import RNNEncoderDecoder
from legacy_states import prototype_encdec_state, prototype_search_state


def small_sizes(V_src, V_trg, dim, rank):
    """The state's sizes for vocabularies of ``V_src`` / ``V_trg`` words (the last id the end
    of a sentence, id 1 UNK), ``dim`` hidden units and embeddings of rank ``rank``."""
    return dict(
        dim=dim,
        rank_n_approx=rank,
        n_sym_source=V_src,
        null_sym_source=V_src - 1,
        n_sym_target=V_trg,
        null_sym_target=V_trg - 1,
        unk_sym_source=1,
        unk_sym_target=1,
    )


def build_model(family, V_src, V_trg, dim, rank, flags, seed, scales, stable=False):
    """A small model of the prototype ``family`` with random parameters.

    ``scales``: (embedding, weights, output, attention, eos_bias); large output
    weights give peaked, state-dependent distributions, so hypotheses end at varied
    lengths; a very negative ``eos_bias`` makes end-of-sequence unlikely (retries).
    """
    state = prototype_search_state() if family == "search" else prototype_encdec_state()
    state.update(small_sizes(V_src, V_trg, dim, rank), **flags)
    cfg = ModelConfig.from_state(state)
    model = RNNEncoderDecoder(cfg, stable_softmax=stable)
    emb, weights, output, att, eos_bias = scales
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if name.endswith("approx_embedder.W"):
                p.copy_(noise * emb)
            elif name.startswith("decoder.output_layer"):
                p.copy_(noise * output / p.shape[0] ** 0.5 if p.dim() == 2 else noise)
            elif name in ("decoder.D", "decoder.A", "decoder.B"):
                p.copy_(noise * att / p.shape[0] ** 0.5)
            elif p.dim() == 2:
                p.copy_(noise * weights / p.shape[0] ** 0.5)
            else:
                p.copy_(noise * 0.5)
        model.decoder.output_layer.b[cfg.null_sym_target] += eos_bias
    return model


def legacy_files(case):
    """A case folder's ``*state.pkl`` and the ``*model.npz`` of the same prefix beside it."""
    state = next(case.glob("*state.pkl"))
    return state, case / state.name.replace("state.pkl", "model.npz")


def open_case(case, changes=""):
    """The legacy experiment of a case folder (GroundHog's ``changes`` to its state), its
    vocabularies looked for in the folder."""
    state, model = legacy_files(case)
    return open_experiment(state, model, changes, data_dir=case)


def exports_per_case(tmp_path_factory, name, write):
    """``case -> (legacy experiment, export folder)``: the case opened and ``write(exp,
    folder)`` called the first time a case is asked for (a module fixture's cache)."""
    root = tmp_path_factory.mktemp(name)

    @functools.cache
    def get(case):
        exp = open_case(case)
        out = root / f"{case.parent.name}_{case.name}"
        write(exp, out)
        return exp, out

    return get


def upper_cased_vocabularies(ivocab_path, folder):
    """The target vocabularies of ``ivocab_path`` with every word upper-cased, written into
    ``folder`` as GroundHog wrote them (protocol 2): ``(ivocab, vocab)`` paths.  A state
    change pointing at them makes every output word upper-case: a visible, pinned change."""
    import pickle

    from legacy_states.unpickle import safe_load_pickle

    ivocab = safe_load_pickle(ivocab_path)
    paths = folder / "IVOCAB.fr.pkl", folder / "VOCAB.fr.pkl"
    with open(paths[0], "wb") as f:
        pickle.dump({i: w.upper() for i, w in ivocab.items()}, f, protocol=2)
    with open(paths[1], "wb") as f:
        pickle.dump({w.upper(): i for i, w in ivocab.items()}, f, protocol=2)
    return paths
