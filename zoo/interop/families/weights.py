"""The weight maps' shared machinery: an Entry maps one zoo tensor to its Hugging Face tensors, `attention` and
`weight_bias` build the entries the families share, and hf_to_zoo / zoo_to_hf apply a family's map (unused_keys names
what a conversion loses). The math each map relies on is the installed transformers' modeling file of the family
(modeling_gpt2.py, modeling_bert.py, modeling_marian.py, modeling_bart.py, modeling_t5.py).

Entry kinds: copy (same tensor), T (transposed: GPT-2's Conv1D stores (in, out)), cat (zoo's fused tensor is
the HF tensors stacked along dim 0: [W_q; W_k; W_v], [W_k; W_v], T5's [wi_0; wi_1]), row ((1, V) <-> (V,):
final_logits_bias), clone (an HF copy of an already written tensor, stored separately, e.g. BART's unused
`shared` table when nothing is tied).
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from zoo.interop.stored_keys import is_recomputed


@dataclass
class Entry:
    """One zoo tensor (its state-dict key; "" for none) and the HF keys it maps to, by `kind`."""

    zoo: str
    hf: tuple[str, ...]
    kind: str = "copy"


def attention(z: str, h: str, q: str, k: str, v: str, o: str, bias: bool, cross: bool = False) -> list[Entry]:
    """Separate HF q / k / v / o projections -> zoo's fused qkv_proj (self) or q_proj + kv_proj (cross)."""
    kinds = ("weight", "bias") if bias else ("weight",)
    out = []
    for w in kinds:
        if cross:
            out += [
                Entry(f"{z}q_proj.{w}", (f"{h}{q}.{w}",)),
                Entry(f"{z}kv_proj.{w}", (f"{h}{k}.{w}", f"{h}{v}.{w}"), "cat"),
            ]
        else:
            out.append(Entry(f"{z}qkv_proj.{w}", (f"{h}{q}.{w}", f"{h}{k}.{w}", f"{h}{v}.{w}"), "cat"))
        out.append(Entry(f"{z}out_proj.{w}", (f"{h}{o}.{w}",)))
    return out


def weight_bias(z: str, h: str, bias: bool = True) -> list[Entry]:
    """The weight (and bias) of a module copied as they are (a linear layer, a norm): zoo's z, HF's h."""
    return [Entry(f"{z}.weight", (f"{h}.weight",))] + ([Entry(f"{z}.bias", (f"{h}.bias",))] if bias else [])


def hf_to_zoo(entries: Sequence[Entry], hf: dict[str, torch.Tensor], ignore: Sequence[str]) -> dict[str, torch.Tensor]:
    """zoo state dict from an HF one by `entries`. Raises KeyError naming a missing HF key, ValueError naming
    an HF key the map does not read (unless it matches an `ignore` pattern)."""
    out, used = {}, set()
    for e in entries:
        if e.kind == "clone":
            used.update(e.hf)
            continue
        missing = [k for k in e.hf if k not in hf]
        if missing:
            raise KeyError(f"the Hugging Face checkpoint has no {missing[0]!r} (needed for zoo's {e.zoo or 'head'})")
        used.update(e.hf)
        ts = [hf[k] for k in e.hf]
        if e.kind == "row":
            if e.zoo:
                out[e.zoo] = ts[0].reshape(-1)
            continue
        value = {"copy": lambda: ts[0], "T": lambda: ts[0].t(), "cat": lambda: torch.cat(ts, 0)}[e.kind]()
        out.setdefault(e.zoo, value.contiguous())
    extra = [k for k in hf if k not in used and not any(re.fullmatch(p, k) for p in ignore)]
    if extra:
        raise ValueError(
            f"the Hugging Face checkpoint has weights zoo's map does not read: {extra[:5]}"
            f"{' ...' if len(extra) > 5 else ''}"
        )
    return out


def unused_keys(entries: Sequence[Entry], hf: dict[str, torch.Tensor], recomputed: dict | None = None) -> list[str]:
    """The keys of an HF state dict whose values a conversion by `entries` loses: a key no entry reads (a
    clone entry reads nothing: it is written back from zoo's tensor), unless it holds the same tensor as a key
    that is read or an equal copy of one (a tied table), a table zoo computes itself and equal to it
    (`recomputed`: {key pattern: f(tensor) -> zoo's own table}, e.g. Marian's sinusoidal positions), or an
    integer buffer (position ids). For a warning that names them: BERT's pooler, a BART `shared` table no
    forward reads that differs from the decoder's, a position table other than zoo's sinusoid."""
    read = {k for e in entries if e.kind != "clone" for k in e.hf if k in hf}
    ptrs = {hf[k].data_ptr() for k in read}
    out = []
    for k, v in hf.items():
        if k in read or v.data_ptr() in ptrs or not v.is_floating_point():
            continue
        if any(hf[r].shape == v.shape and torch.equal(hf[r], v) for r in read):
            continue
        if is_recomputed(k, v, recomputed):
            continue
        out.append(k)
    return out


def zoo_to_hf(entries: Sequence[Entry], zoo: dict[str, torch.Tensor], vocab_size: int) -> dict[str, torch.Tensor]:
    """HF state dict from a zoo one by `entries`. Tensors tied in zoo (one storage) are written once, under the
    first HF key that maps them (the one transformers ties the others to). Raises ValueError naming a zoo
    key the map does not write."""
    out, seen, used = {}, set(), set()
    for e in entries:
        if e.kind == "row":
            bias = zoo[e.zoo] if e.zoo else torch.zeros(vocab_size)
            out[e.hf[0]] = bias.detach().reshape(1, -1).clone()
            used.add(e.zoo)
            continue
        t = zoo[e.zoo].detach()
        used.add(e.zoo)
        if e.kind == "clone":
            if e.hf[0] not in out:
                out[e.hf[0]] = t.clone()
            continue
        ptr = t.data_ptr()
        if ptr in seen:
            continue
        seen.add(ptr)
        if e.kind == "copy":
            out[e.hf[0]] = t.clone()
        elif e.kind == "T":
            out[e.hf[0]] = t.t().contiguous()
        elif e.kind == "cat":
            for k, part in zip(e.hf, t.chunk(len(e.hf), 0)):
                out[k] = part.contiguous().clone()
    ptrs_used = {zoo[k].data_ptr() for k in used if k}
    left = [k for k, v in zoo.items() if k not in used and v.data_ptr() not in ptrs_used]
    if left:
        raise ValueError(f"zoo weights with no Hugging Face equivalent in this family: {left[:5]}")
    return out
