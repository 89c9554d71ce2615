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
// Each thread puts one node of that kind into its chain, once, and from then on only
// changes the mask the node holds: push and pop never add or remove nodes. Nodes others
// push (the profiler's, which it pops by kind and which must then be on top) can so come
// and go across a disabled() block in any order. The node goes beneath the nodes of
// PyTorch's own kinds already on top, for the same reason.
constexpr auto kContextKind = static_cast<c10::DebugInfoKind>(0xF1);

struct DisabledContext : c10::DebugInfoBase {
  explicit DisabledContext(uint64_t m) : mask(m) {}
  std::atomic<uint64_t> mask;    // read by the threads this chain reaches
  std::vector<uint64_t> before;  // the mask before each push (this thread's only)
};

thread_local std::shared_ptr<DisabledContext> t_context;

// The top node's kind, where it is one of PyTorch's own (only _peek tells, by throwing).
bool top_kind(c10::DebugInfoKind& kind) {
  if (!c10::ThreadLocalDebugInfo::current()) return false;
  for (int k = 0; k <= static_cast<int>(c10::DebugInfoKind::TEST_INFO_2); ++k) {
    try {
      c10::ThreadLocalDebugInfo::_peek(static_cast<c10::DebugInfoKind>(k));
      kind = static_cast<c10::DebugInfoKind>(k);
      return true;
    } catch (const c10::Error&) {
    }
  }
  return false;
}

// This thread's node, in its chain; a new one starts from the mask the chain holds now
// (an autograd worker's chain holds the starting thread's node).
DisabledContext& this_thread_context() {
  auto* found = static_cast<DisabledContext*>(c10::ThreadLocalDebugInfo::get(kContextKind));
  if (found != nullptr && found == t_context.get()) return *t_context;
  t_context = std::make_shared<DisabledContext>(found == nullptr ? 0 : found->mask.load());
  std::vector<std::pair<c10::DebugInfoKind, std::shared_ptr<c10::DebugInfoBase>>> above;
  c10::DebugInfoKind kind;
  while (top_kind(kind)) above.emplace_back(kind, c10::ThreadLocalDebugInfo::_pop(kind));
  c10::ThreadLocalDebugInfo::_push(kContextKind, t_context);
  for (auto it = above.rbegin(); it != above.rend(); ++it) c10::ThreadLocalDebugInfo::_push(it->first, it->second);
  return *t_context;
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
  return ctx == nullptr ? 0 : ctx->mask.load(std::memory_order_relaxed);
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
  DisabledContext& c = this_thread_context();
  const uint64_t now = c.mask.load(std::memory_order_relaxed);
  c.before.push_back(now);
  c.mask.store(now | mask, std::memory_order_relaxed);  // nested contexts add up
}

void pop_disabled() {
  DisabledContext* c = t_context.get();
  if (c == nullptr || c->before.empty()) return;
  c->mask.store(c->before.back(), std::memory_order_relaxed);
  c->before.pop_back();
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
