"""python -m zoo.trace: the textbook walk-through ("I love you" -> "<s> 我 爱", vocabulary 10, d_model 4, 2 heads,
d_ff 16, one layer a stack) traced through each architecture. Every shape is the walk-through's; every value equals
an independent computation (torch's nn.Transformer with the same weights, closed-form sinusoids and masks, one
attention head recomputed by hand); the FLOPs equal zoo.model.cost and torch's FlopCounterMode; tracing leaves the
logits bit-identical; a trained checkpoint traces on its own tokenizer; bad input exits 2 naming the fix."""

import json
import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from zoo_run import TINY, counted_flops, make_cfg, needs_shared

from zoo.model.convert import from_torch_transformer
from zoo.model.cost import activation_memory, forward_flops
from zoo.trace.command import build, main, parser
from zoo.trace.hooks import run_model, trace
from zoo.trace.inputs import TOY_VOCAB
from zoo.trace.text import render_rich

pytestmark = pytest.mark.usefixtures("one_thread")

ARCHS = ("encoder_decoder", "decoder_only", "encoder_only")


def traced(*argv):
    """(trace, arch, ModelConfig, inputs, model) of `python -m zoo.trace <argv>`."""
    return build(parser().parse_intermixed_args(list(argv)))


@pytest.fixture(scope="module")
def default():
    """The default trace of each architecture."""
    return {arch: traced(f"+arch={arch}") for arch in ARCHS}


def stage(tr, name):
    return next(s for s in tr.stages if s.name == name)


def printed(capsys, *argv) -> str:
    assert main([*argv, "--plain"]) == 0
    return capsys.readouterr().out


def printed_shapes(text: str) -> dict:
    """{stage name: (input shape, output shape, {part: shape})} as printed."""
    out, name = {}, None
    for line in text.splitlines():
        if m := re.match(r"== (\S+): ", line):
            name = m.group(1)
        elif m := re.match(r"  shape    (\[[\d, ]*\]) \(.*?\) -> (\[[\d, ]*\]) \(", line):
            out[name] = (json.loads(m.group(1)), json.loads(m.group(2)), {})
        elif name and (m := re.match(r"           (\w+): (\[[\d, ]*\]) \(", line)):
            out[name][2][m.group(1)] = json.loads(m.group(2))
    return out


# the walk-through's shapes: B = 1, T = S = 3 tokens, d_model 4, 2 heads of d_k 2, d_ff 16, 10 tokens
X, HEADS, SCORES = [1, 3, 4], [1, 2, 3, 2], [1, 2, 3, 3]


def attention_shapes(prefix, T=3):
    x, heads, scores = [1, T, 4], [1, 2, T, 2], [1, 2, T, T]
    return {
        f"{prefix}.heads": ([1, T, 4], heads, {"Q": heads, "K": heads, "V": heads}),
        f"{prefix}.scores": (heads, scores, {}),
        f"{prefix}.weights": (scores, scores, {}),
        f"{prefix}.values": (scores, heads, {}),
        f"{prefix}.combine": (heads, x, {"concat": x}),
        f"{prefix}.add_norm": (x, x, {}),
    }


def stack_shapes(prefix, T=3, cross=False):
    x = [1, T, 4]
    out = attention_shapes(f"{prefix}.self_attn", T)
    if cross:
        out.update(attention_shapes(f"{prefix}.cross_attn", T))
    out[f"{prefix}.ffn"] = (x, x, {"hidden": [1, T, 16]})
    out[f"{prefix}.ffn.add_norm"] = (x, x, {})
    return out


def embedding_shapes(p, T=3):
    return {f"{p}{s}": ([1, T], [1, T, 4], {}) for s in ("embedding", "positions", "input")}


def head_shapes(T=3):
    return {"logits": ([1, T, 4], [1, T, 10], {}), "probs": ([1, T, 10], [1, T, 10], {})}


WALKTHROUGH = {
    "encoder_decoder": {
        **embedding_shapes("src_"),
        **stack_shapes("encoder.0"),
        **embedding_shapes("tgt_"),
        **stack_shapes("decoder.0", cross=True),
        **head_shapes(),
    },
    "decoder_only": {**embedding_shapes("", 6), **stack_shapes("decoder.0", 6), **head_shapes(6)},
    "encoder_only": {**embedding_shapes(""), **stack_shapes("encoder.0"), **head_shapes()},
}


@pytest.mark.parametrize("arch", ARCHS)
def test_every_printed_shape_is_the_walkthroughs(capsys, default, arch):
    """The default trace prints, stage by stage and in order, exactly the walk-through's shapes; its inputs are
    the walk-through's ids ("I love you" = 2 5 3, "<s> 我 爱" = 1 7 4)."""
    got = printed_shapes(printed(capsys, f"+arch={arch}"))
    want = WALKTHROUGH[arch]
    assert list(got) == list(want)
    assert got == want
    inputs = default[arch][3]
    if arch == "encoder_decoder":
        assert inputs["src"].tolist() == [[2, 5, 3]] and inputs["tgt"].tolist() == [[1, 7, 4]]
    else:
        assert inputs["seq"].tolist() == ([[2, 5, 3, 1, 7, 4]] if arch == "decoder_only" else [[2, 5, 3]])


def test_cross_attention_shapes_and_causal_mask_printed(capsys):
    """Cross-attention's Q comes from the decoder's tokens, K and V from the encoder's 3 (S); the decoder's mask is
    printed as the 0/1 lower triangle with the target tokens as labels; position 1's fingerprint is
    [0.84, 0.54, 0.01, 1.00] (sin(1/100) = 0.01, where hand-made walk-throughs print 0.1)."""
    out = printed(
        capsys,
        "+arch=encoder_decoder",
        "--only",
        "src_positions,decoder.0.self_attn.weights,decoder.0.cross_attn.heads",
    )
    assert "K: [1, 2, 3, 2] (B, heads, S, d_k)" in out
    assert "memory (the encoder output): [1, 3, 4] (B, S, d_model)" in out
    assert re.search(r"love\s+0\.84\s+0\.54\s+0\.01\s+1\.00\n", out)
    cross = out[out.index("== decoder.0.cross_attn.heads") :]
    for part, labels in (("Q", ["<s>", "我", "爱"]), ("K", ["I", "love", "you"]), ("V", ["I", "love", "you"])):
        block = cross[cross.index(f"  {part}, head 0\n") :].splitlines()[2:5]  # queries: the target; K, V: the source
        assert [line.split()[0] for line in block] == labels
    mask = out[out.index("mask (1 = may attend") :].splitlines()[1:5]
    assert [line.split() for line in mask] == [
        ["<s>", "我", "爱"],
        ["<s>", "1", "0", "0"],
        ["我", "1", "1", "0"],
        ["爱", "1", "1", "1"],
    ]


def sinusoid(pos: int, d: int) -> list[float]:
    """Vaswani et al. 2017, sec. 3.5, written out: sin at even index 2i, cos at odd 2i + 1, of pos / 10000^(2i/d)."""
    return [(math.sin if j % 2 == 0 else math.cos)(pos / 10000 ** ((j - j % 2) / d)) for j in range(d)]


def test_positions_are_the_closed_form_sinusoid_at_every_index():
    """A decoder_only sequence of all 16 positions (model.max_len): each traced fingerprint is the closed form."""
    src = " ".join(["I", "love", "you"] * 4)  # 12 tokens + <s> + 3 = 16
    tr, _, cfg, _, model = traced("+arch=decoder_only", "--src", src, "--tgt", "我 爱 你")
    pe = stage(tr, "positions").output[0]
    assert pe.shape == (cfg.max_len, 4)
    want = torch.tensor([sinusoid(p, 4) for p in range(cfg.max_len)])
    assert torch.allclose(pe, want, atol=1e-6)
    tok = model.embed.tok.weight[stage(tr, "input").input[0]]
    assert torch.allclose(stage(tr, "input").output[0], tok * 2 + want, atol=1e-6)  # x sqrt(d_model) + PE


def test_values_equal_nn_transformer_with_the_same_weights():
    """nn.Transformer's modules with the weights loaded into the traced model (zoo.model.convert) give every
    traced value: both stacks' attention weights per head and outputs, the FFNs, the norms, the logits."""
    tr0, _, _, inputs, model = traced("+arch=encoder_decoder", "model.final_norm=true")
    torch.manual_seed(5)
    ref = nn.Transformer(4, 2, 1, 1, 16, dropout=0.0, batch_first=True).eval()
    missing, unexpected = model.load_state_dict(from_torch_transformer(ref.state_dict()), strict=False)
    assert not unexpected and all(k.startswith(("src_embed", "tgt_embed", "lm_head")) for k in missing)
    tr = trace(model, inputs, tr0.labels, TOY_VOCAB)
    src = model.src_embed.tok.weight[inputs["src"]] * 2 + torch.tensor([sinusoid(p, 4) for p in range(3)])
    tgt = model.tgt_embed.tok.weight[inputs["tgt"]] * 2 + torch.tensor([sinusoid(p, 4) for p in range(3)])
    causal = nn.Transformer.generate_square_subsequent_mask(3)
    tol = dict(atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        enc = ref.encoder.layers[0]
        assert torch.allclose(stage(tr, "src_input").output, src, **tol)
        a, w = enc.self_attn(src, src, src, need_weights=True, average_attn_weights=False)
        assert torch.allclose(stage(tr, "encoder.0.self_attn.weights").output, w, **tol)
        assert torch.allclose(stage(tr, "encoder.0.self_attn.combine").output, a, **tol)
        h = enc.norm1(src + a)
        assert torch.allclose(stage(tr, "encoder.0.self_attn.add_norm").output, h, **tol)
        f = enc.linear2(F.relu(enc.linear1(h)))
        assert torch.allclose(stage(tr, "encoder.0.ffn").parts["hidden"][0], F.relu(enc.linear1(h)), **tol)
        assert torch.allclose(stage(tr, "encoder.0.ffn").output, f, **tol)
        memory = ref.encoder(src)
        assert torch.allclose(stage(tr, "encoder.norm").output, memory, **tol)
        dec = ref.decoder.layers[0]
        a, w = dec.self_attn(tgt, tgt, tgt, attn_mask=causal, need_weights=True, average_attn_weights=False)
        assert torch.allclose(stage(tr, "decoder.0.self_attn.weights").output, w, **tol)
        assert torch.allclose(stage(tr, "decoder.0.self_attn.combine").output, a, **tol)
        h = dec.norm1(tgt + a)
        a, w = dec.multihead_attn(h, memory, memory, need_weights=True, average_attn_weights=False)
        assert torch.allclose(stage(tr, "decoder.0.cross_attn.weights").output, w, **tol)
        assert torch.allclose(stage(tr, "decoder.0.cross_attn.combine").output, a, **tol)
        out = ref(src, tgt, tgt_mask=causal)
        assert torch.allclose(stage(tr, "decoder.norm").output, out, **tol)
        logits = out @ model.lm_head.weight.T
        assert torch.allclose(stage(tr, "logits").output, logits, **tol)
        assert torch.allclose(stage(tr, "probs").output, logits.softmax(-1), **tol)


def one_head(x, mha, mask, memory=None, head=0):
    """Head `head` of a MultiHeadAttention by hand from its weights: (scores, weights, output), each (T_q, .)."""
    d, dk = x.shape[-1], x.shape[-1] // mha.n_heads
    if memory is None:
        w, b = mha.qkv_proj.weight, mha.qkv_proj.bias
        q, k, v = (x @ w[i * d : (i + 1) * d].T + b[i * d : (i + 1) * d] for i in range(3))
    else:
        q = x @ mha.q_proj.weight.T + mha.q_proj.bias
        kv = memory @ mha.kv_proj.weight.T + mha.kv_proj.bias
        k, v = kv[..., :d], kv[..., d:]
    cut = slice(head * dk, (head + 1) * dk)
    scores = q[0, :, cut] @ k[0, :, cut].T / math.sqrt(dk)
    weights = scores.masked_fill(mask == 0, float("-inf")).softmax(-1)
    return scores, weights, weights @ v[0, :, cut]


def closed_form_mask(arch, stack, T, prefix=None, pad=None):
    """The mask attention must apply, written out: causal j <= i, prefix j <= i or j < prefix, padding columns 0."""
    i, j = torch.arange(T).unsqueeze(1), torch.arange(T).unsqueeze(0)
    m = torch.ones(T, T, dtype=torch.long)
    if stack == "decoder":
        m = (j <= i).long() if prefix is None else ((j <= i) | (j < prefix)).long()
    if pad is not None:
        m = m * (~pad).long().unsqueeze(0)
    return m


@pytest.mark.parametrize(
    "arch, extra, prefix, pad",
    [
        ("encoder_decoder", [], None, None),
        ("decoder_only", [], None, None),
        ("decoder_only", ["model.mask=prefix"], 4, None),
        ("encoder_only", [], None, None),
        ("encoder_only", ["--src", "I love you <pad> <pad>"], None, [3, 4]),
        ("decoder_only", ["--src", "I love <pad> you"], None, [2]),
    ],
)
def test_masks_and_one_head_recomputed_from_the_traced_inputs(arch, extra, prefix, pad):
    """For each arch and mask (causal, prefix, padding): the printed mask is the closed form, the weights are 0
    exactly where it is 0, and head 0's scores, weights and output recomputed by hand from the traced input of its
    stage equal the traced ones."""
    tr, _, _, inputs, model = traced(f"+arch={arch}", *extra)
    name = "encoder" if arch == "encoder_only" else "decoder"
    stack = getattr(model, name)
    s = "seq" if arch != "encoder_decoder" else "tgt"
    T = inputs[s].shape[1]
    pad_mask = None if pad is None else torch.tensor([t in pad for t in range(T)])
    want = closed_form_mask(arch, name if arch != "encoder_only" else "encoder", T, prefix, pad_mask)
    w_stage = stage(tr, f"{name}.0.self_attn.weights")
    assert torch.equal(w_stage.mask, want)
    assert w_stage.rows == w_stage.cols == tr.labels[s]
    assert torch.all(w_stage.weights[:, want == 0] == 0)
    x = stage(tr, f"{name}.0.self_attn.heads").input
    with torch.no_grad():
        scores, weights, out = one_head(x, stack.layers[0].self_attn, want)
    tol = dict(atol=1e-5, rtol=1e-5)
    assert torch.allclose(stage(tr, f"{name}.0.self_attn.scores").output[0, 0], scores, **tol)
    assert torch.allclose(w_stage.weights[0], weights, **tol)
    assert torch.allclose(stage(tr, f"{name}.0.self_attn.values").output[0, 0], out, **tol)
    if arch == "encoder_decoder":
        cross = stage(tr, "decoder.0.cross_attn.weights")
        assert torch.equal(cross.mask, torch.ones(3, 3, dtype=torch.long))
        memory = stage(tr, "encoder.0.ffn.add_norm").output
        xq = stage(tr, "decoder.0.cross_attn.heads").input
        with torch.no_grad():
            _, weights, out = one_head(xq, stack.layers[0].cross_attn, cross.mask, memory)
        assert torch.allclose(cross.weights[0], weights, **tol)
        assert torch.allclose(stage(tr, "decoder.0.cross_attn.values").output[0, 0], out, **tol)


def test_source_padding_masks_cross_attention():
    """A <pad> in the source is a padding column of the encoder's and the cross-attention's masks."""
    tr, *_ = traced("+arch=encoder_decoder", "--src", "I <pad> you")
    want = torch.tensor([[1, 0, 1]] * 3)
    assert torch.equal(stage(tr, "encoder.0.self_attn.weights").mask, want)
    assert torch.equal(stage(tr, "decoder.0.cross_attn.weights").mask, want)
    assert torch.all(stage(tr, "decoder.0.cross_attn.weights").weights[:, :, 1] == 0)


OPTIONS = [
    ["+arch=encoder_decoder"],
    ["+arch=decoder_only", "model.mask=prefix"],
    ["+arch=encoder_only"],
    [
        "+arch=encoder_decoder",
        "model.norm_first=true",
        "model.position=rope",
        "model.activation=swiglu",
        "model.n_kv_heads=1",
    ],
    ["+arch=decoder_only", "model.position=alibi", "model.norm=rmsnorm"],
    ["+arch=encoder_decoder", "model.position=t5_relative", "model.n_layers=2"],
]


@pytest.mark.parametrize("argv", OPTIONS, ids=lambda a: " ".join(a))
def test_trace_leaves_logits_bit_identical_and_counts_the_forwards_flops(argv):
    """The traced forward's logits equal the untraced forward's bit for bit; the FLOP total equals
    zoo.model.cost.forward_flops for the whole forward and torch's FlopCounterMode count of the model's forward;
    the activation bytes are Korthikanti et al.'s l * (34 b N d + 5 b N^2 h) (a decoder layer's cross-attention
    not counted)."""
    tr, arch, cfg, inputs, model = traced(*argv)
    assert torch.equal(tr.logits, run_model(model, inputs))
    assert torch.equal(stage(tr, "logits").output, tr.logits)
    T = inputs["tgt" if arch == "encoder_decoder" else "seq"].shape[1]
    S = inputs["src"].shape[1] if arch == "encoder_decoder" else None
    assert tr.total_flops == forward_flops(model, 1, T, S)["total"]
    assert tr.total_flops == counted_flops(lambda: run_model(model, inputs))
    d, h = cfg.d_model, cfg.n_heads
    korthikanti = lambda n_layers, N: n_layers * (34 * N * d + 5 * N * N * h)  # noqa: E731
    if arch == "encoder_decoder":
        want = korthikanti(cfg.encoder_layers, S) + korthikanti(cfg.decoder_layers, T)
    else:
        want = korthikanti(cfg.n_layers, T)
        assert tr.total_activation_bytes == activation_memory(model, 1, T)
    assert tr.total_activation_bytes == want


def test_rope_rotates_q_and_k_by_the_closed_form_angle():
    """With model.position=rope the traced Q is the un-rotated projection rotated pair by pair by pos * theta_i,
    theta_i = 10000^(-2i/d_k) (Su et al. 2021), from the traced input; the positions stage shows those angles."""
    tr, *_, model = traced("+arch=decoder_only", "model.position=rope")
    x = stage(tr, "decoder.0.self_attn.heads").input[0]  # (T, d)
    with torch.no_grad():
        q = (
            x @ model.decoder.layers[0].self_attn.qkv_proj.weight[:4].T
            + model.decoder.layers[0].self_attn.qkv_proj.bias[:4]
        )
    want = torch.empty(2, x.shape[0], 2)
    for head in range(2):
        for pos in range(x.shape[0]):
            a, b = q[pos, 2 * head], q[pos, 2 * head + 1]
            c, s = math.cos(pos), math.sin(pos)  # d_k = 2: one pair, theta_0 = 1
            want[head, pos] = torch.tensor([a * c - b * s, a * s + b * c])
    assert torch.allclose(stage(tr, "decoder.0.self_attn.heads").parts["Q"][0][0], want, atol=1e-5)
    assert torch.allclose(stage(tr, "positions").parts["cos"][0][0, 0, :, 0], torch.cos(torch.arange(6.0)), atol=1e-6)


def test_only_list_and_out(tmp_path, capsys):
    """--list names every stage; --only prints those stages (a prefix picks a group); --out writes trace.json (shapes
    as lists of ints, every stage's values) and one PNG figure; --no-values prints no numbers but masks."""
    assert main(["--list", "+arch=encoder_only"]) == 0  # options and overrides in any order
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == list(WALKTHROUGH["encoder_only"])
    out = printed(capsys, "+arch=encoder_only", "--only", "encoder.0.self_attn.weights,logits", "--no-values")
    assert re.findall(r"== (\S+):", out) == ["encoder.0.self_attn.weights", "logits"]
    assert "attention weights, head 1" in out and "values" not in out.split("== logits")[1]
    out = printed(capsys, "+arch=encoder_only", "--only", "encoder.0.ffn")
    assert re.findall(r"== (\S+):", out) == ["encoder.0.ffn", "encoder.0.ffn.add_norm"]
    assert main(["+arch=encoder_decoder", "--out", str(tmp_path), "--plain"]) == 0
    data = json.loads((tmp_path / "trace.json").read_text(encoding="utf-8"))
    assert [s["name"] for s in data["stages"]] == list(WALKTHROUGH["encoder_decoder"])
    first = data["stages"][0]
    assert first["input_shape"] == [1, 3] and first["output_shape"] == [1, 3, 4]
    assert all(isinstance(n, int) for s in data["stages"] for n in s["input_shape"] + s["output_shape"])
    assert data["stages"][-1]["topk"][0]["position"] == "<s>"
    assert data["total_flops"] == sum(s["flops"] or 0 for s in data["stages"])
    png = (tmp_path / "trace.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_rich_output(default):
    """The rich rendering has every stage's rule and a table per matrix."""
    from rich.console import Console

    tr, arch, cfg, *_ = default["decoder_only"]
    console = Console(record=True, width=120)
    render_rich(tr, tr.stages, None, "model", console)
    text = console.export_text()
    assert all(name in text for name in tr.names())
    assert "attention weights, head 1" in text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--src", "I hate you"], "--src: token 'hate' is not in the toy vocabulary"),
        (["--tgt", "我 恨"], "--tgt: token '恨' is not in the toy vocabulary"),
        (["--src", " ".join(["I"] * 17)], "--src is 17 tokens, longer than model.max_len=16; shorten it"),
        (["model.max_len=4", "--tgt", "我 爱 你 我"], "<s> + --tgt is 5 tokens, longer than model.max_len=4"),
        (["+arch=encoder_only", "--tgt", "我"], "--tgt: encoder_only reads the source alone; drop --tgt"),
        (["--only", "encoder.0.attn"], "--only encoder.0.attn: no such stage in this trace; its stages are:"),
        (["model.vocab_size=20"], "the toy vocabulary of 10 tokens sets model.vocab_size; drop it"),
        (["ckpt_path=/nonexistent/run"], "/nonexistent/run does not exist; pass a run's directory"),
        (["model.n_heads=3"], "model.d_model=4 is not divisible by model.n_heads=3"),
        (["seed=abc"], "seed='abc' must be a non-negative integer"),
    ],
)
def test_bad_input_exits_2_naming_the_fix(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("zoo.trace: error: ") and message in err and err.count("\n") == 1


@needs_shared
@pytest.mark.e2e
def test_checkpoint_traces_on_its_own_tokenizer(tmp_path, capsys):
    """A checkpoint of a tiny Tiny Shakespeare run (decoder_only, characters) traces its text on its own
    tokenizer: the labels are its characters, and the top-1 token at each position is the model's greedy step
    (the next token model.generate picks after that prefix)."""
    from zoo.run.train import run

    run(make_cfg(tmp_path, [*TINY, "trainer.max_steps=2", "logger=csv"]))
    tr, arch, cfg, inputs, model = traced(f"ckpt_path={tmp_path}", "--src", "ROMEO:")
    assert arch == "decoder_only" and tr.labels["seq"] == list("ROMEO:")
    top1 = [top[0][0] for top in stage(tr, "probs").topk]
    seq = inputs["seq"]
    with torch.no_grad():
        greedy = [model.generate(seq[:, : t + 1], 1, temperature=0.0)[0, -1].item() for t in range(seq.shape[1])]
    assert top1 == [tr.vocab[i] for i in greedy]
    out = printed(capsys, f"ckpt_path={tmp_path}", "--src", "ROMEO:", "--only", "probs")
    assert re.search(r"== probs:", out) and f"{tr.vocab[greedy[-1]]} " in out.split("(token probability)")[1]


def test_walkthrough_page_shows_the_commands_real_output():
    """docs/walkthrough.md is, word for word, what `python docs/gen_walkthrough.py` makes of it now: every
    output block after its marker is the command's fresh output, and every output block has a marker. Each file
    the page prints for a stage's code defines that code (its class or def)."""
    import importlib.util

    from test_trace_seams import undefined
    from zoo_run import REPO

    spec = importlib.util.spec_from_file_location("gen_walkthrough", REPO / "docs" / "gen_walkthrough.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    page = (REPO / "docs" / "walkthrough.md").read_text(encoding="utf-8")
    assert page == gen.render(page), "docs/walkthrough.md is out of date: run python docs/gen_walkthrough.py"
    blocks = re.findall(r"```text\n", page)
    marked = [m.group("block") for m in gen.MARKER.finditer(page)]
    assert len(blocks) >= 15 and len([b for b in marked if b.startswith("```text")]) == len(blocks)
    assert any(b.startswith("| stage |") for b in marked)  # the table of every stage's code and file
    modules = re.findall(r"^  module   (.*)$|^\| `[\w.]+` \| `(.*)` \|$", page, re.M)
    modules = [a or b for a, b in modules]
    assert len(modules) > 40 and any("attend (zoo/" in m for m in modules)
    assert [m for m in modules if undefined(m, REPO)] == []


@pytest.mark.parametrize("cell", ["encoder_decoder", "decoder_only", "prefix_lm"])
def test_translation_checkpoint_traces_on_its_own_tokenizers(tmp_path, cell):
    """A translation task's checkpoint (tests/test_translate.py's, with the keys a run saves): the source is read
    with its BPE (EOS appended, as the task does), the decoder starts from its start token (decoder_only: source
    + EOS + target, zoo's joined objective, with the prefix over source and EOS), and the last position's top-1
    token is the model's greedy step."""
    from test_translate import SOURCES, write_checkpoint

    path = write_checkpoint(tmp_path / "toy.ckpt", cell)
    tr, arch, cfg, inputs, model = traced(f"ckpt_path={path}", "--src", SOURCES[0], "--tgt", "A dog")
    name = "tgt" if arch == "encoder_decoder" else "seq"
    labels = tr.labels["src" if arch == "encoder_decoder" else "seq"]
    assert "".join(labels).replace("\u2581", " ").strip().startswith("Ein Hund")
    assert "</s>" in labels
    with torch.no_grad():
        if arch == "encoder_decoder":
            assert inputs["tgt"][0, 0].item() == model.start_id
            logits = model(inputs["src"], inputs["tgt"])[0, -1]
            first = model.generate(inputs["src"], 1, temperature=0.0)[0, 1].item()
            assert tr.stages[-1].topk[0][0][0] == tr.vocab[first]  # BOS alone: the first greedy token
        else:
            assert inputs["prefix_len"] == (labels.index("</s>") + 1 if cfg.mask == "prefix" else None)
            step = model.generate(inputs["seq"], 1, temperature=0.0, prefix_len=inputs["prefix_len"])[0, -1].item()
            logits = model(inputs["seq"], prefix_len=inputs["prefix_len"])[0, -1]
            assert tr.stages[-1].topk[-1][0][0] == tr.vocab[step]
    assert tr.stages[-1].topk[-1][0][0] == tr.vocab[int(logits.argmax())]
    assert len(tr.labels[name]) == inputs[name].shape[1]
