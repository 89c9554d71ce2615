// Host side of the attention forward: what the kernel takes, the tensor maps (through the
// tile layer's per-thread cache), and the one launch function that turns head dim and dtype
// into template parameters.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <type_traits>

#include "common/smem_opt_in.h"
#include "flyops/attention.h"
#include "flyops/device.h"
#include "flyops/tile/tma.h"
#include "kernel.cuh"
#include "maps.h"

namespace flyops {
namespace {

using attention::g_last_error;
using attention::shape_of;
using attention::strides_ok;

Support fail(const char* r) { return Support{false, r}; }

// The one choice of Config for a call, handed to f as values of that type and of the
// element type (the maps' key block and the launch both come from it). Tiles after
// FlashAttention-3's (hopper/tile_size.h), measured here (perf-notes, attention forward
// v5-v8): from 4096 keys, 176-key blocks at D = 128 (a block's fixed costs, the turn, the
// waits and O's rescale, over 1.4x the keys: 0.90-0.97x time; causal too since v7's mask,
// 0.98-0.99x; at 512-1024 keys the last block is mostly waste, 1.01-1.18x) and at D = 64
// 192 query rows on three consumer warpgroups with 128-key blocks (v8: 0.87-0.96x of the
// 192-key blocks on two; non-causal rows take them from 512 queries and keys, v9:
// 0.88-0.97x, causal ones only from 4096 keys: 1.02-1.15x slower below); 80 at D = 256
// (the most that fits two stages of both rings beside Q: 0.95-0.97x from 1024 keys); else
// 128; bf16 D = 128 non-causal at 4096-8191 keys 160-key blocks on the persistent walk (v14:
// 0.99x of the 176-key ones there, 1.01-1.02x slower from 8192, v11), and non-causal long
// rows a first block only as wide as its keys (v13). Non-causal D = 64 and 128 take the configs
// without the mask's code (kCausal false) at every length: 0.97-0.99x below 4096 keys.
// A non-causal config whose first block (the last along the keys) is only as wide as its
// keys need (Config::kFirstWidth): the narrowest generated wgmma width that covers them.
template <int kD, int kBN, typename F>
auto with_first_width(int64_t Lk, F&& f) {
  using attention::Config;
  const int64_t keys = Lk - (Lk - 1) / kBN * kBN;  // 1 .. kBN
  if (keys <= 16) return f(Config<kD, kBN, false, 2, 16>{});
  if (keys <= 32) return f(Config<kD, kBN, false, 2, 32>{});
  if (keys <= 64) return f(Config<kD, kBN, false, 2, 64>{});
  if (keys <= 80) return f(Config<kD, kBN, false, 2, 80>{});
  if (keys <= 96) return f(Config<kD, kBN, false, 2, 96>{});
  if (keys <= 128) return f(Config<kD, kBN, false, 2, 128>{});
  return f(Config<kD, kBN, false>{});
}

template <typename T, typename F>
auto with_config_of(const AttnParams& p, F&& f) {
  using attention::Config;
  // D = 128's 176-key blocks in bf16 only: fp16 measured 0.98-1.02x of the 128-key ones
  // (even), while D = 64's three warpgroups took fp16 to 0.84-0.97x (twenty-first session).
  constexpr bool kWide128 = std::is_same_v<T, tile::bf16>;
  const bool long_keys = p.Lk >= 4096;
  switch (p.D) {
    case 64:
      // 192 query rows (three consumer warpgroups, FlashAttention-3's D = 64 tile) with
      // 128-key blocks; they fit 160 registers now that the loop's mask is cheap.
      if (long_keys || (!p.causal && p.Lq >= 512 && p.Lk >= 512))
        return p.causal ? f(Config<64, 128, true, 3>{}, T{}) : f(Config<64, 128, false, 3>{}, T{});
      if (p.causal) return f(Config<64, 128, true>{}, T{});
      return f(Config<64, 128, false>{}, T{});
    case 128:
      if constexpr (kWide128)
        if (long_keys) {
          if (p.causal) return f(Config<128, 176, true>{}, T{});
          if (p.Lk < 8192)  // 160-key blocks on the persistent walk
            return with_first_width<128, 160>(p.Lk, [&](auto cfg) { return f(cfg, T{}); });
          return with_first_width<128, 176>(p.Lk, [&](auto cfg) { return f(cfg, T{}); });
        }
      if (p.causal) return f(Config<128, 128, true>{}, T{});
      return f(Config<128, 128, false>{}, T{});
    default: return f(Config<256, 80, true>{}, T{});  // the mask-free form measured 1.01-1.04x slower here
  }
}
template <typename F>
auto with_config(const AttnParams& p, F&& f) {
  return p.dtype == DType::kBFloat16 ? with_config_of<tile::bf16>(p, f) : with_config_of<tile::fp16>(p, f);
}

// The four maps as the kernel uses them (q, k, v, the output): boxes of a query block, a
// key/value block of the call's config, and a warp's 16 output rows.
void map_shapes(const AttnParams& p, tile::TmaShape (&s)[4]) {
  const auto kv_rows = static_cast<uint32_t>(with_config(p, [](auto cfg, auto) { return decltype(cfg)::kBN; }));
  s[0] = shape_of(p.q, p.B, p.H, p.Lq, p.D, with_config(p, [](auto cfg, auto) { return decltype(cfg)::kBM; }));
  s[1] = shape_of(p.k, p.B, p.Hkv, p.Lk, p.D, kv_rows);
  s[2] = shape_of(p.v, p.B, p.Hkv, p.Lk, p.D, kv_rows);
  s[3] = shape_of(p.o, p.B, p.H, p.Lq, p.D, attention::kStoreRows);
}

// The config's kernel (only that one instantiated).
template <typename Cfg, typename T>
constexpr auto fwd_kernel() {
  if constexpr (Cfg::kPersistent)
    return &flyops_attention_fwd_persistent<Cfg, T>;
  else
    return &flyops_attention_fwd<Cfg, T>;
}

template <typename Cfg, typename T>
Status launch(const AttnParams& p, const CUtensorMap& mq, const CUtensorMap& mk, const CUtensorMap& mv,
              const CUtensorMap& mo) {
  constexpr auto kernel = fwd_kernel<Cfg, T>();
  if (!smem_opt_in<kernel, Cfg::kSmemBytes>(p.device)) return Status::kCudaError;
  attention::Args a;
  a.Lq = static_cast<int>(p.Lq);
  a.Lk = static_cast<int>(p.Lk);
  a.q_blocks = static_cast<int>((p.Lq + Cfg::kBM - 1) / Cfg::kBM);
  a.heads = static_cast<int>(p.H);
  const int64_t tiles = a.q_blocks * p.H * p.B;  // < 2^31 (attention_supports)
  a.tiles = static_cast<int>(tiles);
  a.group = static_cast<int>(p.H / p.Hkv);
  a.scale_log2 = p.scale * 1.4426950408889634f;
  a.causal = p.causal;
  a.offset = static_cast<int>(p.causal_offset);
  a.lse = p.lse;
  a.lse_stride_b = p.lse_stride_b;
  a.lse_stride_h = p.lse_stride_h;
  dim3 grid(static_cast<unsigned>(a.q_blocks), static_cast<unsigned>(p.H), static_cast<unsigned>(p.B));
  if constexpr (Cfg::kPersistent) {  // a CTA per SM (one fits: kSmemBytes), or per tile when fewer
    const int64_t sms = device_info(p.device).sm_count;
    grid = dim3(static_cast<unsigned>(sms > 0 && tiles > sms ? sms : tiles));
  }
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, static_cast<cudaStream_t>(p.stream)>>>(mq, mk, mv, mo, a);
  return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

}  // namespace

Support attention_supports(const AttnParams& p, const DeviceInfo& dev) {
  if (!dev.is_sm90()) return fail("flyops kernels need compute capability 9.0 (H100/H200)");
  if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16) return fail("dtype not bfloat16 or float16");
  if (p.D != 64 && p.D != 128 && p.D != 256) return fail("head dim not 64, 128 or 256");
  if (const char* why = attention::shape_problem(p)) return fail(why);
  if (p.B > 65535 || p.H > 65535) return fail("more than 65535 batch entries or heads");  // grid y and z
  if ((p.Lq + 63) / 64 * p.H * p.B >= (int64_t{1} << 31)) return fail("2^31 or more query blocks");  // the walk's int
  for (const AttnTensor* t : {&p.q, &p.k, &p.v, &p.o})
    if (const char* why = strides_ok(*t)) return fail(why);
  tile::TmaShape shapes[4];
  map_shapes(p, shapes);
  for (const tile::TmaShape& s : shapes)
    if (const char* why = tile::tma_check(s)) return fail(why);
  return Support{true, ""};
}

Status attention_run(const AttnParams& p) {
  CUtensorMap m[4];
  tile::TmaShape shapes[4];
  map_shapes(p, shapes);
  static const char* const kNames[4] = {"q", "k", "v", "the output"};
  if (!attention::encode_maps(m, shapes, kNames, 4, p.dtype, g_last_error, sizeof(g_last_error)))
    return Status::kUnsupported;
  return with_config(p, [&](auto cfg, auto elem) {
    return launch<decltype(cfg), decltype(elem)>(p, m[0], m[1], m[2], m[3]);
  });
}

const char* attention_last_error() { return g_last_error; }

const char* attention_kernel_name(const AttnParams& p) {
  thread_local char name[80];
  std::snprintf(name, sizeof(name), "flyops_attention_fwd<%s,d%lld%s>", p.dtype == DType::kBFloat16 ? "bf16" : "fp16",
                static_cast<long long>(p.D), p.causal ? ",causal" : "");
  return name;
}

}  // namespace flyops
