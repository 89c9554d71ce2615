// Fresh inputs each run, and a way to repeat one: every generator starts from this run's
// seed (printed once; FLYOPS_TEST_SEED=<seed> repeats it) mixed with a per-test salt.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace flyops::tests {

inline uint32_t run_seed() {
  static const uint32_t seed = [] {
    const char* e = std::getenv("FLYOPS_TEST_SEED");
    const uint32_t s = e != nullptr && *e != '\0' ? static_cast<uint32_t>(std::strtoul(e, nullptr, 10))
                                                  : std::random_device{}();
    std::printf("flyops C++ tests: seed %u (FLYOPS_TEST_SEED=%u repeats these inputs)\n", s, s);
    return s;
  }();
  return seed;
}

inline uint32_t seeded(uint32_t salt) { return run_seed() ^ (salt * 0x9E3779B9u); }

}  // namespace flyops::tests
