// ds-cli bench --json-schema FILE: decode with sampling and feedback (each sampled token is
// the next input), once unconstrained and once under the schema's grammar, with the same
// seed; reports both speeds and the mask cost per token (docs/constrained-decoding.md).
#pragma once
#include <string>

#include "ds/engine.h"

namespace ds::cli {

struct ConstrainedBench {
  double free_tps = 0;         // tokens per second, unconstrained sampling
  double constrained_tps = 0;  // tokens per second under the grammar
  double mask_ms = 0;          // mean mask time per constrained token (cache hits included)
  double miss_mask_ms = 0;     // mean time of a mask computed by a trie walk (cache misses)
  double hit_rate = 0;         // share of masks served from the cache
  int n_outputs = 0;           // complete documents generated in the constrained run
};

Result<ConstrainedBench> bench_constrained(Engine& e, const std::string& schema_path, int n_gen);

}  // namespace ds::cli
