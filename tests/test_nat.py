"""Non-autoregressive translation with encoder_only (CMLM + mask-predict): the pieces against hand computations
and closed forms, no leak of the target or its length, padding invariance, and overfitting a copy task."""

import pytest
import torch
import torch.nn.functional as F
from zoo_run import reversal_pairs, reversal_tokenizer

from zoo.data.bpe import CLS_ID, MASK_ID, SubwordTokenizer, train_bpe
from zoo.data.multi30k import collate_translation
from zoo.data.resolver import DataError
from zoo.model import EncoderOnly, ModelConfig
from zoo.model.blocks.heads import LengthHead
from zoo.model.encoder_only import source_blind_mask
from zoo.tasks.objectives.cmlm import NAT_BANNED
from zoo.tasks.objectives.nat import cmlm_mask, lowest, mask_predict, nat_inputs, num_to_mask
from zoo.tasks.translation import Translation

TOK = reversal_tokenizer()


def nat_task(**kw):
    model = dict(vocab_size=30, d_model=32, n_heads=2, d_ff=64, n_layers=2, dropout=0.0, max_len=32)
    return Translation(
        "encoder_only",
        model,
        {"src": TOK, "tgt": TOK},
        {"lr": 3e-3},
        {"warmup_steps": 1},
        objective="cmlm_mask_predict",
        **kw,
    )


def toy_batch():
    """Two pairs with different source and target lengths (right-padded, EOS-terminated)."""
    src = torch.tensor([[7, 8, 2, 0], [9, 10, 11, 2]])
    tgt_out = torch.tensor([[12, 13, 14, 2], [15, 2, 0, 0]])
    return {"src": src, "src_key_padding_mask": src == 0, "tgt_out": tgt_out, "tgt_key_padding_mask": tgt_out == 0}


def test_length_head_shape_and_default_classes():
    head = LengthHead(16, 10)
    assert head(torch.randn(3, 16)).shape == (3, 10)
    with pytest.raises(ValueError, match="length_classes=0"):
        LengthHead(16, 0)
    task = nat_task()
    assert task.model.cfg.length_classes == 32  # = model.max_len unless set
    assert task.hparams.model["length_classes"] == 32  # saved: a checkpoint rebuilds the head
    assert task.model.length_head.proj.weight.shape == (32, 32)
    with pytest.raises(ValueError, match="length head"):
        EncoderOnly(ModelConfig(vocab_size=30, d_model=16, n_heads=2)).cmlm(
            torch.ones(1, 3, dtype=torch.long), None, torch.tensor([2])
        )


def test_nat_needs_one_vocabulary():
    other = SubwordTokenizer(train_bpe(["eine katze", "a cat"], 30)).state_dict()
    model = dict(vocab_size=30, d_model=16, n_heads=2, d_ff=32, n_layers=1)
    for objective in ("cmlm_mask_predict", "encoder_ar"):  # both read source + target as one sequence
        with pytest.raises(DataError, match="data.joint_vocab=true"):
            Translation(
                "encoder_only",
                model,
                {"src": other, "tgt": TOK},
                {"lr": 1e-3},
                {"warmup_steps": 1},
                objective=objective,
            )
    with pytest.raises(ValueError, match="nat_iterations=0"):
        Translation(
            "encoder_only",
            model,
            {"src": TOK, "tgt": TOK},
            {"lr": 1e-3},
            {"warmup_steps": 1},
            nat_iterations=0,
            objective="cmlm_mask_predict",
        )


def test_nat_inputs_by_hand():
    b = toy_batch()
    lengths = torch.tensor([3, 1])
    seq, kpm, slots, source_len = nat_inputs(
        b["src"], b["src_key_padding_mask"], lengths, 0, CLS_ID, MASK_ID, tgt=b["tgt_out"]
    )
    assert seq.tolist() == [[5, 7, 8, 2, 12, 13, 14], [5, 9, 10, 11, 2, 15, 0]]
    assert kpm.tolist() == [[False] * 7, [False] * 6 + [True]]
    assert slots.tolist() == [[False] * 4 + [True] * 3, [False] * 5 + [True, False]]
    assert source_len.tolist() == [4, 5]
    seq, _, _, _ = nat_inputs(b["src"], b["src_key_padding_mask"], lengths, 0, CLS_ID, MASK_ID)
    assert seq.tolist() == [[5, 7, 8, 2, 4, 4, 4], [5, 9, 10, 11, 2, 4, 0]]


def test_source_blind_mask_by_hand():
    m = source_blind_mask(4, torch.tensor([2, 4]))
    assert m.shape == (2, 1, 4, 4)
    assert m[0, 0].int().tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]]
    assert m[1, 0].all()  # no target slots: plain bidirectional


def test_source_side_and_length_do_not_see_the_target():
    """The length logits and the source-side states are the same with no target slots, with L <mask> slots
    and with the real target in the slots: the length head cannot count the slots or read the target."""
    task = nat_task().eval()
    b = toy_batch()
    src, kpm = b["src"], b["src_key_padding_mask"]
    outs = []
    for lengths, tgt in (
        (torch.tensor([0, 0]), None),
        (torch.tensor([3, 1]), None),
        (torch.tensor([3, 1]), b["tgt_out"]),
        (torch.tensor([2, 3]), None),
    ):
        seq, k, slots, source_len = nat_inputs(src, kpm, lengths, 0, CLS_ID, MASK_ID, tgt=tgt)
        logits, length_logits = task.model.cmlm(seq, k, source_len)
        outs.append((logits[:, :4], length_logits, logits[slots]))
    for logits, length_logits, _ in outs[1:]:
        torch.testing.assert_close(length_logits, outs[0][1], rtol=0, atol=1e-5)
        torch.testing.assert_close(logits[0, :4], outs[0][0][0, :4], rtol=0, atol=1e-5)  # row 0's source side
    assert (outs[1][2] - outs[2][2]).abs().max() > 1e-3  # the slots do read each other


def test_cmlm_mask_counts_are_uniform():
    """n ~ Uniform{1..L} masked slots per row, never outside the slots (Ghazvininejad et al. 2019, sec. 2)."""
    slots = torch.zeros(4000, 9, dtype=torch.bool)
    slots[:, 3:7] = True  # L = 4
    chosen = cmlm_mask(slots, torch.Generator().manual_seed(0))
    assert not (chosen & ~slots).any()
    counts = torch.bincount(chosen.sum(1), minlength=5).float() / 4000
    assert counts[0] == 0
    assert (counts[1:] - 0.25).abs().max() < 0.03
    per_slot = chosen[:, 3:7].float().mean(0)  # E[n] / L = 2.5 / 4 for every slot
    assert (per_slot - 0.625).abs().max() < 0.03


def test_only_masked_positions_are_scored():
    """The token loss equals label-smoothed cross-entropy over the masked slots only (Szegedy et al. 2016:
    (1 - eps) NLL + eps x mean over classes of -log p), the masked slots hold <mask> in the input, and the
    length loss is the cross-entropy against L = target tokens without EOS."""
    task = nat_task(label_smoothing=0.1).eval()
    b = toy_batch()
    out = task.objective_impl.losses(b, torch.Generator().manual_seed(3))
    lengths = torch.tensor([3, 1])
    seq, kpm, slots, source_len = nat_inputs(
        b["src"], b["src_key_padding_mask"], lengths, 0, CLS_ID, MASK_ID, tgt=b["tgt_out"]
    )
    chosen = cmlm_mask(slots, torch.Generator().manual_seed(3))
    inputs = seq.masked_fill(chosen, MASK_ID)
    assert (inputs[slots & ~chosen] != MASK_ID).all() and (inputs[chosen] == MASK_ID).all()
    logits, length_logits = task.model.cmlm(inputs, kpm, source_len)
    logp = logits.log_softmax(-1)
    terms = [0.9 * -logp[i, j, seq[i, j]] + 0.1 * -logp[i, j].mean() for i, j in chosen.nonzero().tolist()]
    assert out["n_masked"] == len(terms) == int(chosen.sum()) >= 2
    assert abs(out["token"].item() - torch.stack(terms).mean().item()) < 1e-5
    assert abs(out["length"].item() - F.cross_entropy(length_logits, lengths).item()) < 1e-5
    total = task.loss(b, torch.Generator().manual_seed(3))
    assert abs(total.item() - (out["token"] + 0.1 * out["length"]).item()) < 1e-5


@pytest.mark.parametrize("T", [1, 2, 3, 4, 7, 10])
def test_mask_predict_remasks_the_closed_form_count(T):
    """Iteration t = 1..T-1 re-masks n = floor(L (T - t) / T) slots, the ones of lowest probability, and keeps
    the others' tokens (Ghazvininejad et al. 2019, sec. 3.1); T passes in all unless n reaches 0."""
    L = torch.tensor([1, 5, 9, 13])
    seq, _, slots, _ = nat_inputs(torch.full((4, 2), 7), torch.zeros(4, 2, dtype=torch.bool), L, 0, CLS_ID, MASK_ID)
    g = torch.Generator().manual_seed(T)
    calls = []

    def step(tokens, at):
        calls.append(tokens.clone())
        assert torch.equal(at, tokens == MASK_ID)  # logits asked only where this round predicts
        return torch.randn(int(at.sum()), 30, generator=g)

    tokens, log_probs = mask_predict(step, seq, slots, T, MASK_ID, NAT_BANNED)
    expected = [L.tolist()] + [[n * (T - t) // T for n in L.tolist()] for t in range(1, T)]
    expected = [e for e in expected if any(e)]
    assert [(c == MASK_ID).sum(1).tolist() for c in calls] == expected
    assert num_to_mask(L, 1, T).tolist() == [n * (T - 1) // T for n in L.tolist()]
    for prev, cur in zip(calls[1:], calls[2:]):  # unmasked slots keep their tokens between rounds
        keep = slots & (cur != MASK_ID)
        assert torch.equal(cur[keep], torch.where(prev == MASK_ID, cur, prev)[keep])
    assert not torch.isin(tokens[slots], torch.tensor(NAT_BANNED)).any()
    assert (log_probs[~slots] == 0).all() and (log_probs[slots] < 0).all()


def test_lowest_picks_the_lowest_probabilities():
    probs = torch.tensor([[0.9, 0.1, 0.5, 0.3, 0.2], [0.4, 0.4, 0.1, 0.8, 0.0]])
    slots = torch.tensor([[True] * 4 + [False], [True] * 4 + [False]])
    assert lowest(probs, slots, torch.tensor([2, 2])).int().tolist() == [[0, 1, 0, 1, 0], [1, 0, 1, 0, 0]]


def test_batched_decoding_equals_one_row_at_a_time():
    """Rows with different source lengths (padding) decode as if alone: positions restart per row."""
    torch.manual_seed(0)
    task = nat_task(nat_iterations=3).eval()
    rows = [[7, 8, 2], [9, 10, 11, 12, 13, 2], [14, 2]]
    batch = collate_translation([(i, r, [1, 6], [6, 2]) for i, r in enumerate(rows)])
    together = task.objective_impl.translate(batch, 2)
    alone = [
        task.objective_impl.translate(
            {"src": torch.tensor([r]), "src_key_padding_mask": torch.zeros(1, len(r), dtype=torch.bool)}, 2
        )[0]
        for r in rows
    ]
    assert together == alone
    assert all(len(h) >= 1 for h in together)


def test_length_candidates_stop_at_source_length_plus_max_len_b():
    """A length head that wants the longest lengths (an untrained one may) gets at most source tokens +
    task.max_len_b slots, the autoregressive decoders' limit, not every slot up to model.max_len (a
    30-step run's test phase took minutes and 8 GB decoding 500-slot candidates)."""
    torch.manual_seed(0)
    task = nat_task(nat_iterations=2, max_len_b=3).eval()
    head = task.model.length_head.proj
    with torch.no_grad():
        head.weight.zero_()
        head.bias.copy_(torch.arange(head.bias.numel(), dtype=torch.float))  # the longer, the likelier
    batch = toy_batch()  # 3 and 4 source tokens
    hyps = task.objective_impl.translate(batch)
    assert [len(h) for h in hyps] == [3 + 3, 4 + 3]  # the one candidate: the longest allowed
    hyps = task.objective_impl.translate(batch, 3)
    assert [len(h) for h in hyps] in ([a, b] for a in (4, 5, 6) for b in (5, 6, 7))  # the 3 longest allowed
    task.hparams.max_len_b = 100  # now model.max_len (32) limits: 32 - (1 + source tokens) slots
    hyps = task.objective_impl.translate(batch)
    assert [len(h) for h in hyps] == [32 - 4, 32 - 5]


@pytest.mark.e2e
def test_tiny_model_overfits_a_reversal_task():
    """16 pairs target = reversed source (lengths 3..8, 24 token types): after at most 300 Adam steps (measured:
    all 16 exact at step 125) the length head and 4 rounds of mask-predict reproduce every target exactly."""
    torch.manual_seed(0)
    pairs = reversal_pairs(16)
    batch = collate_translation([(i, s + [2], [1] + t, t + [2]) for i, (s, t) in enumerate(pairs)])
    gold = [t for _, t in pairs]
    task = nat_task(label_smoothing=0.0)
    opt = torch.optim.Adam(task.parameters(), lr=3e-3)
    right = 0
    for step in range(1, 301):
        task.train()
        out = task.objective_impl.losses(batch)
        opt.zero_grad()
        (out["token"] + out["length"]).backward()
        opt.step()
        if step % 25 == 0:
            task.eval()
            hyps = task.objective_impl.translate(batch, 1, 4)
            right = sum(h == y for h, y in zip(hyps, gold))
            if right == len(gold):
                break
    assert right == 16, f"{right}/16 exact after {step} steps"
    assert task.objective_impl.losses(batch)["length_acc"] == 1.0


@pytest.mark.slow
@pytest.mark.e2e
def test_compiled_training_loss_at_two_lengths():
    """model.compile_scope=model on encoder_only translation: the compiled training loss (aot_eager, dynamic
    shapes: the second batch has other lengths) equals eager with the same seed. The CMLM mask's uniform draws
    once failed to trace at symbolic shapes (torch.rand(shape, generator=None))."""
    from zoo.tasks.base import compile_training_loss

    torch._dynamo.reset()
    torch.manual_seed(0)
    task = nat_task().train()
    a = toy_batch()
    b = {k: torch.cat([v, v[:, :1]], 1) for k, v in a.items()}  # one column longer (padding)
    b["src"][:, -1] = 0
    b["src_key_padding_mask"][:, -1] = True
    b["tgt_out"][:, -1] = 0
    b["tgt_key_padding_mask"][:, -1] = True
    eager = []
    for batch in (a, b, a):
        torch.manual_seed(5)
        eager.append(task.training_loss(batch).item())
    compile_training_loss(task, backend="aot_eager", dynamic=True)
    for batch, want in zip((a, b, a), eager):
        torch.manual_seed(5)
        assert abs(task.training_loss(batch).item() - want) < 1e-5


@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only", "encoder_only"])
def test_forward_flops_per_token_reads_the_sequences_each_arch_reads(arch):
    """results.json's flops_per_token for translation: encoder_decoder at (target 9, source 7) tokens apart;
    the one-sequence archs over source + target joined (16 tokens), zoo.model.cost.flops_per_token."""
    from zoo.model.cost import flops_per_token

    model = dict(vocab_size=30, d_model=32, n_heads=2, d_ff=64, n_layers=2, dropout=0.0, max_len=32)
    task = Translation(arch, model, {"src": TOK, "tgt": TOK}, {"lr": 3e-3}, {"warmup_steps": 1})
    expected = flops_per_token(task.model, 9, 7) if arch == "encoder_decoder" else flops_per_token(task.model, 16)
    assert task.forward_flops_per_token(9, 7) == expected > 0
