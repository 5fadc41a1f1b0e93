"""Model and training presets: two that run on a CPU, and real sizes for NPUs/GPUs.

A preset is plain data (no MindSpore import): the ``LlamaConfig`` fields of the model and the
training defaults commonly recommended for that size (batch, learning rate, warmup).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Dict


@dataclass(frozen=True)
class Preset:
    """One model size with its training defaults."""

    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    intermediate_size: int
    vocab_size: int
    seq_length: int
    micro_batch: int
    grad_accum: int
    lr: float            # peak learning rate
    precision: str       # default precision on a device that supports it
    steps: int           # default total optimizer steps
    save_every: int      # default checkpoint interval in optimizer steps
    n_kv_heads: int = 0  # 0: same as num_heads
    cpu_ok: bool = False  # fits and runs at a usable speed on a CPU
    loss_scale_window: int = 1000   # fp16 dynamic loss scaling: clean steps before the scale doubles
    hang_after_s: float = 0.0       # seconds without a step that mean "hung" (0: the rules' 900 s)
    notes: str = ""

    def llama_fields(self) -> Dict[str, object]:
        """The ``LlamaConfig`` size fields of this preset."""
        fields = {"num_layers": self.num_layers, "hidden_size": self.hidden_size,
                  "num_heads": self.num_heads, "intermediate_size": self.intermediate_size,
                  "vocab_size": self.vocab_size, "seq_length": self.seq_length,
                  "batch_size": self.micro_batch}
        if self.n_kv_heads:
            fields["n_kv_heads"] = self.n_kv_heads
        return fields

    def as_dict(self) -> Dict[str, object]:
        return asdict(self)


PRESETS: Dict[str, Preset] = {p.name: p for p in (
    Preset("tiny", num_layers=2, hidden_size=128, num_heads=4, intermediate_size=384,
           vocab_size=2048, seq_length=64, micro_batch=8, grad_accum=1, lr=1e-3,
           precision="fp32", steps=200, save_every=50, cpu_ok=True, loss_scale_window=50,
           hang_after_s=60.0,
           notes="~0.95M parameters; tests and the demo (CPU, >= 5 steps/s)"),
    Preset("small", num_layers=4, hidden_size=256, num_heads=8, intermediate_size=768,
           vocab_size=8192, seq_length=128, micro_batch=8, grad_accum=2, lr=6e-4,
           precision="fp32", steps=2000, save_every=250, cpu_ok=True, loss_scale_window=200,
           hang_after_s=180.0,
           notes="~7.4M parameters; a longer CPU run"),
    Preset("llama-1b", num_layers=16, hidden_size=2048, num_heads=16, intermediate_size=5632,
           vocab_size=32000, seq_length=2048, micro_batch=2, grad_accum=32, lr=3e-4,
           precision="bf16", steps=50000, save_every=1000,
           notes="1.1B (TinyLlama-like); one NPU/GPU"),
    Preset("llama-7b", num_layers=32, hidden_size=4096, num_heads=32, intermediate_size=11008,
           vocab_size=32000, seq_length=2048, micro_batch=1, grad_accum=64, lr=3e-4,
           precision="bf16", steps=100000, save_every=1000,
           notes="LLaMA-7B shape; global batch 512 on 8 devices (1 x 64 x 8)"),
    Preset("llama-13b", num_layers=40, hidden_size=5120, num_heads=40, intermediate_size=13824,
           vocab_size=32000, seq_length=2048, micro_batch=1, grad_accum=64, lr=1e-4,
           precision="bf16", steps=100000, save_every=2000,
           notes="LLaMA-13B shape; add model/pipeline parallel on real hardware"),
)}


def parameter_count(preset: Preset) -> int:
    """Trainable parameters of the Llama of ``preset`` (untied embeddings, RMSNorm, SwiGLU)."""
    h, f, v, n = preset.hidden_size, preset.intermediate_size, preset.vocab_size, preset.num_layers
    kv = h if not preset.n_kv_heads else h // preset.num_heads * preset.n_kv_heads
    per_layer = h * h * 2 + h * kv * 2 + 3 * h * f + 2 * h
    return v * h * 2 + n * per_layer + h
