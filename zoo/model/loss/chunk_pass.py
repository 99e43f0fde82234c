"""The chunk loop of zoo.model.loss.chunked_ce: one pass over the rows of h, C rows at a time, computing each
chunk's logits in one reused (C, V) buffer, its rows' cross-entropy and, when asked, the gradients. With h and w
in bf16 / fp16 the logits are the GEMM's fp32 sums, never rounded to the low precision before the softmax."""

import functools

import torch


def _add_in_blocks(acc: torch.Tensor, x: torch.Tensor, rows: int = 4096) -> None:
    """acc += x for x in a lower precision, block of rows by block: a mixed-dtype add_ would first convert the
    whole of x to acc's dtype (a temporary as large as grad w in fp32)."""
    for i in range(0, x.shape[0], rows):
        acc[i : i + rows].add_(x[i : i + rows])


@functools.cache
def _has_fp32_output_gemm(device: str, dtype: torch.dtype) -> bool:
    """Whether torch.mm on `device` (a CUDA device) returns fp32 sums of `dtype` operands (out_dtype): torch
    2.8+ on CUDA; checked once per device and dtype on a 1 x 1 product."""
    one = torch.ones(1, 1, dtype=dtype, device=device)
    try:
        return torch.mm(one, one, out_dtype=torch.float32).dtype == torch.float32
    except (RuntimeError, TypeError):  # an older torch, or a GPU without it
        return False


def _mm_fp32(hc: torch.Tensor, wt: torch.Tensor, wt32: torch.Tensor | None, z: torch.Tensor) -> None:
    """z (C, V) fp32 = hc (C, d) @ wt (d, V), both in a lower precision (bf16 / fp16), without rounding the
    result to it: a product of two bf16 (8-bit significand) or fp16 (11-bit) numbers is exact in fp32 (24-bit),
    so this is the sum a bf16 / fp16 GEMM accumulates in fp32 before it rounds its output. wt32 None: the GEMM's
    own fp32 output (CUDA, torch.mm's out_dtype); else wt32 = wt in fp32, an fp32 GEMM of the upcast operands."""
    if wt32 is None:
        torch.mm(hc, wt, out_dtype=z.dtype, out=z)
    else:
        torch.mm(hc.to(z.dtype), wt32, out=z)


def _project(
    hc: torch.Tensor, wt: torch.Tensor, b: torch.Tensor | None, z: torch.Tensor, wt32: torch.Tensor | None, low: bool
) -> None:
    """z (C, V) = hc (C, d) @ wt (d, V) + b in z's precision (fp32 or wider). low: hc, wt and b are in a lower
    precision; their products are then summed in fp32 (_mm_fp32) and never rounded to it, as the softmax
    statistics need: at logits near 100 a bf16 step is 0.5, so two classes 0.25 apart would tie (a loss of
    log 2 = 0.693 for the exact 0.826)."""
    if not low:
        if b is None:
            torch.mm(hc, wt, out=z)
        else:
            torch.addmm(b, hc, wt, out=z)
        return
    _mm_fp32(hc, wt, wt32, z)
    if b is not None:
        z.add_(b)


def _row_losses(
    z: torch.Tensor, tc: torch.Tensor, ls: float, z_loss: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Cross-entropy of each row of the logits z (C, V) against targets tc (C, 1), label smoothing ls, plus
    z_loss * logsumexp(z)^2 when z_loss > 0 (PaLM's z-loss, Chowdhery et al. 2022, sec. 5); leaves
    exp(z - max) in z. Returns (losses (C,), sum of exp(z - max) (C,), logsumexp (C,) or None without z-loss)."""
    m = z.amax(1, keepdim=True)  # (C, 1)
    z.sub_(m)  # z - max: log-probabilities are these minus log(sum exp)
    zt = z.gather(1, tc).squeeze(1)  # (C,)
    zmean = z.mean(1) if ls else None
    z.exp_()
    s = z.sum(1)  # (C,)
    loss = s.log() - (1.0 - ls) * zt  # -log p_target, smoothed: (1-ls)(-log p_t) + ls mean_j(-log p_j)
    if ls:
        loss -= ls * zmean
    lse = None
    if z_loss:
        lse = m.squeeze(1) + s.log()  # log Z
        loss += z_loss * lse.square()
    return loss, s, lse


def _logits_grad(
    z: torch.Tensor,
    s: torch.Tensor,
    sc: torch.Tensor,
    tc: torch.Tensor,
    ls: float,
    lse: torch.Tensor | None = None,
    z_loss: float = 0.0,
) -> None:
    """In place, from exp(z - max) (C, V) and its row sums s (C,): d loss / d z = sc * (softmax - (1 - ls)
    onehot(tc) - ls / V), sc (C,) the rows' d loss / d row loss; with the z-loss term z_loss * lse^2 (lse (C,)
    the rows' logsumexp) the softmax part is scaled by 1 + 2 z_loss lse (d lse / d z = softmax)."""
    if z_loss:
        z.mul_((sc * (1.0 + 2.0 * z_loss * lse) / s).unsqueeze(1))
    else:
        z.mul_((sc / s).unsqueeze(1))
    if ls:
        z.sub_((sc * (ls / z.shape[1])).unsqueeze(1))
    z.scatter_add_(1, tc, (-(1.0 - ls) * sc).unsqueeze(1))


def _grad_buffers(
    h: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, needs: tuple[bool, bool, bool], acc_dtype: torch.dtype
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """The gradients chunk_pass fills, where `needs` asks for them: (grad h (N, d) h.dtype, written row by row;
    grad w (V, d) and grad b (V,) acc_dtype zeros, accumulated; None for each not needed, grad b without b)."""
    grad_h = torch.empty_like(h) if needs[0] else None
    grad_w = torch.zeros(w.shape, dtype=acc_dtype, device=w.device) if needs[1] else None
    grad_b = torch.zeros(w.shape[0], dtype=acc_dtype, device=w.device) if needs[2] and b is not None else None
    return grad_h, grad_w, grad_b


def _add_chunk_grads(
    g: torch.Tensor,
    z: torch.Tensor,
    hc: torch.Tensor,
    w: torch.Tensor,
    start: int,
    grads: tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None],
    low: bool,
    low_gw: torch.Tensor | None,
) -> None:
    """One chunk's share of the gradients (_grad_buffers' grads): grad h rows start .. start + C = g @ w, grad w
    += g^T hc, grad b += the column sums of z. z (C, V): d loss / d logits in acc_dtype; g: the same in the
    projections' dtype (z itself unless `low`); hc (C, d): the chunk's rows of h; w (V, d). low: the
    projections run in a lower precision than acc_dtype, low_gw (V, d) the buffer of the chunk's grad w."""
    grad_h, grad_w, grad_b = grads
    end = start + hc.shape[0]
    if grad_h is not None:
        if low:
            grad_h[start:end] = torch.mm(g, w)
        else:
            torch.mm(g, w, out=grad_h[start:end])
    if grad_w is not None:
        if low:
            _add_in_blocks(grad_w, torch.mm(g.t(), hc, out=low_gw))
        else:
            grad_w.addmm_(g.t(), hc)
    if grad_b is not None:
        grad_b.add_(z.sum(0))


def chunk_pass(
    h: torch.Tensor,
    w: torch.Tensor,
    b: torch.Tensor | None,
    target: torch.Tensor,
    valid: torch.Tensor,
    label_smoothing: float,
    chunk: int,
    scale: torch.Tensor | None,
    needs: tuple[bool, bool, bool],
    acc_dtype: torch.dtype,
    z_loss: float = 0.0,
):
    """h (N, d), w (V, d), b (V,) or None, all in the compute dtype; target (N,) long, valid (N,) bool
    (target != ignore_index). scale (N,) acc_dtype: d loss / d row loss (0 on ignored rows); None = no
    gradient. needs: (grad h, grad w, grad b) wanted. z_loss: weight of each row's logsumexp^2 added to its
    loss (0 = plain cross-entropy, the same operations as without the term).
    Returns (row losses (N,) acc_dtype (0 where ignored), grad h (N, d) h.dtype | None, grad w (V, d) acc_dtype
    | None, grad b (V,) acc_dtype | None)."""
    N, V = h.shape[0], w.shape[0]
    ls = float(label_smoothing)
    rows = torch.empty(N, dtype=acc_dtype, device=h.device)
    grad = scale is not None
    grads = _grad_buffers(h, w, b, needs if grad else (False, False, False), acc_dtype)
    grad_h, grad_w, grad_b = grads
    low = h.dtype != acc_dtype  # projections in a lower precision than the softmax (autocast)
    buf = torch.empty((min(chunk, N), V), dtype=acc_dtype, device=h.device)  # the only (C, V) fp32 tensor
    # autocast: one (C, V) buffer in the projections' dtype (the logits' gradient) and one (V, d) for each
    # chunk's grad w before its fp32 accumulation, reused by every chunk
    low_buf = torch.empty_like(buf, dtype=h.dtype) if low and grad else None
    low_gw = torch.empty_like(w) if low and grad_w is not None else None
    safe_target = target.masked_fill(~valid, 0)
    wt = w.t()
    fp32_gemm = low and h.is_cuda and _has_fp32_output_gemm(str(h.device), h.dtype)
    wt32 = wt.to(acc_dtype) if low and not fp32_gemm else None  # the upcast operand of _mm_fp32, once a pass
    for start in range(0, N, chunk):
        end = min(start + chunk, N)
        hc, z = h[start:end], buf[: end - start]
        _project(hc, wt, b, z, wt32, low)
        tc = safe_target[start:end].unsqueeze(1)  # (C, 1)
        loss_c, s, lse = _row_losses(z, tc, ls, z_loss)
        rows[start:end] = loss_c.masked_fill_(~valid[start:end], 0.0)
        if not grad:
            continue
        _logits_grad(z, s, scale[start:end], tc, ls, lse, z_loss)
        g = low_buf[: end - start].copy_(z) if low else z  # d loss / d logits in the projections' dtype
        _add_chunk_grads(g, z, hc, w, start, grads, low, low_gw)
    return rows, grad_h, grad_w, grad_b
