// relocate_kv: move a span's K/V to new paged-cache slots, rotating K by a RoPE position
// delta. One thread block per token; threads stride over heads * head_size. Math in fp32.
// Plain CUDA with a C launcher (no torch headers), so it builds with nvcc alone; the torch
// op lives in relocate_kv_binding.cpp. Build check without a GPU:
//   nvcc -std=c++17 -c csrc/relocate_kv.cu -o /tmp/relocate_kv.o   (or: python -m arc_vllm.kernels.relocate_kv_cuda)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ inline T from_float(float x);
template <> __device__ inline float from_float<float>(float x) { return x; }
template <> __device__ inline __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

struct CacheView {
  int64_t block_size, stride_block, stride_offset, stride_head;
  __device__ int64_t row(int64_t slot) const {
    return (slot / block_size) * stride_block + (slot % block_size) * stride_offset;
  }
};

template <typename T, typename C, bool IS_NEOX>
__global__ void relocate_kv_kernel(const T* __restrict__ src_key, const T* __restrict__ src_value,
                                   const int64_t* __restrict__ src_slots, CacheView src,
                                   T* __restrict__ dst_key, T* __restrict__ dst_value,
                                   const int64_t* __restrict__ dst_slots, CacheView dst,
                                   const int64_t* __restrict__ pos_delta,
                                   const C* __restrict__ cos_sin, int64_t cos_sin_stride,
                                   int num_heads, int head_size, int rotary_dim) {
  const int64_t token = blockIdx.x;
  const int64_t src_base = src.row(src_slots[token]);
  const int64_t dst_base = dst.row(dst_slots[token]);
  const int64_t delta = pos_delta[token];
  const C* row = cos_sin + (delta < 0 ? -delta : delta) * cos_sin_stride;
  const float sin_sign = delta < 0 ? -1.f : 1.f;
  const int half = rotary_dim / 2;
  for (int i = threadIdx.x; i < num_heads * head_size; i += blockDim.x) {
    const int head = i / head_size, dim = i % head_size;
    const int64_t s = src_base + head * src.stride_head, d = dst_base + head * dst.stride_head;
    dst_value[d + dim] = src_value[s + dim];
    float key = to_float(src_key[s + dim]);
    if (dim < rotary_dim) {
      int freq, partner;
      float sign;
      if (IS_NEOX) {
        freq = dim < half ? dim : dim - half;
        partner = dim < half ? dim + half : dim - half;
        sign = dim < half ? -1.f : 1.f;
      } else {
        freq = dim / 2;
        partner = dim ^ 1;
        sign = (dim % 2 == 0) ? -1.f : 1.f;
      }
      const float c = to_float(row[freq]), sn = sin_sign * to_float(row[half + freq]);
      key = key * c + sign * to_float(src_key[s + partner]) * sn;
    }
    dst_key[d + dim] = from_float<T>(key);
  }
}

template <typename T, typename C>
void launch_typed(const void* src_key, const void* src_value, const int64_t* src_slots,
                  CacheView src, void* dst_key, void* dst_value, const int64_t* dst_slots,
                  CacheView dst, const int64_t* pos_delta, const void* cos_sin,
                  int64_t cos_sin_stride, int64_t num_tokens, int num_heads, int head_size,
                  int rotary_dim, bool is_neox, cudaStream_t stream) {
  const int threads = num_heads * head_size >= 256 ? 256 : 128;
  auto kernel = is_neox ? relocate_kv_kernel<T, C, true> : relocate_kv_kernel<T, C, false>;
  kernel<<<num_tokens, threads, 0, stream>>>(
      static_cast<const T*>(src_key), static_cast<const T*>(src_value), src_slots, src,
      static_cast<T*>(dst_key), static_cast<T*>(dst_value), dst_slots, dst, pos_delta,
      static_cast<const C*>(cos_sin), cos_sin_stride, num_heads, head_size, rotary_dim);
}

template <typename T>
void launch_cache_typed(int cos_sin_dtype, const void* src_key, const void* src_value,
                        const int64_t* src_slots, CacheView src, void* dst_key, void* dst_value,
                        const int64_t* dst_slots, CacheView dst, const int64_t* pos_delta,
                        const void* cos_sin, int64_t cos_sin_stride, int64_t num_tokens,
                        int num_heads, int head_size, int rotary_dim, bool is_neox,
                        cudaStream_t stream) {
  switch (cos_sin_dtype) {
    case 0: return launch_typed<T, float>(src_key, src_value, src_slots, src, dst_key, dst_value,
                                          dst_slots, dst, pos_delta, cos_sin, cos_sin_stride,
                                          num_tokens, num_heads, head_size, rotary_dim, is_neox,
                                          stream);
    case 1: return launch_typed<T, __half>(src_key, src_value, src_slots, src, dst_key, dst_value,
                                           dst_slots, dst, pos_delta, cos_sin, cos_sin_stride,
                                           num_tokens, num_heads, head_size, rotary_dim, is_neox,
                                           stream);
    default: return launch_typed<T, __nv_bfloat16>(src_key, src_value, src_slots, src, dst_key,
                                                   dst_value, dst_slots, dst, pos_delta, cos_sin,
                                                   cos_sin_stride, num_tokens, num_heads,
                                                   head_size, rotary_dim, is_neox, stream);
  }
}

}  // namespace

// dtype codes: 0 float32, 1 float16, 2 bfloat16. Returns the launch's cudaError_t.
extern "C" int arc_relocate_kv_launch(
    int dtype, int cos_sin_dtype, const void* src_key, const void* src_value,
    const int64_t* src_slots, const int64_t* src_layout, void* dst_key, void* dst_value,
    const int64_t* dst_slots, const int64_t* dst_layout, const int64_t* pos_delta,
    const void* cos_sin, int64_t cos_sin_stride, int64_t num_tokens, int num_heads,
    int head_size, int rotary_dim, bool is_neox, void* stream_handle) {
  CacheView src{src_layout[0], src_layout[1], src_layout[2], src_layout[3]};
  CacheView dst{dst_layout[0], dst_layout[1], dst_layout[2], dst_layout[3]};
  cudaStream_t stream = static_cast<cudaStream_t>(stream_handle);
  switch (dtype) {
    case 0: launch_cache_typed<float>(cos_sin_dtype, src_key, src_value, src_slots, src, dst_key,
                                      dst_value, dst_slots, dst, pos_delta, cos_sin,
                                      cos_sin_stride, num_tokens, num_heads, head_size,
                                      rotary_dim, is_neox, stream); break;
    case 1: launch_cache_typed<__half>(cos_sin_dtype, src_key, src_value, src_slots, src, dst_key,
                                       dst_value, dst_slots, dst, pos_delta, cos_sin,
                                       cos_sin_stride, num_tokens, num_heads, head_size,
                                       rotary_dim, is_neox, stream); break;
    default: launch_cache_typed<__nv_bfloat16>(cos_sin_dtype, src_key, src_value, src_slots, src,
                                               dst_key, dst_value, dst_slots, dst, pos_delta,
                                               cos_sin, cos_sin_stride, num_tokens, num_heads,
                                               head_size, rotary_dim, is_neox, stream);
  }
  return static_cast<int>(cudaGetLastError());
}
