// hwloc behind numa.h. One process-wide topology, loaded on first use; hwloc documents
// concurrent read-only use (binding queries and calls) of a loaded topology as safe.
// Anonymous memory is mapped with mmap so that it can be aligned for huge pages and
// bound before any page is touched; the first touch then places pages per the policy.
#include "runtime/numa.h"

#include <hwloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

namespace ds {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;           // x86-64 transparent huge page size
constexpr uint64_t kMaxL3PerCore = uint64_t{64} << 20;  // largest shipping: ~12 MiB (Genoa-X)

struct Hwloc {
  hwloc_topology_t topo = nullptr;
  Topology info;

  Hwloc() {
    if (hwloc_topology_init(&topo) != 0) {
      topo = nullptr;
      fallback();
      return;
    }
    if (hwloc_topology_load(topo) != 0) {
      hwloc_topology_destroy(topo);
      topo = nullptr;
      fallback();
      return;
    }
    describe();
  }
  ~Hwloc() {
    if (topo) hwloc_topology_destroy(topo);
  }

  void fallback() {
    const unsigned n = std::thread::hardware_concurrency();
    info.n_cores = info.n_pus = n > 0 ? static_cast<int>(n) : 1;
    info.nodes.push_back({0, info.n_cores, info.n_pus, 0});
  }

  void describe() {
    info.from_hwloc = true;
    info.n_packages = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE));
    info.n_cores = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE));
    info.n_pus = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU));
    const int n_l3 = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_L3CACHE);
    for (int i = 0; i < n_l3; ++i) {
      // Hypervisors sometimes report nonsense (508 MiB per core on one cloud VM); real
      // parts stay far below kMaxL3PerCore per core sharing the cache.
      hwloc_obj_t l3 = hwloc_get_obj_by_type(topo, HWLOC_OBJ_L3CACHE, i);
      const int sharing = std::max(1, hwloc_get_nbobjs_inside_cpuset_by_type(topo, l3->cpuset, HWLOC_OBJ_CORE));
      if (l3->attr->cache.size <= kMaxL3PerCore * sharing) info.l3_bytes += l3->attr->cache.size;
    }
    info.total_memory_bytes = hwloc_get_root_obj(topo)->total_memory;
    const int n_nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n_nodes; ++i) {
      hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
      NumaNode nn;
      nn.os_index = static_cast<int>(node->os_index);
      nn.n_cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, node->cpuset, HWLOC_OBJ_CORE);
      nn.n_pus = hwloc_get_nbobjs_inside_cpuset_by_type(topo, node->cpuset, HWLOC_OBJ_PU);
      nn.memory_bytes = node->attr ? node->attr->numanode.local_memory : 0;
      info.nodes.push_back(nn);
    }
    if (info.nodes.empty()) info.nodes.push_back({0, info.n_cores, info.n_pus, info.total_memory_bytes});
  }
};

Hwloc& hwloc() {
  static Hwloc h;
  return h;
}

std::mutex g_note_mu;
std::string g_note;

void set_note(std::string note) {
  std::lock_guard<std::mutex> lock(g_note_mu);
  g_note = std::move(note);
}

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// Maps `len` bytes (a page multiple) aligned to `align`, trimming the over-mapping.
void* map_aligned(size_t len, size_t align) {
  const size_t span = len + align;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (base + align - 1) / align * align;
  if (aligned > base) munmap(raw, aligned - base);
  const uintptr_t tail = aligned + len, end = base + span;
  if (end > tail) munmap(reinterpret_cast<void*>(tail), end - tail);
  return reinterpret_cast<void*>(aligned);
}

// Applies the NUMA policy to a fresh mapping; records why when it cannot.
void bind_area(void* ptr, size_t len, NumaMode mode) {
  Hwloc& h = hwloc();
  if (mode == NumaMode::kNone) {
    set_note("");
    return;
  }
  if (!h.topo) {
    set_note("hwloc topology unavailable; memory left unbound");
    return;
  }
  if (h.info.nodes.size() < 2) {
    set_note("single NUMA node; nothing to bind");
    return;
  }
  hwloc_nodeset_t set = nullptr;
  hwloc_membind_policy_t policy = HWLOC_MEMBIND_BIND;
  if (mode == NumaMode::kDistribute) {
    set = hwloc_bitmap_dup(hwloc_get_root_obj(h.topo)->nodeset);
    policy = HWLOC_MEMBIND_INTERLEAVE;
  } else {
    set = hwloc_bitmap_dup(hwloc_get_obj_by_type(h.topo, HWLOC_OBJ_NUMANODE, 0)->nodeset);
  }
  const int rc = hwloc_set_area_membind(h.topo, ptr, len, set, policy, HWLOC_MEMBIND_BYNODESET);
  const int err = errno;
  hwloc_bitmap_free(set);
  set_note(rc == 0 ? ""
                   : std::string("hwloc_set_area_membind(") + numa_mode_name(mode) + ") failed: " + std::strerror(err) +
                         "; memory left unbound");
}

}  // namespace

Result<NumaMode> parse_numa_mode(std::string_view name) {
  if (name == "none") return NumaMode::kNone;
  if (name == "distribute") return NumaMode::kDistribute;
  if (name == "isolate") return NumaMode::kIsolate;
  return Status::error("unknown --numa mode '" + std::string(name) + "' (expected distribute, isolate or none)");
}

const char* numa_mode_name(NumaMode mode) {
  switch (mode) {
    case NumaMode::kDistribute:
      return "distribute";
    case NumaMode::kIsolate:
      return "isolate";
    case NumaMode::kNone:
      break;
  }
  return "none";
}

const Topology& topology() {
  return hwloc().info;
}

void* numa_alloc(size_t bytes, NumaMode mode) {
  if (bytes == 0) bytes = 1;
  const size_t len = round_up(bytes, page_size());
  const bool huge = len >= kHugePage;
  void* ptr = map_aligned(len, huge ? kHugePage : page_size());
  if (!ptr) return nullptr;
  // Best effort: THP set to "madvise" backs only advised regions; "never" ignores it.
  if (huge) (void)madvise(ptr, len, MADV_HUGEPAGE);
  bind_area(ptr, len, mode);
  return ptr;
}

void numa_free(void* ptr, size_t bytes) {
  if (!ptr) return;
  if (bytes == 0) bytes = 1;
  munmap(ptr, round_up(bytes, page_size()));
}

std::string memory_binding_note() {
  std::lock_guard<std::mutex> lock(g_note_mu);
  return g_note;
}

Result<NumaBuffer> NumaBuffer::allocate(size_t bytes, NumaMode mode) {
  void* p = numa_alloc(bytes, mode);
  if (!p) {
    return Status::error("cannot map " + std::to_string(bytes) + " bytes of memory (" + numa_mode_name(mode) +
                         "): " + std::strerror(errno));
  }
  NumaBuffer b;
  b.data_ = static_cast<uint8_t*>(p);
  b.size_ = bytes;
  return b;
}

NumaBuffer::~NumaBuffer() {
  numa_free(data_, size_);
}

NumaBuffer::NumaBuffer(NumaBuffer&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

NumaBuffer& NumaBuffer::operator=(NumaBuffer&& other) noexcept {
  if (this != &other) {
    numa_free(data_, size_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

Status lock_memory(const void* ptr, size_t bytes) {
  if (bytes == 0 || mlock(ptr, bytes) == 0) return Status::ok();
  const int err = errno;
  struct rlimit rl {};
  std::string limit = "unknown";
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
    limit = rl.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(rl.rlim_cur) + " bytes";
  }
  return Status::error("mlock of " + std::to_string(bytes) + " bytes failed: " + std::strerror(err) +
                       " (RLIMIT_MEMLOCK is " + limit +
                       "; raise it with `ulimit -l` or LimitMEMLOCK= in the systemd unit)");
}

bool pin_current_thread_to_core(int core) {
  Hwloc& h = hwloc();
  if (!h.topo || core < 0) return false;
  hwloc_obj_t obj = hwloc_get_obj_by_type(h.topo, HWLOC_OBJ_CORE, core % h.info.n_cores);
  if (!obj || !obj->cpuset) return false;
  // One PU of the core: a thread that hops between SMT siblings loses its L1 state.
  hwloc_cpuset_t set = hwloc_bitmap_dup(obj->cpuset);
  hwloc_bitmap_singlify(set);
  const int rc = hwloc_set_cpubind(h.topo, set, HWLOC_CPUBIND_THREAD);
  hwloc_bitmap_free(set);
  return rc == 0;
}

}  // namespace ds
