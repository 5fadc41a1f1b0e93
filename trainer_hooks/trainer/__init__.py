"""The bundled trainer: MindFormers' ``LlamaForCausalLM`` pretrained on offline text with the hooks on.

``python -m trainer_hooks.trainer`` (or ``msdoctor train``) runs it. It follows the usual
habits of LLM pretraining: a pre-tokenized flat token file read by memmap, parallel loading with static
shapes, AdamW 0.9/0.95/0.1, warmup + cosine, clipping at 1.0, gradient accumulation that counts
optimizer updates, complete step-numbered checkpoints, seeds with a per-rank offset and a recorded
config. ``--inject`` reproduces the symptoms msdoctor's rules know on the real run.

Importing this package is cheap: MindSpore and MindFormers are imported inside functions.
"""
