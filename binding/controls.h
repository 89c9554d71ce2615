// Process-wide and per-thread controls shared by every overridden op: enable/disable,
// per-op switches, the disabled() context (carried into autograd's worker threads),
// the routing log and the counters behind flyops.stats().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flyops::binding {

enum class Op : int { kRmsNorm = 0, kRmsNormBackward, kTopk, kGemm, kAttention, kAttentionBackward, kCount };

const char* op_name(Op op);
// -1 for an unknown name.
int op_index(const std::string& name);
std::vector<std::string> op_names();

// Whether calls of `op` on this thread may go to flyops: globally enabled, the op enabled,
// and no enclosing disabled() context covering it (in this thread or the thread that
// started the autograd pass).
bool active(Op op);

void set_enabled(bool on);
bool enabled();
void set_op_enabled(Op op, bool on);
bool op_enabled(Op op);

// disabled() context: push a mask of ops (all bits: every op) for this thread; pop restores
// exactly what was there before the matching push.
void push_disabled(uint64_t mask);
void pop_disabled();
uint64_t context_disabled_mask();

// Routing log (FLYOPS_LOG=1 or set_log_level(1)): one line per decision, consecutive
// identical lines counted instead of repeated. Level 2 prints every line.
int log_level();
void set_log_level(int level);
void log_line(const std::string& line);

// Counters per op: calls routed to flyops and to stock, with stock reasons.
void count(Op op, bool to_flyops, const char* reason);
std::string stats_json();
void reset_stats();

}  // namespace flyops::binding
