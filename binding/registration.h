#pragma once

namespace flyops::binding {

// Installs every aten override on the CUDA key. Idempotent.
void register_overrides();

}  // namespace flyops::binding
