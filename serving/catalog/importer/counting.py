"""Parameter counts from a config's shapes: every weight the checkpoint holds for the model vLLM
serves, layer by layer, as the families' transformers modules define them.

`tests/serving/catalog/test_importer_counts.py` builds each family's model with transformers on
the meta device and checks these counts equal its parameters, exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from serving.catalog.importer.layers import expert_count, experts_per_token
from serving.catalog.importer.reading import Fields

# Families whose attention has per-head q/k RMSNorm weights, and whose q, k, v projections carry
# biases always (Qwen2) or as `attention_bias` says; which also bias the output projection.
QK_NORM_TYPES = frozenset({"qwen3", "qwen3_moe", "qwen3_next", "gemma3_text"})
QKV_BIAS_ALWAYS = frozenset({"qwen2"})
NO_ATTENTION_BIAS = frozenset({"mistral", "mixtral", "phi3", "qwen2"})
O_BIAS_NEVER = frozenset({"glm4_moe", "qwen2", "mistral", "mixtral", "phi3"})
# Gemma 3 norms before and after both attention and MLP.
FOUR_NORM_TYPES = frozenset({"gemma3_text"})
COUNTED_TYPES = frozenset(
    {
        "llama", "mistral", "qwen2", "qwen3", "phi3", "mixtral", "qwen3_moe", "gpt_oss",
        "gemma3_text", "llama4_text", "qwen3_next", "glm4_moe", "deepseek_v3", "deepseek_v32",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Counts:
    total: int
    routed_experts: int = 0  # every routed expert's weights, all layers
    active_routed_experts: int = 0  # the experts_per_token a token visits, all layers

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.total + other.total,
            self.routed_experts + other.routed_experts,
            self.active_routed_experts + other.active_routed_experts,
        )

    @property
    def active(self) -> int:
        return self.total - self.routed_experts + self.active_routed_experts


def gqa_attention(text: Fields, model_type: str) -> int:
    hidden = text.whole("hidden_size")
    heads = text.whole("num_attention_heads")
    head_dim = text.head_dim()
    kv_heads = text.kv_heads()
    # Qwen3-Next's full-attention layers gate their output: the query projection is twice wide.
    q_width = heads * head_dim * (2 if model_type == "qwen3_next" else 1)
    kv_width = kv_heads * head_dim
    params = hidden * q_width + 2 * hidden * kv_width + heads * head_dim * hidden
    biased = model_type not in NO_ATTENTION_BIAS and text.flag("attention_bias")
    if biased or model_type in QKV_BIAS_ALWAYS:
        params += q_width + 2 * kv_width
    if biased and model_type not in O_BIAS_NEVER:
        params += hidden
    if model_type in QK_NORM_TYPES or (model_type == "glm4_moe" and text.flag("use_qk_norm")):
        params += 2 * head_dim
    if model_type == "gpt_oss":
        params += heads  # one learned attention sink per head
    return params


def mla_attention(text: Fields) -> int:
    """DeepSeek's latent attention (DeepseekV3Attention)."""
    hidden = text.whole("hidden_size")
    heads = text.whole("num_attention_heads")
    q_lora = text.optional_int("q_lora_rank")
    kv_lora = text.whole("kv_lora_rank")
    rope = text.whole("qk_rope_head_dim")
    nope = text.whole("qk_nope_head_dim")
    value = text.whole("v_head_dim")
    bias = text.flag("attention_bias")
    q_head = nope + rope
    if q_lora is None:
        query = hidden * heads * q_head
    else:  # down to q_lora_rank (+ its norm), then up to the heads
        query = hidden * q_lora + (q_lora if bias else 0) + q_lora + q_lora * heads * q_head
    latent = hidden * (kv_lora + rope) + ((kv_lora + rope) if bias else 0) + kv_lora
    up = kv_lora * heads * (nope + value)
    out = heads * value * hidden + (hidden if bias else 0)
    return query + latent + up + out + sparse_indexer(text)


def sparse_indexer(text: Fields) -> int:
    """DeepSeek V3.2's lightning indexer (vLLM's Indexer in deepseek_v2.py): wq_b from the
    compressed query to its heads, wk and weights_proj from the hidden state, and k_norm, a
    LayerNorm with weight and bias over one key."""
    if text.optional_int("index_topk") is None:
        return 0
    hidden = text.whole("hidden_size")
    heads = text.whole("index_n_heads")
    width = text.whole("index_head_dim")
    q_lora = text.whole("q_lora_rank")
    return q_lora * heads * width + hidden * width + hidden * heads + 2 * width


def linear_attention(text: Fields) -> int:
    """Qwen3-Next's Gated DeltaNet (Qwen3NextGatedDeltaNet)."""
    hidden = text.whole("hidden_size")
    value_heads = text.whole("linear_num_value_heads")
    key_dim = text.whole("linear_num_key_heads") * text.whole("linear_key_head_dim")
    value_width = text.whole("linear_value_head_dim")
    value_dim = value_heads * value_width
    kernel = text.whole("linear_conv_kernel_dim")
    in_proj = hidden * (2 * key_dim + 2 * value_dim) + hidden * 2 * value_heads
    conv = (2 * key_dim + value_dim) * kernel
    # dt_bias and A_log per value head, the gated norm over one head, the output projection
    return in_proj + conv + 2 * value_heads + value_width + value_dim * hidden


def dense_mlp(text: Fields, width: int, model_type: str) -> int:
    hidden = text.whole("hidden_size")
    params = 3 * hidden * width
    if model_type == "llama" and text.flag("mlp_bias"):
        params += 2 * width + hidden
    return params


def moe_mlp(text: Fields, model_type: str) -> Counts:
    """One MoE layer: router, routed experts and any shared expert."""
    hidden = text.whole("hidden_size")
    experts = expert_count(text)
    per_token = experts_per_token(text)
    if model_type == "gpt_oss":
        width = text.whole("intermediate_size")
        # gate_up_proj and down_proj with their biases (GptOssExperts); the router is biased
        one = hidden * 2 * width + 2 * width + width * hidden + hidden
        router = hidden * experts + experts
        shared = 0
    elif model_type == "llama4_text":
        width = text.whole("intermediate_size")
        one = 3 * hidden * width
        router = hidden * experts
        shared = 3 * hidden * width  # Llama4TextMoe.shared_expert
    else:
        width_field = "intermediate_size" if model_type == "mixtral" else "moe_intermediate_size"
        width = text.whole(width_field)
        one = 3 * hidden * width
        router = hidden * experts
        shared = 0
        if model_type in ("deepseek_v3", "deepseek_v32", "glm4_moe"):
            router += experts  # e_score_correction_bias, saved in the checkpoint
            shared = 3 * hidden * width * text.whole("n_shared_experts", minimum=0)
        elif model_type == "qwen3_next":
            shared_width = text.whole("shared_expert_intermediate_size", minimum=0)
            shared = 3 * hidden * shared_width + hidden  # shared_expert and its gate
    return Counts(router + shared + experts * one, experts * one, per_token * one)


def dense_mlp_width(text: Fields, model_type: str) -> int:
    """The MLP width of a layer without experts (Llama 4's intermediate_size is an expert's)."""
    return text.whole(
        "intermediate_size_mlp" if model_type == "llama4_text" else "intermediate_size"
    )


def language_model(text: Fields, model_type: str, kinds: list[str], moe: list[bool]) -> Counts:
    hidden = text.whole("hidden_size")
    vocab = text.whole("vocab_size")
    tied = text.flag("tie_word_embeddings")
    counts = Counts(vocab * hidden * (1 if tied else 2) + hidden)  # embeddings, head, final norm
    norms = (4 if model_type in FOUR_NORM_TYPES else 2) * hidden
    dense_width = dense_mlp_width(text, model_type)
    for kind, routed in zip(kinds, moe, strict=True):
        if kind == "mla":
            attention = mla_attention(text)
        elif kind == "linear":
            attention = linear_attention(text)
        else:
            attention = gqa_attention(text, model_type)
        if routed:
            counts = counts + moe_mlp(text, model_type)
        else:
            counts = counts + Counts(dense_mlp(text, dense_width, model_type))
        counts = counts + Counts(attention + norms)
    return counts


def vision_tower(vision: Fields, text_hidden: int, model_type: str) -> int:
    """The image encoder and projector vLLM loads beside the language model (Gemma 3's SigLIP,
    Llama 4's vision model). Other encoders are refused by the caller."""
    hidden = vision.whole("hidden_size")
    width = vision.whole("intermediate_size")
    layers = vision.whole("num_hidden_layers")
    patch = vision.whole("patch_size")
    channels = vision.whole("num_channels")
    patches = (vision.whole("image_size") // patch) ** 2
    # Per encoder layer: q, k, v, o with biases, a biased two-layer MLP, two biased LayerNorms.
    layer = 4 * (hidden * hidden + hidden) + 2 * hidden * width + width + hidden + 4 * hidden
    if model_type == "siglip_vision_model":
        if vision.flag("vision_use_head"):
            raise vision.refuse(
                "vision_use_head", "is true: servestack counts SigLIP towers without the "
                "pooling head (as Gemma 3 ships them)", "pass the model's published config.json",
            )  # fmt: skip
        embeddings = channels * patch * patch * hidden + hidden + patches * hidden
        # post-layernorm; Gemma3MultiModalProjector: a projection and an RMSNorm
        return embeddings + layers * layer + 2 * hidden + hidden * text_hidden + hidden
    # Llama4VisionModel: class token, positions (+1 for it), an unbiased patch projection,
    # pre/post LayerNorms, the pixel-shuffle MLP adapter, and the projector into the text width.
    embeddings = hidden + (patches + 1) * hidden + channels * patch * patch * hidden
    projector_in = vision.whole("projector_input_dim")
    adapter = width * projector_in + vision.whole("projector_output_dim") ** 2
    projector = vision.whole("vision_output_dim") * text_hidden
    return embeddings + 4 * hidden + layers * layer + adapter + projector


VISION_TYPES = frozenset({"siglip_vision_model", "llama4_vision_model"})
