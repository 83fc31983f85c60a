// The machine's shape and NUMA-aware memory, behind one small API. This file pair is the
// only user of hwloc (STYLE.md): the topology is loaded once per process and then read
// concurrently. Memory for the KV cache and scratch comes from numa_alloc(): anonymous
// pages, aligned to 2 MiB when large so transparent huge pages can back them, bound by
// policy before first touch (distribute = interleave over all nodes, isolate = node 0,
// none = the kernel's default first-touch). Binding is best effort: a container that
// forbids mbind() still gets plain memory, and memory_binding_note() says why.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ds/status.h"

namespace ds {

enum class NumaMode { kNone, kDistribute, kIsolate };

// "distribute" | "isolate" | "none"; anything else is an error naming the value.
Result<NumaMode> parse_numa_mode(std::string_view name);
const char* numa_mode_name(NumaMode mode);

struct NumaNode {
  int os_index = 0;
  int n_cores = 0;            // physical cores whose PUs belong to the node
  int n_pus = 0;              // hardware threads
  uint64_t memory_bytes = 0;  // local memory (0 when the OS does not say)
};

struct Topology {
  bool from_hwloc = false;  // false: hwloc failed; counts come from the C++ runtime
  int n_packages = 1;
  int n_cores = 1;        // physical cores the process may run on
  int n_pus = 1;          // hardware threads the process may run on
  uint64_t l3_bytes = 0;  // sum over all L3 caches (0 if unknown)
  uint64_t total_memory_bytes = 0;
  std::vector<NumaNode> nodes;
  bool smt() const { return n_pus > n_cores; }
};

// Loaded once (thread-safe), then shared.
const Topology& topology();

// Memory bound per `mode`; zero-filled (fresh anonymous pages). nullptr when the OS
// refuses the mapping. Release with numa_free(ptr, bytes) using the same byte count.
void* numa_alloc(size_t bytes, NumaMode mode);
void numa_free(void* ptr, size_t bytes);
// Why the last numa_alloc could not bind (empty when it did, or when mode was kNone).
std::string memory_binding_note();

// Move-only owner of a numa_alloc() region.
class NumaBuffer {
 public:
  NumaBuffer() = default;
  static Result<NumaBuffer> allocate(size_t bytes, NumaMode mode);
  ~NumaBuffer();
  NumaBuffer(NumaBuffer&& other) noexcept;
  NumaBuffer& operator=(NumaBuffer&& other) noexcept;
  NumaBuffer(const NumaBuffer&) = delete;
  NumaBuffer& operator=(const NumaBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Locks [ptr, ptr + bytes) in RAM (e.g. mmapped weights for --mlock). The error names
// the byte count and RLIMIT_MEMLOCK so the operator knows what to raise.
Status lock_memory(const void* ptr, size_t bytes);

// Binds the calling thread to physical core `core` (0-based among the cores the process
// may use, wrapping around). False where the OS or hwloc refuses; the thread then
// stays unbound, which is slower but correct.
bool pin_current_thread_to_core(int core);

}  // namespace ds
