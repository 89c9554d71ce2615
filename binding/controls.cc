#include "controls.h"

#include <c10/util/Exception.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

namespace flyops::binding {
namespace {

constexpr int kOps = static_cast<int>(Op::kCount);
const char* const kOpNames[kOps] = {"rms_norm", "rms_norm_backward", "topk", "gemm", "attention", "attention_backward"};

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}
int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || *v == '\0' ? 0 : std::atoi(v);
}

std::atomic<bool> g_enabled{!env_flag("FLYOPS_DISABLE")};
std::atomic<uint64_t> g_op_disabled{0};
std::atomic<int> g_log_level{env_int("FLYOPS_LOG")};

// The disabled() context rides on PyTorch's ThreadLocalDebugInfo, which ThreadLocalState
// captures when an autograd GraphTask starts and installs on the engine's worker threads.
// So `with flyops.disabled(): loss.backward()` also governs the backward kernels. The
// kind is a value outside PyTorch's own enumerators, reserved here for flyops.
//
// Nodes are immutable (a chain captured for a backward pass or a callback keeps the masks
// it had then). A push replaces this thread's flyops node with one holding the new mask, a
// pop puts the replaced one back, both beneath the nodes of PyTorch's own kinds on top of
// the chain (the profiler pops its node by kind, so it must stay on top): the profiler may
// start or stop inside a block in either order.
constexpr auto kContextKind = static_cast<c10::DebugInfoKind>(0xF1);

struct DisabledContext : c10::DebugInfoBase {
  explicit DisabledContext(uint64_t m) : mask(m) {}
  const uint64_t mask;
};

// What each push took off the chain and put on it, and the mask before it.
struct Pushed {
  std::shared_ptr<c10::DebugInfoBase> replaced, put;
  uint64_t before;
};
thread_local std::vector<Pushed> t_pushed;

using Peeled = std::vector<std::pair<c10::DebugInfoKind, std::shared_ptr<c10::DebugInfoBase>>>;

// The top node's info if the node is of `kind` (only _peek tells, by throwing), else null.
std::shared_ptr<c10::DebugInfoBase> top_of_kind(c10::DebugInfoKind kind) {
  if (!c10::ThreadLocalDebugInfo::current()) return nullptr;
  try {
    return c10::ThreadLocalDebugInfo::_peek(kind);
  } catch (const c10::Error&) {
    return nullptr;
  }
}

// Takes the nodes of PyTorch's own kinds off the top of this thread's chain, down to the
// first node of another kind (flyops' or anyone's); unpeel puts them back in order.
Peeled peel() {
  Peeled above;
  for (bool more = true; more;) {
    more = false;
    for (int k = 0; k <= static_cast<int>(c10::DebugInfoKind::TEST_INFO_2) && !more; ++k) {
      const auto kind = static_cast<c10::DebugInfoKind>(k);
      if (top_of_kind(kind) != nullptr) {
        above.emplace_back(kind, c10::ThreadLocalDebugInfo::_pop(kind));
        more = true;
      }
    }
  }
  return above;
}
void unpeel(const Peeled& above) {
  for (auto it = above.rbegin(); it != above.rend(); ++it) c10::ThreadLocalDebugInfo::_push(it->first, it->second);
}

struct OpStats {
  std::atomic<uint64_t> flyops{0};
  std::atomic<uint64_t> stock{0};
};
OpStats g_stats[kOps];
std::mutex g_reason_mu;
// Transparent comparison: a reason already counted is found without building a string.
std::map<std::string, uint64_t, std::less<>> g_reasons[kOps];

struct LogState {
  std::mutex mu;
  std::string last;
  uint64_t repeats = 0;
  void flush_repeats() {
    if (repeats > 0) std::fprintf(stderr, "flyops: (previous line repeated %llu more times)\n",
                                  static_cast<unsigned long long>(repeats));
    repeats = 0;
  }
  ~LogState() {
    flush_repeats();
    std::fflush(stderr);
  }
};
LogState g_log;

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

}  // namespace

const char* op_name(Op op) { return kOpNames[static_cast<int>(op)]; }

int op_index(const std::string& name) {
  for (int i = 0; i < kOps; ++i)
    if (name == kOpNames[i]) return i;
  return -1;
}

std::vector<std::string> op_names() { return std::vector<std::string>(kOpNames, kOpNames + kOps); }

uint64_t context_disabled_mask() {
  auto* ctx = static_cast<DisabledContext*>(c10::ThreadLocalDebugInfo::get(kContextKind));
  return ctx == nullptr ? 0 : ctx->mask;
}

bool active(Op op) {
  const uint64_t bit = uint64_t{1} << static_cast<int>(op);
  if (!g_enabled.load(std::memory_order_relaxed)) return false;
  if (g_op_disabled.load(std::memory_order_relaxed) & bit) return false;
  return (context_disabled_mask() & bit) == 0;
}

void set_enabled(bool on) { g_enabled.store(on); }
bool enabled() { return g_enabled.load(); }

void set_op_enabled(Op op, bool on) {
  const uint64_t bit = uint64_t{1} << static_cast<int>(op);
  if (on)
    g_op_disabled.fetch_and(~bit);
  else
    g_op_disabled.fetch_or(bit);
}
bool op_enabled(Op op) {
  return (g_op_disabled.load() & (uint64_t{1} << static_cast<int>(op))) == 0;
}

void push_disabled(uint64_t mask) {
  const uint64_t before = context_disabled_mask();
  const Peeled above = peel();
  std::shared_ptr<c10::DebugInfoBase> replaced = top_of_kind(kContextKind);
  if (replaced != nullptr) c10::ThreadLocalDebugInfo::_pop(kContextKind);
  auto put = std::make_shared<DisabledContext>(before | mask);  // nested contexts add up
  c10::ThreadLocalDebugInfo::_push(kContextKind, put);
  unpeel(above);
  t_pushed.push_back({std::move(replaced), std::move(put), before});
}

void pop_disabled() {
  if (t_pushed.empty()) return;
  const Pushed last = t_pushed.back();
  t_pushed.pop_back();
  const Peeled above = peel();
  if (top_of_kind(kContextKind) == last.put) {
    c10::ThreadLocalDebugInfo::_pop(kContextKind);
    if (last.replaced != nullptr) c10::ThreadLocalDebugInfo::_push(kContextKind, last.replaced);
  } else {
    // Another kind's node above ours, or the chain replaced since: cover it with the mask
    // from before the push instead.
    c10::ThreadLocalDebugInfo::_push(kContextKind, std::make_shared<DisabledContext>(last.before));
  }
  unpeel(above);
}

int log_level() { return g_log_level.load(std::memory_order_relaxed); }
void set_log_level(int level) {
  std::lock_guard<std::mutex> lock(g_log.mu);
  g_log.flush_repeats();
  g_log.last.clear();
  g_log_level.store(level);
}

void log_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_log.mu);
  if (g_log_level.load() < 2 && line == g_log.last) {
    ++g_log.repeats;
    return;
  }
  g_log.flush_repeats();
  std::fprintf(stderr, "flyops: %s\n", line.c_str());
  std::fflush(stderr);
  g_log.last = line;
}

void count(Op op, bool to_flyops, const char* reason) {
  OpStats& s = g_stats[static_cast<int>(op)];
  if (to_flyops) {
    s.flyops.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  s.stock.fetch_add(1, std::memory_order_relaxed);
  const std::string_view why(reason);
  std::lock_guard<std::mutex> lock(g_reason_mu);
  auto& reasons = g_reasons[static_cast<int>(op)];
  if (auto it = reasons.find(why); it != reasons.end())
    ++it->second;
  else
    reasons.emplace(why, 1);
}

std::string stats_json() {
  std::ostringstream o;
  std::lock_guard<std::mutex> lock(g_reason_mu);
  o << "{";
  for (int i = 0; i < kOps; ++i) {
    o << (i ? ", " : "") << "\"" << kOpNames[i] << "\": {\"flyops\": " << g_stats[i].flyops.load()
      << ", \"stock\": " << g_stats[i].stock.load() << ", \"stock_reasons\": {";
    bool first = true;
    for (const auto& [reason, n] : g_reasons[i]) {
      o << (first ? "" : ", ") << "\"" << json_escape(reason) << "\": " << n;
      first = false;
    }
    o << "}}";
  }
  o << "}";
  return o.str();
}

void reset_stats() {
  std::lock_guard<std::mutex> lock(g_reason_mu);
  for (int i = 0; i < kOps; ++i) {
    g_stats[i].flyops.store(0);
    g_stats[i].stock.store(0);
    g_reasons[i].clear();
  }
}

}  // namespace flyops::binding
