

# ---- layers NetLoom has that this PyTorch may lack --------------------------------


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight over the trailing normalized_shape, as
    NetLoom's RMSNorm (torch.nn.RMSNorm from PyTorch 2.4 computes the same)."""

    def __init__(self, normalized_shape, eps=1e-06, elementwise_affine=True):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape)) if elementwise_affine else None

    def forward(self, x):
        dims = tuple(range(-len(self.normalized_shape), 0))
        y = x * torch.rsqrt(x.pow(2).mean(dim=dims, keepdim=True) + self.eps)
        return y * self.weight if self.weight is not None else y


def sinusoids(tokens, channels, device=None):
    """Vaswani et al.'s encoding: even channels sin, odd channels cos of
    pos / 10000^(2i / channels), pair i = channel // 2."""
    pairs = (channels + 1) // 2
    pos = torch.arange(tokens, dtype=torch.float64, device=device)[:, None]
    pair = torch.arange(channels, device=device) // 2
    angle = pos * torch.exp(-math.log(10000.0) * pair.to(torch.float64) / pairs)
    even = (torch.arange(channels, device=device) % 2 == 0)[None, :]
    return torch.where(even, torch.sin(angle), torch.cos(angle)).to(torch.float32)


class PositionEmbedding(nn.Module):
    """Adds a learned (max_len rows) or sinusoidal vector per position to a
    batch x tokens x channels sequence."""

    def __init__(self, channels, max_len=512, kind="learned"):
        super().__init__()
        self.kind = kind
        if kind == "learned":
            self.weight = nn.Parameter(torch.empty(max_len, channels).normal_(0.0, 0.02))

    def forward(self, x):
        tokens, channels = x.shape[1], x.shape[2]
        if self.kind == "learned":
            return x + self.weight[:tokens]
        return x + sinusoids(tokens, channels, x.device)


def rotary_embedding(x, base=10000.0):
    """RoPE, rotate-half form, on batch x heads x tokens x head size: channel pair
    (i, i + D/2) turned by pos * base^(-2i/D)."""
    tokens, dim = x.shape[-2], x.shape[-1]
    half = dim // 2
    pos = torch.arange(tokens, dtype=torch.float64, device=x.device)[:, None]
    freq = torch.exp(-math.log(base) * torch.arange(half, dtype=torch.float64,
                                                      device=x.device) / half)
    angle = (pos * freq).to(x.dtype)
    cos = torch.cat([angle.cos(), angle.cos()], dim=-1)
    sin = torch.cat([angle.sin(), angle.sin()], dim=-1)
    turned = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + turned * sin


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None):
    """torch.nn.functional.scaled_dot_product_attention where this PyTorch has it
    (2.0 on; 2.1 for `scale`), else the same softmax(q k^T scale + mask) v written
    out. An integer mask keeps the keys where it is nonzero."""
    if attn_mask is not None and not attn_mask.is_floating_point():
        attn_mask = attn_mask != 0
    fused = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if fused is not None and (scale is None or torch.__version__ >= "2.1"):
        kwargs = {} if scale is None else {"scale": scale}
        return fused(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                     **kwargs)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if is_causal:
        hidden = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool,
                            device=q.device).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    if dropout_p > 0:
        probs = torch.dropout(probs, dropout_p, True)
    return torch.matmul(probs, v)
