// Torch binding for relocate_kv: registers torch.ops.arc_vllm.relocate_kv (CUDA only) and
// hands raw pointers, layouts and the caller's stream to the plain-CUDA launcher in
// relocate_kv.cu. Shapes and values are checked in Python (arc_vllm.kernels.relocate_kv)
// before this is called; here only what the launcher relies on is asserted. The stream
// comes in as an integer handle (torch.cuda.current_stream().cuda_stream), so this file
// needs no CUDA headers and compiles against a CPU build of torch too (the build check).
#include <torch/library.h>
#include <torch/types.h>

extern "C" int arc_relocate_kv_launch(
    int dtype, int cos_sin_dtype, const void* src_key, const void* src_value,
    const int64_t* src_slots, const int64_t* src_layout, void* dst_key, void* dst_value,
    const int64_t* dst_slots, const int64_t* dst_layout, const int64_t* pos_delta,
    const void* cos_sin, int64_t cos_sin_stride, int64_t num_tokens, int num_heads,
    int head_size, int rotary_dim, bool is_neox, void* stream_handle);

namespace {

int dtype_code(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat: return 0;
    case at::kHalf: return 1;
    case at::kBFloat16: return 2;
    default: TORCH_CHECK(false, "relocate_kv: unsupported dtype ", tensor.scalar_type());
  }
}

void relocate_kv_cuda(const at::Tensor& src_key, const at::Tensor& src_value,
                      const at::Tensor& src_slots, at::Tensor& dst_key, at::Tensor& dst_value,
                      const at::Tensor& dst_slots, const at::Tensor& pos_delta,
                      const at::Tensor& cos_sin_cache, bool is_neox, int64_t stream) {
  TORCH_CHECK(dst_key.is_cuda() && src_key.is_cuda(), "relocate_kv: CUDA tensors expected");
  TORCH_CHECK(src_key.dtype() == dst_key.dtype(), "relocate_kv: source/destination dtypes differ");
  TORCH_CHECK(src_key.stride(3) == 1 && dst_key.stride(3) == 1, "relocate_kv: head_size not contiguous");
  const int64_t src_layout[4] = {src_key.size(1), src_key.stride(0), src_key.stride(1), src_key.stride(2)};
  const int64_t dst_layout[4] = {dst_key.size(1), dst_key.stride(0), dst_key.stride(1), dst_key.stride(2)};
  const int64_t num_tokens = src_slots.numel();
  if (num_tokens == 0) return;
  const int status = arc_relocate_kv_launch(
      dtype_code(dst_key), dtype_code(cos_sin_cache), src_key.data_ptr(), src_value.data_ptr(),
      src_slots.data_ptr<int64_t>(), src_layout, dst_key.data_ptr(), dst_value.data_ptr(),
      dst_slots.data_ptr<int64_t>(), dst_layout, pos_delta.data_ptr<int64_t>(),
      cos_sin_cache.data_ptr(), cos_sin_cache.stride(0), num_tokens,
      static_cast<int>(dst_key.size(2)), static_cast<int>(dst_key.size(3)),
      static_cast<int>(cos_sin_cache.size(1)), is_neox,
      reinterpret_cast<void*>(stream));
  TORCH_CHECK(status == 0, "relocate_kv: CUDA launch failed with error ", status);
}

}  // namespace

TORCH_LIBRARY(arc_vllm, m) {
  m.def("relocate_kv(Tensor src_key, Tensor src_value, Tensor src_slots, Tensor(a!) dst_key, "
        "Tensor(b!) dst_value, Tensor dst_slots, Tensor pos_delta, Tensor cos_sin_cache, "
        "bool is_neox, int stream) -> ()");
}

TORCH_LIBRARY_IMPL(arc_vllm, CUDA, m) { m.impl("relocate_kv", &relocate_kv_cuda); }
