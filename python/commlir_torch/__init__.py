"""commlir_torch: PyTorch FX graphs (DTensor, FSDP, functional collectives) → commlir IR."""
