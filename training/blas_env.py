"""OpenBLAS core selection for PyTorch on CPUs that Debian 12's OpenBLAS
0.3.21 does not know.

That OpenBLAS predates Sapphire Rapids and Zen 4/5: on them it falls back
to its SSE3 "Prescott" kernels, and PyTorch's float32 matrix products
(BLAS_INFO=generic: they go to OpenBLAS) run about 6-12x slower than with
its AVX-512 ones (Transformer training here: 250 against 3190 target
tokens/s). OPENBLAS_CORETYPE names the kernels to use instead; OpenBLAS
reads it when the library loads, so `use_cpu_kernels()` must run before
`import torch`. A value already in the environment is kept."""
import os


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def coretype(flags):
    """The OpenBLAS kernels for CPUs with these flags (None: let it detect)."""
    if "avx512f" in flags:
        return "Cooperlake" if "avx512_bf16" in flags else "SkylakeX"
    return "Haswell" if "avx2" in flags and "fma" in flags else None


def use_cpu_kernels():
    """Sets OPENBLAS_CORETYPE from the CPU flags unless it is set; returns
    the value in force (None: OpenBLAS detects)."""
    if "OPENBLAS_CORETYPE" not in os.environ:
        c = coretype(cpu_flags())
        if c:
            os.environ["OPENBLAS_CORETYPE"] = c
    return os.environ.get("OPENBLAS_CORETYPE")
