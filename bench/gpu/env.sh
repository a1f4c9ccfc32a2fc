# Source on the GPU machine before commlir-run --backend cuda:
#   . bench/gpu/env.sh
# cudarc dlopens libcuda.so(.1), libcublas.so.13 and libnccl.so by name, the runtime
# libcudnn.so.9. PyTorch's wheels
# ship NCCL as libnccl.so.2 (a name cudarc does not try) and cuBLAS outside the loader's path,
# so this links both into one folder and puts it on LD_LIBRARY_PATH. It also keeps NVLink
# multicast off (NVLS needs exclusive use of the NVSwitch fabric, which shared hosts lack).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
_commlir_libs=${COMMLIR_LIB_DIR:-/tmp/commlir-libs}
mkdir -p "$_commlir_libs"
_py=$(command -v python3 || true)
_site=""
[ -n "$_py" ] && _site=$("$_py" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
for d in $_site /usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  for f in "$d"/nvidia/nccl/lib/libnccl.so.2 "$d"/libnccl.so.2; do
    [ -e "$f" ] && [ ! -e "$_commlir_libs/libnccl.so" ] && ln -sf "$f" "$_commlir_libs/libnccl.so"
  done
  for f in "$d"/nvidia/cu13/lib/libcublas.so.13 "$d"/nvidia/cublas/lib/libcublas.so.13 "$d"/libcublas.so.13; do
    if [ -e "$f" ] && [ ! -e "$_commlir_libs/libcublas.so.13" ]; then
      ln -sf "$f" "$_commlir_libs/libcublas.so.13"
      lt=$(dirname "$f")/libcublasLt.so.13
      [ -e "$lt" ] && ln -sf "$lt" "$_commlir_libs/libcublasLt.so.13"
    fi
  done
  # cuDNN (fused attention): libcudnn.so.9 loads its sub-libraries by soname, so all of them.
  if [ -e "$d/nvidia/cudnn/lib/libcudnn.so.9" ] && [ ! -e "$_commlir_libs/libcudnn.so.9" ]; then
    for f in "$d"/nvidia/cudnn/lib/libcudnn*.so.9; do ln -sf "$f" "$_commlir_libs/$(basename "$f")"; done
  fi
done
export LD_LIBRARY_PATH="$_commlir_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
