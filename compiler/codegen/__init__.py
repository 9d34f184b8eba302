"""Code generation: LLVM IR kernels per node, target machines, objects and bundles."""
